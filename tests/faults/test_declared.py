"""Every script's declared inputs and outputs hold the guarantees of `albert_tf.guard`, whatever the script: the
cases are generated from the declarations (`albert_tf.settings.setting(role=...)`), so a new file flag is covered
here without a new test. For every output and input of every script: the same path (as given, through `..`, through
a symbolic link), the output inside an input read whole, the input inside an output written whole, among the names
an output folder's run writes or where an output's settings record goes, a second run holding the output, and an
output to be replaced that holds a file albert_tf did not write. Each case must end with its exit status, one stderr
line `<script>: error: ...` naming the flags, no traceback, and every file that was there byte-identical (nothing
written, nothing left)."""

import fnmatch
import functools
import json
import os
import re
import subprocess
import sys

import pytest

from albert_tf import settings_record
from tests.helpers import REPO, error_lines, subprocess_env, tree_snapshot

SCRIPTS = ("create_pretraining_data", "create_vocab", "prepare_corpus", "run_pretraining", "run_classifier", "convert",
           "run_squad", "run_race", "export_model", "predict")
TRAINING = ("run_pretraining", "run_classifier", "run_squad", "run_race")
INPUTS = ("input_file", "input_files", "input_dir", "input_tree", "input_checkpoint")
READ_WHOLE = ("input_tree", "input_checkpoint")
# What a user's command holds besides the two paths, so that the collision is the one thing wrong with it.
CONTEXT = {"run_classifier": ["--task_name=sst-2"]}


def _runner(script, *args):
    result = subprocess.run([sys.executable, "-m", "tests.faults.declared_runner", script, *args], cwd=REPO,
                            env=subprocess_env(), capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@functools.lru_cache(maxsize=None)
def declared(script):
    return _runner(script)


def _make_input(path, role):
    """An input of `role` at `path`, as a user would have it."""
    if role in ("input_file", "input_files"):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write("the user's data\n")
        return
    os.makedirs(path, exist_ok=True)
    name = {"input_tree": "saved_model.pb", "input_checkpoint": "ckpt-1.index"}.get(role, "train.tsv")
    with open(os.path.join(path, name), "w", encoding="utf-8") as f:
        f.write("the user's model\n")


def _written_name(pattern):
    return re.sub(r"\{[^}]*\}", "1", pattern).replace("*", "1")


def collision_cases(script, root):
    """[(id, argv, flags the error must name)] of one script, its inputs made under `root`."""
    specs = declared(script)
    inputs = {n: s for n, s in specs.items() if s["role"] in INPUTS}
    outputs = {n: s for n, s in specs.items() if s["role"] and s["role"] not in INPUTS}
    cases = []
    for out, out_spec in outputs.items():
        for inp, in_spec in inputs.items():
            base = os.path.join(root, f"{out}-{inp}")
            # a prefix writes <prefix><suffix>: the input is one of those files
            suffix = out_spec["writes"][0] if out_spec["role"] == "output_prefix" else ""
            source = os.path.join(base, "data", "input")
            _make_input(source + suffix, in_spec["role"])
            os.symlink(source + suffix, os.path.join(base, "link" + suffix))
            spelled = os.path.join(base, "data", "..", "data", "input")
            for kind, value in (("same", source), ("dotdot", spelled), ("symlink", os.path.join(base, "link"))):
                cases.append((f"{out}={kind}:{inp}", [f"--{inp}={source}{suffix}", f"--{out}={value}",
                                                      *CONTEXT.get(script, ())], [f"--{out}", f"--{inp}"]))
            if in_spec["role"] in READ_WHOLE:
                cases.append((f"{out}=inside:{inp}", [f"--{inp}={source}", f"--{out}={source}/saved_model.pb",
                                                      *CONTEXT.get(script, ())], [f"--{out}", f"--{inp}"]))
            if out_spec["records"]:  # the run's settings record would replace the input
                value = os.path.join(base, "recorded", "output")
                record = settings_record.record_path(out_spec["role"], value)
                _make_input(record, in_spec["role"])
                cases.append((f"{out}=record:{inp}", [f"--{inp}={record}", f"--{out}={value}",
                                                      *CONTEXT.get(script, ())], [f"--{out}", f"--{inp}"]))
            if out_spec["role"] == "output_prefix":
                continue
            names = ["user_file"] if out_spec["role"] == "output_tree" else [
                _written_name(p) for p in out_spec["writes"] if not fnmatch.fnmatch("user_file", p)]
            for name in names[:2]:
                folder = os.path.join(base, "out")
                _make_input(os.path.join(folder, name), in_spec["role"])
                cases.append((f"{inp}=inside:{out}:{name}", [f"--{inp}={folder}/{name}", f"--{out}={folder}",
                                                             *CONTEXT.get(script, ())], [f"--{out}", f"--{inp}"]))
    return cases


def _check(script, case_id, result, status, names, before, root):
    lines = error_lines(result["stderr"])
    shown = f"{case_id}: status {result['status']}, stderr:\n{result['stderr'][-3000:]}"
    assert result["status"] == status, shown
    assert "Traceback" not in result["stderr"], shown
    assert len(lines) == 1 and lines[0].startswith(f"{script}.py: error: "), shown
    for name in names:
        assert name in lines[0], shown
    assert tree_snapshot(root) == before, f"{case_id}: files changed"


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_declares_where_its_settings_are_recorded(script):
    """A training run records its settings in its --output_dir (the runner, at its start: a resume is checked
    against them); every other script beside the output it declares `records=True` (the guard, once the run has
    succeeded), two such outputs only where one run writes one of them."""
    specs = declared(script)
    recorded = [name for name, spec in specs.items() if spec["records"]]
    if script in TRAINING:
        assert not recorded and settings_record.SETTINGS_JSON in specs["output_dir"]["writes"]
        return
    assert recorded, f"{script}: no output declares records=True"
    for a in recorded:
        for b in recorded:
            assert a == b or b in specs[a]["excludes"] or a in specs[b]["excludes"], (a, b)


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_declared_files_never_collide(script, tmp_path):
    root = tmp_path / "files"
    cases = collision_cases(script, str(root))
    assert cases, f"{script} declares no input and output"
    before = tree_snapshot(root)
    path = tmp_path / "cases.json"
    path.write_text(json.dumps([{"argv": argv} for _, argv, _ in cases]))
    results = _runner(script, "--cases", str(path))
    assert len(results) == len(cases)
    for (case_id, _, names), result in zip(cases, results):
        _check(script, case_id, result, 2, names, before, root)


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_declared_outputs_are_held_for_the_run(script, tmp_path):
    """A second run on an output another run holds is refused at once, naming the holder's pid; and an output
    folder to be replaced that holds a file albert_tf did not write is refused before any work."""
    specs = declared(script)
    outputs = {n: s for n, s in specs.items() if s["role"] and s["role"] not in INPUTS}
    root = tmp_path / "files"
    cases = []
    for out, spec in outputs.items():
        path = str(root / out / "target")
        os.makedirs(os.path.dirname(path))
        cases.append((f"{out}:held", {"argv": [f"--{out}={path}"], "hold": [[f"--{out}", path, spec["role"]]]}))
        if spec["role"] == "output_tree":
            foreign = root / out / "tree"
            foreign.mkdir()
            (foreign / "thesis.tex").write_text("the user's thesis")
            overwrite = ["--overwrite"] if "overwrite" in json.dumps(list(specs)) else []
            cases.append((f"{out}:foreign", {"argv": [f"--{out}={foreign}", *overwrite]}))
    before = tree_snapshot(root)
    (tmp_path / "cases.json").write_text(json.dumps([case for _, case in cases]))
    results = _runner(script, "--cases", str(tmp_path / "cases.json"))
    assert len(results) == len(cases)
    for (case_id, case), result in zip(cases, results):
        out = case["argv"][0].split("=")[0]
        if case_id.endswith(":held"):
            _check(script, case_id, result, 1, [out, "in use by another run", f"pid {result['holders'][0]}"],
                   before, root)
        else:
            _check(script, case_id, result, 1, [out, "thesis.tex"], before, root)


def _outside(spec):
    """A value just outside a setting's bounds (a `settings.Range` as a dict), of the flag's kind (of its items, for
    a list)."""
    bounds = spec["bounds"]
    step = 1 if spec["kind"] == "integer" or spec.get("items") == "int" else 0.5
    if bounds["low"] is not None:
        low = bounds["low"]
        return low if bounds["low_open"] else low - step
    high = bounds["high"]
    return high if bounds["high_open"] else high + step


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_declared_bounds_are_enforced(script, tmp_path):
    """A value outside a setting's declared bounds is one line naming the flag and its rule, exit status 2, before
    anything runs; the first of several such flags (in the order given) is the one named."""
    specs = declared(script)
    bounded = {n: s for n, s in specs.items() if s["bounds"]}
    cases = [(name, [f"--{name}={_outside(spec)}"]) for name, spec in bounded.items()]
    if len(bounded) > 1:
        first, second = list(bounded)[-1], list(bounded)[0]
        cases.append((first, [f"--{first}={_outside(bounded[first])}", f"--{second}={_outside(bounded[second])}"]))
    (tmp_path / "cases.json").write_text(json.dumps([{"argv": argv} for _, argv in cases]))
    results = _runner(script, "--cases", str(tmp_path / "cases.json"))
    for (name, argv), result in zip(cases, results):
        _check(script, " ".join(argv), result, 2, [f"--{name}=", "must be"], {}, tmp_path / "nothing")


@pytest.mark.slow
def test_every_script_declares_its_files():
    """Each script's file flags carry a role (so the sweeps above reach them): no flag named like a file or folder
    is left undeclared."""
    undeclared = []
    for script in SCRIPTS:
        for name, spec in declared(script).items():
            looks_like_a_path = name.endswith(("_file", "_dir", "_checkpoint", "_path", "_handle"))
            if looks_like_a_path and spec["kind"] in ("string", "list") and not spec["role"]:
                undeclared.append(f"{script}: --{name}")
    assert not undeclared, undeclared
