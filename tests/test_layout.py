"""The library's import rules (docs/design.md, "Import rules"), read from the source of every module, imports
inside functions included: which layer packages may import which, no circles between packages, and training code
(`tf.GradientTape`, `Model.fit`) only in `albert_tf/train/`. Also the layout's own rules: every module says what it
is for in a docstring, a package inside a layer (`data/glue/`, `data/squad/`, ...) has an `__init__` that only
re-exports its modules' names, and no module has the name of a package beside it."""

import ast
import os
import re

import pytest

from tests.helpers import REPO

PACKAGE_DIR = os.path.join(REPO, "albert_tf")
PACKAGES = ("model", "text", "data", "checkpoints", "train", "evaluation", "tasks", "serving", "scripts")
FORBIDDEN = {
    "model": {"train", "checkpoints", "data", "tasks", "serving", "evaluation", "text", "scripts"},
    "text": set(PACKAGES) - {"text"},
    "data": {"model", "train", "tasks", "serving", "checkpoints", "scripts"},
    "evaluation": {"model", "train", "tasks", "serving", "checkpoints", "scripts"},
    "checkpoints": {"train", "tasks", "serving", "data", "scripts"},
    "train": {"tasks", "serving", "data", "scripts"},
    "serving": {"tasks", "train", "data", "scripts"},
    "tasks": {"scripts"},
}


def _modules():
    """{path relative to albert_tf/: source} of every module."""
    found = {}
    for root, _, files in os.walk(PACKAGE_DIR):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as f:
                    found[os.path.relpath(path, PACKAGE_DIR)] = f.read()
    return found


def _package(relpath):
    """The layer package of a module (its first folder), or None for a top-level module."""
    head = relpath.split(os.sep)[0]
    return head if head in PACKAGES else None


def _imported_packages(source):
    """Layer packages a module's source imports, wherever the import stands."""
    imported = set()
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "albert_tf" and len(parts) > 1 and parts[1] in PACKAGES:
                imported.add(parts[1])
    return imported


MODULES = _modules()


def test_the_rules_see_every_package():
    assert {_package(p) for p in MODULES} - {None} == set(PACKAGES)
    assert _imported_packages("def f():\n    from albert_tf.train import runner\n") == {"train"}
    assert _imported_packages("from albert_tf import model, fileio\n") == {"model"}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_package_imports_only_what_its_layer_may(package):
    broken = {path: sorted(_imported_packages(source) & FORBIDDEN[package])
              for path, source in MODULES.items() if _package(path) == package}
    assert not {path: names for path, names in broken.items() if names}


def test_no_import_circles_between_packages():
    edges = {p: set() for p in PACKAGES}
    for path, source in MODULES.items():
        package = _package(path)
        if package:
            edges[package] |= _imported_packages(source) - {package}

    def reaches(start, goal, seen):
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in edges[start])

    assert not [p for p in PACKAGES if reaches(p, p, {p})]


def _module_graph():
    """{module: modules it imports} over the modules of albert_tf (dotted names; package `__init__`s left out:
    they only re-export), imports inside functions included."""
    names = {"albert_tf." + path[:-3].replace(os.sep, ".") for path in MODULES if not path.endswith("__init__.py")}
    graph = {}
    for path, source in MODULES.items():
        if path.endswith("__init__.py"):
            continue
        imported = set()
        for name in _imported_modules(source):
            while name and name not in names:  # `from albert_tf.x import name` of a module's attribute
                name = name.rpartition(".")[0]
            if name:
                imported.add(name)
        module = "albert_tf." + path[:-3].replace(os.sep, ".")
        graph[module] = imported - {module}
    return graph


def import_circles(graph):
    """Each circle of `graph` once, as the list of modules around it."""
    circles, done = [], set()

    def visit(node, path, on_path):
        for nxt in sorted(graph.get(node, ())):
            if nxt in on_path:
                circle = path[path.index(nxt):]
                if frozenset(circle) not in done:
                    done.add(frozenset(circle))
                    circles.append(circle)
            elif nxt not in visited:
                visited.add(nxt)
                visit(nxt, path + [nxt], on_path | {nxt})

    visited = set()
    for start in sorted(graph):
        if start not in visited:
            visited.add(start)
            visit(start, [start], {start})
    return circles


def test_no_import_circles_between_modules():
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []
    assert import_circles(_module_graph()) == []


def test_training_code_only_in_train():
    pattern = re.compile(r"GradientTape|\.fit\(")
    outside = [path for path, source in MODULES.items()
               if _package(path) != "train" and pattern.search(source)]
    assert not outside


def _imported_modules(source):
    """Every `albert_tf` module name a module's source imports (`from albert_tf import cli` gives albert_tf.cli)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in names if name.split(".")[0] == "albert_tf"}


def test_only_the_scripts_import_cli_and_settings_imports_nothing():
    """A layer's params declare their flags with `albert_tf.settings` (which imports nothing of albert_tf);
    `albert_tf.cli` (absl flags, the scripts' error handling) is the scripts' own."""
    assert _imported_modules("from albert_tf import cli, fileio\n") >= {"albert_tf.cli"}
    importing_cli = {path for path, source in MODULES.items() if _package(path)
                     and "albert_tf.cli" in _imported_modules(source)}
    assert importing_cli and {_package(path) for path in importing_cli} == {"scripts"}
    assert not _imported_modules(MODULES["settings.py"])


def test_every_module_has_a_docstring():
    assert not [path for path, source in MODULES.items() if ast.get_docstring(ast.parse(source)) is None]


def _subpackage_inits():
    """{path: source} of the `__init__` of every package inside a layer package (e.g. `data/squad/__init__.py`)."""
    return {path: source for path, source in MODULES.items()
            if os.path.basename(path) == "__init__.py" and len(path.split(os.sep)) > 2}


def test_a_subpackage_init_only_re_exports():
    inits = _subpackage_inits()
    assert {os.path.join("data", "glue", "__init__.py"), os.path.join("data", "squad", "__init__.py")} <= set(inits)
    for path, source in inits.items():
        imported, exported = set(), []
        for node in ast.parse(source).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                imported |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
            elif isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
                exported = ast.literal_eval(node.value)
            else:
                assert isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant), (path, ast.dump(node))
        assert exported and set(exported) <= imported, path


def test_no_module_is_named_as_a_package_beside_it():
    modules = {path[:-len(".py")] for path in MODULES if not path.endswith("__init__.py")}
    packages = {os.path.dirname(path) for path in MODULES if path.endswith("__init__.py")}
    assert not modules & packages
