"""What every benchmark gets from `bench/support/common.py` (the subcommand a first argument names, the command and
the default result file a run records, scratch folders) and `bench/support/original_compat.py` (an original
script's own imports found in its folder), without running a benchmark."""

import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from bench.support import common
from tests.helpers import REPO, subprocess_env


@pytest.fixture
def main_module(monkeypatch):
    """Sets `sys.argv` and the `__main__` module's spec as `python -m <module> <args>` sets them."""

    def run_as(module, *args):
        path = os.path.join(REPO, *module.split(".")) + ".py"
        monkeypatch.setattr(sys, "argv", [path, *args])
        monkeypatch.setitem(sys.modules, "__main__", types.SimpleNamespace(__spec__=types.SimpleNamespace(name=module)))

    return run_as


def test_the_first_argument_names_the_subcommand_and_the_others_are_its_own(main_module):
    calls = []
    subcommands = {"speed": lambda argv: calls.append(("speed", argv)),
                   "remat": lambda argv: calls.append(("remat", argv))}
    main_module("bench.bench_model", "remat", "--steps=2")
    common.run_subcommands(subcommands, "speed")
    main_module("bench.bench_model", "--rounds=1", "remat")
    common.run_subcommands(subcommands, "speed")
    path = os.path.join(REPO, "bench", "bench_model.py")
    assert calls == [("remat", [path, "--steps=2"]), ("speed", [path, "--rounds=1", "remat"])]
    assert sys.argv == [path, "--rounds=1", "remat"]  # left whole: the result records the command


def test_a_run_records_its_module_command_and_writes_the_benchmarks_result_file(main_module, tmp_path):
    main_module("bench.bench_model", "remat", "--steps=2", "--output_json=a b.json")
    assert common.command() == "python -m bench.bench_model remat --steps=2 '--output_json=a b.json'"
    assert common.result_path() == os.path.join(REPO, "bench", "results", "bench_model.json")
    assert common.result_path(name="bench_remat") == os.path.join(REPO, "bench", "results", "bench_remat.json")
    path = common.write_result({"figure": 1.5}, str(tmp_path / "out" / "r.json"), "bench_remat")
    result = json.loads((tmp_path / "out" / "r.json").read_text(encoding="utf-8"))
    assert path == str(tmp_path / "out" / "r.json") and result["figure"] == 1.5
    assert result["command"] == common.command() and set(result["machine"]) >= {"cpu", "cpus", "python"}


def test_a_scratch_folder_is_removed_after_and_a_given_one_kept(tmp_path):
    with common.scratch_dir(None, "bench_test_") as work:
        assert os.path.isdir(work) and os.path.basename(work).startswith("bench_test_")
    assert not os.path.exists(work)
    given = tmp_path / "given"
    with common.scratch_dir(str(given), "bench_test_") as work:
        assert work == str(given) and given.is_dir()
    assert given.is_dir()


def test_a_child_runs_a_benchmark_module_wherever_it_starts(tmp_path):
    done = subprocess.run(common.module_command("bench.support.original_compat"), cwd=tmp_path,
                          env=common.child_env(), capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr.strip()) == (
        1, "usage: python -m bench.support.original_compat ORIGINAL_SCRIPT [flags...]")


def test_an_original_script_imports_its_own_modules_first(tmp_path):
    original = tmp_path / "albert"
    original.mkdir()
    (original / "tokenization.py").write_text("WHERE = 'the original folder'\n", encoding="utf-8")
    (original / "create_pretraining_data.py").write_text(
        "import sys\nimport tokenization\nprint(tokenization.WHERE, sys.argv[1:])\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "bench.support.original_compat",
                           str(original / "create_pretraining_data.py"), "--input_file=x"], cwd=REPO,
                          env=subprocess_env(), capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "the original folder ['--input_file=x']"


def test_word_neighbours_rank_rows_by_cosine_and_average_a_words_pieces():
    from bench.support import word_neighbours

    table = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [-1.0, 0.0], [5.0, 5.0]])
    assert word_neighbours.nearest(table, table[0], 3, exclude=[0]) == [1, 4, 2]  # by angle: a long row not first
    assert word_neighbours.nearest(table, table[0], 2) == [0, 1]
    assert word_neighbours.word_vector(table, [0, 2]) == pytest.approx([0.5, 0.5])
    assert word_neighbours.cosine(table[0], table[3]) == pytest.approx(-1.0)
    assert word_neighbours.random_pair_cosine(np.ones((4, 3)), 50) == pytest.approx(1.0)


def test_support_modules_import_beside_the_scripts_without_defining_flags():
    """Tests import bench/support modules into a process where the library's scripts have defined their flags
    (`--albert_config_file`, ...): a support module that defined flags at import would collide."""
    modules = sorted(name[:-3] for name in os.listdir(os.path.join(REPO, "bench", "support"))
                     if name.endswith(".py") and name != "__init__.py")
    code = ("import albert_tf.scripts.convert\n"
            "from absl import flags\n"
            "before = set(flags.FLAGS)\n"
            + "".join(f"import bench.support.{m}\n" for m in modules)
            + "print(sorted(set(flags.FLAGS) - before))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=subprocess_env(), capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
    assert {"weight_scale", "word_neighbours", "task_adaptive"} <= set(modules)


def test_a_calls_cost_is_on_disk_from_its_first_record_and_rewritten_by_the_next(tmp_path):
    """A resumable run's call that is killed after a checkpoint still counts up to it (each record replaces the
    call's one file); another call of the same run gets a file of its own, and the run's total sums both."""
    run_dir = tmp_path / "runs" / "arm"
    call = common.CallCost(str(run_dir), tag="11520-")
    call.record(320)
    first = json.loads((run_dir / os.listdir(run_dir)[0]).read_text())
    sum(i * i for i in range(2_000_000))  # CPU time between the two records
    call.record(640, train_seconds=1.5)
    assert len(os.listdir(run_dir)) == 1  # no partial file left beside it
    second = json.loads((run_dir / os.listdir(run_dir)[0]).read_text())
    assert first["step"] == 320 and second["step"] == 640 and second["train_seconds"] == 1.5
    assert second["cpu_seconds"] > first["cpu_seconds"] > 0 and second["wall_seconds"] > first["wall_seconds"]
    common.CallCost(str(run_dir), tag="11520-").record(700)
    names = sorted(os.listdir(run_dir))
    assert len(names) == 2 and all(n.startswith("call-") and n.endswith(".json") for n in names)
    calls = [json.loads((run_dir / n).read_text()) for n in names]
    total = common.CallCost.total(str(run_dir))
    for key in ("cpu_seconds", "wall_seconds"):
        assert total[key] == pytest.approx(sum(c[key] for c in calls))
    assert common.CallCost.total(str(tmp_path / "no_run")) == {"cpu_seconds": 0.0, "wall_seconds": 0.0}
