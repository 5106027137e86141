"""Mutation testing of one module against a pytest selection (docs/testing.md): each mutant is one small change to
the module's source, from the fixed set of operators below; a mutant is killed when the selected tests fail on it.

    python tools/mutate.py albert_tf/fileio.py tests/test_fileio.py
    python tools/mutate.py albert_tf/data/corpus/sentences.py tests/data/test_corpus.py -- -k "sentence or cjk"
    python tools/mutate.py albert_tf/fileio.py tests/test_fileio.py --list          # the mutants, nothing run
    python tools/mutate.py albert_tf/fileio.py tests/test_fileio.py --only 12,40    # a few of them again
    python tools/mutate.py --commit C albert_tf/fileio.py tests/test_fileio.py --resume  # a stopped run goes on

The working tree is never written: the repository (its `albert_tf` package, `tests/`, top-level scripts and files;
`data/`, `bench/`, `docs/` and `shared/` as links), or with `--commit REV` that commit's files, is copied into a
temporary folder, the mutant is written into the
copy, and pytest runs there (`-x -q -p no:cacheprovider`, a timeout per mutant) with PYTHONPATH on the copy and no
bytecode written (a stale .pyc of another mutant of the same size and second could otherwise be run). Before the
mutants it checks that `albert_tf` and `tests` import from the copy and that the selected tests pass on the
unmutated module. The copy's file is restored after each mutant in a `finally`, and restored from its backup at
the start when a kept work folder (`--workdir`) holds one from an interrupted run.

The unmutated run also records which lines of the module each test runs (tools/mutate_plugin.py); each mutant
then runs the tests that ran its line first, quickest first, and the rest of the selection after them, so a
killed mutant stops early (`-x`) and a survivor has passed every selected test, as before.

A run stopped part-way (killed, or the session ended) keeps the mutants it ran in its report; the same command
with `--resume` goes on with the others, at the same commit, tests and selection (refused otherwise).

The report, bench/results/mutation/<dotted module>.json (or --report), lists every mutant (id, line, column,
operator, the original and mutated source, the outcome: killed, survived, timeout, which counts as killed; and
`tests_running_line`, how many tests ran its line in pytest's process: 0 on a survivor says no quick test reaches
it, unless only a subprocess or AutoGraph-converted code does) with the score per operator and in all. No
dependency beyond the standard library and pytest.

Operators (`OPERATORS`; each applies to every matching node outside docstrings, annotations, f-strings and the
arguments of logging calls):

  compare      a comparison operator negated: < >=, > <=, == !=, is / is not, in / not in (both ways)
  boundary     a strict comparison made inclusive and back: < <=, > >=
  integer      an integer constant n to n + 1 and to n - 1 (two mutants; not booleans)
  boolean      True <-> False
  boolop       `and` <-> `or`
  not          `not x` -> `x`
  negate       the condition of an `if`, `while` or conditional expression c -> `not (c)` (unless c is a
               comparison or a `not`, which the two operators above change)
  arith        + <-> -, * -> /, / -> *, // -> *, % -> // (binary operators and augmented assignments)
  return       `return x` -> `return None` (x not already None)
  args         the first two positional arguments of a call swapped (when their sources differ)
  statement    an assignment, augmented assignment or expression statement (a call) replaced by `pass`
"""

import argparse
import ast
import collections
import contextlib
import datetime
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORT_DIR = os.path.join(REPO, "bench", "results", "mutation")
OPERATORS = ("compare", "boundary", "integer", "boolean", "boolop", "not", "negate", "arith", "return", "args",
             "statement")
# Linked, not copied, into the work folder: read-only inputs of the tests (data/ holds the shipped models).
LINKED = ("data", "bench", "docs", "shared")
SKIPPED = (".git", "__pycache__", ".pytest_cache")
BACKUP_SUFFIX = ".mutate-backup"
PYTEST_ARGS = ("-x", "-q", "-p", "no:cacheprovider", "-p", "mutate_plugin")
PLUGIN = os.path.join(REPO, "tools", "mutate_plugin.py")

_NEGATED = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
_BOUNDARY = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_ARITH = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult,
          ast.Mod: ast.FloorDiv}
_LOGGING_NAMES = {"logger", "logging", "log", "_logger", "LOGGER"}


@dataclass
class Mutant:
    """One change: the source from `start` to `end` (character offsets into the module's text) becomes
    `replacement`. `line` and `col` are 1-based and 0-based, as Python reports them."""

    id: int
    operator: str
    line: int
    col: int
    start: int
    end: int
    original: str
    replacement: str

    def apply(self, source):
        return source[:self.start] + self.replacement + source[self.end:]


# ------------------------------------------------------------------------------------------------ mutant generation

class _Offsets:
    """Character offsets of (line, UTF-8 byte column) positions, as the `ast` module reports them."""

    def __init__(self, source):
        self.source = source
        # Lines as Python counts them (at \n only: str.splitlines would also break at \x0c, \u2028, ...).
        self.lines = re.findall(r"[^\n]*\n|[^\n]+$", source)
        self.line_starts = [0]
        for line in self.lines:
            self.line_starts.append(self.line_starts[-1] + len(line))

    def offset(self, line, byte_col):
        text = self.lines[line - 1] if line - 1 < len(self.lines) else ""
        return self.line_starts[line - 1] + len(text.encode("utf-8")[:byte_col].decode("utf-8"))

    def span(self, node):
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)


def _excluded_nodes(tree):
    """Ids of nodes no operator touches: docstrings, annotations, f-strings, the arguments of logging calls (and
    everything under them)."""
    roots = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                roots.append(body[0])
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            roots.extend(a.annotation for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs
                         if a.annotation is not None)
            if node.returns is not None:
                roots.append(node.returns)
        if isinstance(node, ast.AnnAssign):
            roots.append(node.annotation)
        if isinstance(node, ast.JoinedStr):
            roots.append(node)
        if isinstance(node, ast.Call) and _is_logging_call(node):
            roots.append(node)  # its arguments too (the statement holding the call may still go)
    excluded = set()
    for root in roots:
        excluded.update(id(n) for n in ast.walk(root))
    return excluded


def _is_logging_call(call):
    func = call.func
    while isinstance(func, ast.Attribute):
        if isinstance(func.value, ast.Name) and func.value.id in _LOGGING_NAMES:
            return True
        func = func.value
    return False


def _op_source(op):
    return {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is",
            ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}[type(op)]


def _candidates(tree, offsets):
    """(operator, node, replacement text) of every mutation of `tree`; the replacement stands for `node`'s
    source (an expression in parentheses, or a statement)."""
    excluded = _excluded_nodes(tree)
    text = offsets.source

    def src(node):
        start, end = offsets.span(node)
        return text[start:end]

    for node in ast.walk(tree):
        if id(node) in excluded or not hasattr(node, "lineno"):
            continue
        if isinstance(node, ast.Compare):
            for index, op in enumerate(node.ops):
                for name, table in (("compare", _NEGATED), ("boundary", _BOUNDARY)):
                    if type(op) in table:
                        ops = list(node.ops)
                        ops[index] = table[type(op)]()
                        parts = [src(node.left)]
                        for o, right in zip(ops, node.comparators):
                            parts += [_op_source(o), src(right)]
                        yield name, node, "(" + " ".join(parts) + ")"
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            for delta in (1, -1):
                yield "integer", node, f"({node.value + delta})"
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            yield "boolean", node, f"({not node.value})"
        elif isinstance(node, ast.BoolOp):
            joiner = " or " if isinstance(node.op, ast.And) else " and "
            yield "boolop", node, "(" + joiner.join(f"({src(v)})" for v in node.values) + ")"
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield "not", node, f"({src(node.operand)})"
        elif isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
            new = ast.BinOp(left=ast.Name("__LEFT__"), op=_ARITH[type(node.op)](), right=ast.Name("__RIGHT__"))
            symbol = ast.unparse(new).replace("__LEFT__", "").replace("__RIGHT__", "").strip()
            yield "arith", node, f"(({src(node.left)}) {symbol} ({src(node.right)}))"
        elif isinstance(node, ast.AugAssign) and type(node.op) in _ARITH:
            new = ast.AugAssign(target=ast.Name("__T__"), op=_ARITH[type(node.op)](), value=ast.Name("__V__"))
            symbol = ast.unparse(new).replace("__T__", "").replace("__V__", "").strip()
            yield "arith", node, f"{src(node.target)} {symbol} {src(node.value)}"
        if isinstance(node, (ast.If, ast.While, ast.IfExp)) and not isinstance(node.test, ast.Compare) and not (
                isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)):
            yield "negate", node.test, f"(not ({src(node.test)}))"
        if isinstance(node, ast.Return) and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None):
            yield "return", node, "return None"
        if isinstance(node, ast.Call) and len(node.args) >= 2 and not any(
                isinstance(a, ast.Starred) for a in node.args[:2]) and src(node.args[0]) != src(node.args[1]):
            yield "args", node, None  # spliced below: the two arguments' sources swapped
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Expr)) and not (
                isinstance(node, ast.Expr) and not isinstance(node.value, ast.Call)):
            yield "statement", node, "pass"


def changes(source, operators=OPERATORS):
    """Every change the operators can make to `source`, before the checks of `generate_mutants` (that it changes
    the code and parses): (start, end, operator, line, col, original, replacement) in source order."""
    tree = ast.parse(source)
    offsets = _Offsets(source)
    found = []
    for operator, node, replacement in _candidates(tree, offsets):
        if operator not in operators:
            continue
        if operator == "args":
            first, second = node.args[0], node.args[1]
            (a0, a1), (b0, b1) = offsets.span(first), offsets.span(second)
            start, end = a0, b1
            original = source[start:end]
            replacement = source[b0:b1] + source[a1:b0] + source[a0:a1]
        else:
            start, end = offsets.span(node)
            original = source[start:end]
        found.append((start, end, operator, node.lineno, node.col_offset, original, replacement))
    found.sort(key=lambda m: (m[0], m[1], OPERATORS.index(m[2]), m[6]))
    return found


def generate_mutants(source, operators=OPERATORS):
    """Every mutant of `source` (a module's text) for `operators`, in source order; each one parses."""
    mutants, seen = [], set()
    for start, end, operator, line, col, original, replacement in changes(source, operators):
        mutated = source[:start] + replacement + source[end:]
        if mutated == source or mutated in seen:
            continue
        try:
            compile(mutated, "<mutant>", "exec")
        except SyntaxError:
            continue
        if ast.dump(ast.parse(mutated)) == ast.dump(ast.parse(source)):
            continue  # only parentheses differ
        seen.add(mutated)
        mutants.append(Mutant(len(mutants), operator, line, col, start, end, original, replacement))
    return mutants


# ------------------------------------------------------------------------------------------------ the work folder

def occurrences(mutants):
    """{id: k} where the mutant is the k-th (from 0, in source order) of `mutants` making its change: operator and
    text before and after, whitespace collapsed. The k-th such change of a module stays the k-th as lines around
    it move, so reports of the same module at different commits are matched by it (tools/mutation_scores.py)."""
    seen, found = collections.Counter(), {}
    for m in sorted(mutants, key=lambda m: m.start):
        key = (m.operator, " ".join(m.original.split()), " ".join(m.replacement.split()))
        found[m.id] = seen[key]
        seen[key] += 1
    return found


def make_workdir(workdir=None, repo=REPO, commit=None):
    """A copy of the repository to run mutants in (see the module docstring): the working tree's files, or with
    `commit` that commit's (`git archive`); returns its path. A kept work folder is refreshed: its copies are made
    again."""
    workdir = workdir or tempfile.mkdtemp(prefix="albert_tf-mutate-")
    os.makedirs(workdir, exist_ok=True)
    names = sorted(os.listdir(repo))
    if commit:
        listed = subprocess.run(["git", "-C", repo, "ls-tree", "--name-only", commit], capture_output=True,
                                text=True, check=True).stdout.split()
        names = sorted(set(listed) | {n for n in LINKED if os.path.exists(os.path.join(repo, n))})
    for name in names:
        source, target = os.path.join(repo, name), os.path.join(workdir, name)
        if name in SKIPPED or name.startswith("."):
            continue
        if os.path.islink(target) or os.path.isfile(target):
            os.remove(target)
        elif os.path.isdir(target):
            shutil.rmtree(target)
        if name in LINKED:
            os.symlink(os.path.realpath(source), target)
        elif commit:
            archive = subprocess.run(["git", "-C", repo, "archive", "--format=tar", commit, name],
                                     capture_output=True, check=True).stdout
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(workdir, filter="data")
        elif os.path.isdir(source):
            shutil.copytree(source, target, symlinks=True, ignore=shutil.ignore_patterns(*SKIPPED))
        else:
            shutil.copy2(source, target)
    shutil.copy2(PLUGIN, os.path.join(workdir, os.path.basename(PLUGIN)))
    return workdir


@contextlib.contextmanager
def mutated_file(path, source):
    """Writes `source` to `path` for the block, then the original back, whatever happens. The original is kept in
    `<path>.mutate-backup` while the block runs; `restore_leftover` puts it back after a crash."""
    backup = path + BACKUP_SUFFIX
    restore_leftover(path)
    shutil.copy2(path, backup)
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        yield path
    finally:
        os.replace(backup, path)


def restore_leftover(path):
    """Puts back the original that an interrupted run left in `<path>.mutate-backup`; True when there was one."""
    backup = path + BACKUP_SUFFIX
    if os.path.exists(backup):
        os.replace(backup, path)
        return True
    return False


def _env(workdir, **extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "TF_CONFIG") and not k.startswith("MUTATE_")}
    env.update(PYTHONPATH=workdir, PYTHONDONTWRITEBYTECODE="1", TF_CPP_MIN_LOG_LEVEL="2",
               CUDA_VISIBLE_DEVICES="-1", **extra)
    return env


def check_imports(workdir):
    """Raises unless `albert_tf` and `tests` import from `workdir` there."""
    code = "import albert_tf, tests.helpers; print(albert_tf.__file__); print(tests.helpers.REPO)"
    out = subprocess.run([sys.executable, "-c", code], cwd=workdir, env=_env(workdir), capture_output=True,
                         text=True, check=True).stdout.split()
    real = os.path.realpath(workdir)
    if not all(os.path.realpath(p).startswith(real + os.sep) or os.path.realpath(p) == real for p in out):
        raise RuntimeError(f"the tests would not import the copy in {workdir}: {out}")


def run_tests(workdir, tests, timeout, log=None, **plugin_env):
    """(outcome, seconds) of pytest on `tests` in `workdir`: passed, failed, or timeout (then pytest and every
    process it started are killed). Its output goes to the file `log` (default: nowhere). `plugin_env` sets
    tools/mutate_plugin.py's MUTATE_* variables (coverage of the baseline, the tests to run first)."""
    started = time.monotonic()
    command = [sys.executable, "-m", "pytest", *PYTEST_ARGS, *tests]
    output = open(log, "w", encoding="utf-8") if log else subprocess.DEVNULL  # pylint: disable=consider-using-with
    with output if log else contextlib.nullcontext(), subprocess.Popen(
            command, cwd=workdir, env=_env(workdir, **plugin_env), stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True) as process:
        try:
            returncode = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return "timeout", time.monotonic() - started
        finally:
            if process.poll() is None:  # interrupted: take the tests down with us
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
    if returncode == 5:
        raise RuntimeError(f"no test selected by {tests}")
    return ("passed" if returncode == 0 else "failed"), time.monotonic() - started


def _terminate(signum, frame):  # pylint: disable=unused-argument
    raise KeyboardInterrupt(f"signal {signum}")  # so that every `finally` (the restore) runs


def _sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def tests_running(mutant, coverage):
    """The node ids of the tests that ran any line of `mutant`'s original source in the baseline, quickest first."""
    lines = set(range(mutant.line, mutant.line + mutant.original.count("\n") + 1))
    running = [test for test, ran in coverage["lines"].items() if test and lines & set(ran)]
    return sorted(running, key=lambda test: (coverage["seconds"].get(test, 0.0), test))


def summarize(results):
    """{operator: {mutants, killed, survived, timeout, score}} and the same for "all"."""
    table = {}
    for name in [r["operator"] for r in results] + ["all"]:
        rows = [r for r in results if name in ("all", r["operator"])]
        killed = sum(r["status"] in ("killed", "timeout") for r in rows)
        table[name] = {"mutants": len(rows), "killed": killed, "timeout": sum(r["status"] == "timeout" for r in rows),
                       "survived": sum(r["status"] == "survived" for r in rows),
                       "score": round(killed / len(rows), 4) if rows else None}
    return table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("module", help="the module's path in the repository, e.g. albert_tf/fileio.py")
    parser.add_argument("tests", nargs="*", help="test files or node ids; pytest options (-k ...) after `--`")
    parser.add_argument("--operators", default=",".join(OPERATORS), help="comma-separated subset of OPERATORS")
    parser.add_argument("--only", default=None, help="comma-separated mutant ids to run (default: all)")
    parser.add_argument("--lines", default="", help="only mutants on these lines, FIRST-LAST")
    parser.add_argument("--timeout", type=float, default=0, help="seconds per mutant (default: 3 x baseline + 30)")
    parser.add_argument("--list", action="store_true", help="print the mutants and stop")
    parser.add_argument("--commit", default=None, help="mutate and test this commit's files (git archive) instead "
                        "of the working tree's (others' edits in progress left out)")
    parser.add_argument("--workdir", default=None, help="keep the copy here (default: a temporary folder, removed)")
    parser.add_argument("--report", default=None, help="the JSON report, a new file (default: bench/results/"
                        "mutation/<dotted module>[.at-<commit>].json)")
    parser.add_argument("--resume", action="store_true", help="go on with the run that this report (--report or "
                        "the default name) holds, stopped part-way: the same module source, commit, tests and "
                        "selection; the mutants it ran are kept, the others run")
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    tests = args.tests + extra
    if not tests:
        parser.error("no tests selected")
    module = os.path.relpath(os.path.abspath(args.module), REPO)
    if args.commit:
        args.commit = subprocess.run(["git", "-C", REPO, "rev-parse", args.commit], capture_output=True, text=True,
                                     check=True).stdout.strip()
        source = subprocess.run(["git", "-C", REPO, "show", f"{args.commit}:{module}"], capture_output=True,
                                text=True, check=True).stdout
    else:
        with open(os.path.join(REPO, module), encoding="utf-8") as f:
            source = f.read()
    mutants = generate_mutants(source, tuple(args.operators.split(",")))
    occurrence = occurrences(mutants)
    if args.only is not None:
        if not args.only.strip():
            parser.error("--only: no mutant ids given (none left to run?)")
        wanted = {int(i) for i in args.only.split(",")}
        mutants = [m for m in mutants if m.id in wanted]
    if args.lines:
        first, last = map(int, args.lines.split("-"))
        mutants = [m for m in mutants if first <= m.line <= last]
    if args.list:
        for m in mutants:
            print(f"{m.id:4d} {module}:{m.line}:{m.col} {m.operator:9s} {m.original!r} -> {m.replacement!r}")
        return 0
    stem = module.removesuffix(".py").replace(os.sep, ".") + (f".at-{args.commit[:7]}" if args.commit else "")
    path = args.report or os.path.join(REPORT_DIR, stem + ".json")
    report = {"module": module, "tests": tests, "operators": args.operators.split(","), "commit": args.commit,
              "source_sha256": hashlib.sha256(source.encode("utf-8")).hexdigest(),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "lines": args.lines or None, "only": args.only or None, "mutants_selected": len(mutants),
              "complete": False}
    results = []
    if args.resume:
        report, results = _stopped_run(parser, path, report)
        done = {r["id"] for r in results}
        mutants = [m for m in mutants if m.id not in done]
    elif os.path.exists(path):  # a stored run is a record: never written over
        parser.error(f"the report {os.path.relpath(path)} exists already; name another with --report")
    real_sha = _sha(os.path.join(REPO, module))
    signal.signal(signal.SIGTERM, _terminate)
    if args.workdir:
        restore_leftover(os.path.join(args.workdir, module))
    workdir = make_workdir(args.workdir, commit=args.commit)
    target = os.path.join(workdir, module)
    try:
        check_imports(workdir)
        log = os.path.join(workdir, "baseline.log")
        cover, first = os.path.join(workdir, "coverage.json"), os.path.join(workdir, "first.json")
        baseline, report["baseline_seconds"] = run_tests(workdir, tests, None, log, MUTATE_TARGET=target,
                                                         MUTATE_COVER_OUT=cover)
        if baseline != "passed":
            with open(log, encoding="utf-8") as f:
                print(f.read()[-5000:], file=sys.stderr)
            raise RuntimeError(f"the selected tests do not pass on the unmutated module: {tests}")
        with open(cover, encoding="utf-8") as f:
            coverage = json.load(f)
        timeout = args.timeout or 3 * report["baseline_seconds"] + 30
        print(f"{len(mutants)} mutants of {module} to run; baseline {report['baseline_seconds']:.1f}s, timeout "
              f"{timeout:.0f}s", file=sys.stderr)
        for m in mutants:
            running = tests_running(m, coverage)
            with open(first, "w", encoding="utf-8") as f:
                json.dump(running, f)
            with mutated_file(target, m.apply(source)):
                outcome, seconds = run_tests(workdir, tests, timeout, MUTATE_FIRST=first)
            status = {"failed": "killed", "passed": "survived", "timeout": "timeout"}[outcome]
            row = {k: v for k, v in asdict(m).items() if k not in ("start", "end")}
            results.append({**row, "occurrence": occurrence[m.id], "status": status, "seconds": round(seconds, 1),
                            "tests_running_line": len(running)})
            print(f"{m.id:4d} line {m.line:4d} {m.operator:9s} {status:8s} {m.original!r} -> {m.replacement!r}",
                  file=sys.stderr)
            report["complete"] = len(results) == report["mutants_selected"]
            _write_report(path, report, results)  # after each mutant: an interrupted run keeps what it found
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    if _sha(os.path.join(REPO, module)) != real_sha:
        print(f"warning: {module} changed in the working tree during the run (someone else's edit?)", file=sys.stderr)
    _write_report(path, report, results)
    total = summarize(results)["all"]
    print(f"{module}: {total['killed']}/{total['mutants']} killed ({total['score']}), {total['survived']} survived; "
          f"report {path}", file=sys.stderr)
    return 0


def _stopped_run(parser, path, report):
    """(report, results) of the stopped run stored at `path`, after checking that `report` (this run's settings)
    would make the same mutants and test them alike; refuses a missing, finished or different run."""
    name = os.path.relpath(path)
    if not os.path.exists(path):
        parser.error(f"--resume: no report {name} to go on with")
    with open(path, encoding="utf-8") as f:
        stored = json.load(f)
    for key in ("module", "commit", "source_sha256", "tests", "operators", "lines", "only", "mutants_selected"):
        if stored.get(key) != report[key]:
            parser.error(f"--resume: {name} is a run with {key} {stored.get(key)!r}, not {report[key]!r}")
    if stored["complete"]:
        parser.error(f"--resume: {name} is a finished run; nothing to go on with")
    results = stored.pop("mutants")
    stored.pop("summary", None)
    stored["resumed"] = stored.get("resumed", []) + [report["date"]]
    return stored, results


def _write_report(path, report, results):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump({**report, "summary": summarize(results), "mutants": results}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    sys.exit(main())
