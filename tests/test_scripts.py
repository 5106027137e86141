"""What every script does the same way: bad flags and bad files as one line (exit status 2 and 1), SIGTERM handled
like Ctrl-C (no partial output, no worker left running)."""

import glob
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from albert_tf.checkpoints import load_checkpoint, model_arrays
from albert_tf.config import AlbertConfig
from albert_tf.model import AlbertModel
from albert_tf.tasks.classification import build_classifier
from tests.helpers import DATA_DIR, REPO, SPM, assert_one_line_error, subprocess_env, tree_snapshot

# "{tmp}" is the test's own empty folder: a file left in a shared /tmp would turn the flag error into another.
BAD_FLAG_RUNS = {
    "run_pretraining.py": ["--albert_config_file=data/albert_config_tiny.json", "--input_file=x"],
    "run_classifier.py": ["--task_name=sst-2", "--output_dir={tmp}/x"],
    "run_squad.py": ["--albert_config_file=x.json", "--output_dir={tmp}/x"],
    "run_race.py": ["--task_name=squad", "--data_dir={tmp}"],
    "export_model.py": ["--export_type=onnx"],
    "predict.py": ["--export_dir={tmp}/x"],
    "create_pretraining_data.py": ["--output_file={tmp}/x.tfrecord"],
}


def _run(script, args, timeout=300):
    return subprocess.run([sys.executable, os.path.join(REPO, script), *args], cwd=REPO, env=subprocess_env(),
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(BAD_FLAG_RUNS))
def test_a_usage_error_is_one_line_with_status_2(script, tmp_path):
    result = _run(script, [arg.format(tmp=tmp_path) for arg in BAD_FLAG_RUNS[script]])
    assert result.returncode == 2, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{script}: error: ") and "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_missing_input_file_is_one_line_with_status_1(tmp_path):
    result = _run("create_pretraining_data.py", [f"--input_file={tmp_path / 'missing.txt'}",
                                                 f"--output_file={tmp_path / 'out.tfrecord'}",
                                                 f"--spm_model_file={SPM}"])
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == \
        f"create_pretraining_data.py: error: no input files matched '{tmp_path / 'missing.txt'}'"
    assert os.listdir(tmp_path) == []



@pytest.mark.slow
def test_an_embedded_demos_files_are_guarded_as_any_runs():
    """The race demo's --data_dir comes from its preset (data/demos/race.json); pointing --output_dir at that
    folder is refused as for any run, before anything is written into the shipped data."""
    race = os.path.join(REPO, "data", "race")
    before = tree_snapshot(race)
    result = _run("run_race.py", [f"--output_dir={race}"])
    assert_one_line_error(result, "--output_dir", "--data_dir", status=2)
    assert tree_snapshot(race) == before


@pytest.mark.slow
def test_the_race_demo_runs_with_the_users_overrides(tmp_path):
    """With no --data_dir the demo trains on the shipped sample; the flags given replace the preset's, and the
    run records the preset's values it used (settings.json)."""
    out = tmp_path / "demo"
    result = _run("run_race.py", [f"--output_dir={out}", "--train_step=2", "--save_checkpoints_steps=2",
                                  "--do_predict=false"], timeout=900)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "running the embedded demo" in result.stdout
    recorded = json.loads((out / "settings.json").read_text())["settings"]
    assert (recorded["train_step"], recorded["learning_rate"], recorded["max_qa_length"]) == (2, 1e-4, 48)
    assert recorded["data_dir"] == os.path.join(REPO, "data", "race")
    assert glob.glob(str(out / "saved_model" / "**" / "saved_model.pb"), recursive=True)

def _children(pid):
    found = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = open(stat).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.split("/")[2]))
    return found


@pytest.mark.slow
def test_sigterm_stops_the_workers_and_leaves_no_partial_output(tmp_path):
    out = tmp_path / "records"
    process = subprocess.Popen(
        [sys.executable, os.path.join(REPO, "create_pretraining_data.py"),
         f"--input_file={os.path.join(DATA_DIR, 'corpus', 'gutenberg-*.txt')}", f"--output_dir={out}",
         "--num_output_shards=2", f"--spm_model_file={SPM}", "--max_seq_length=128", "--dupe_factor=400",
         "--num_workers=2", "--shard_size_mb=0.05"],
        cwd=REPO, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while len(_children(process.pid)) < 2:  # the worker processes are up
        assert process.poll() is None, process.stderr.read()[-3000:]
        assert time.time() < deadline
        time.sleep(0.2)
    time.sleep(2.0)
    workers = _children(process.pid)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr[-3000:]
    assert "interrupted; nothing partial was left behind" in stderr.strip().splitlines()[-1]
    assert not glob.glob(str(out / "*")) and not os.path.exists(str(tmp_path / ".records.albert_tf"))
    time.sleep(1.0)
    assert not [pid for pid in workers if os.path.exists(f"/proc/{pid}")]


def _arrays(model, path):
    """{TF1 name: array} of `model` with the weights of `path` loaded."""
    load_checkpoint(model, path, allow_missing_encoder=False)
    return model_arrays(model)


@pytest.mark.slow
@pytest.mark.parametrize("module", ["tf1_hub_module", "hub_encoder"])
def test_albert_hub_module_handle_initialises_a_fine_tuning_run(module, mg_fixtures, tmp_path):
    """`run_classifier.py --albert_hub_module_handle=<local module directory>` (the original's TF1 TF-Hub module,
    or a TF-Hub TF2 SavedModel of Model Garden's) starts from the module's weights, as the original did."""
    out = tmp_path / "out"
    result = _run("run_classifier.py", [
        f"--albert_hub_module_handle={mg_fixtures[module]}", f"--albert_config_file={mg_fixtures['config']}",
        f"--spm_model_file={mg_fixtures['spm']}", "--task_name=sst-2", f"--data_dir={DATA_DIR}/glue",
        f"--output_dir={out}", "--do_train", "--max_seq_length=32", "--train_batch_size=8", "--train_step=2",
        "--save_checkpoints_steps=2", "--log_every=0"])
    assert result.returncode == 0, result.stderr[-3000:]
    # The encoder of the fine-tuned checkpoint is the module's, moved by two small steps, not a random init.
    config = AlbertConfig.from_json_file(mg_fixtures["config"])
    module_arrays = _arrays(AlbertModel(config), mg_fixtures[module])
    tuned = _arrays(build_classifier(config, 2), str(out / "ckpt-2"))
    shared = [name for name in module_arrays if name.startswith("bert/")]
    assert len(shared) > 15 and all(name in tuned for name in shared)
    moved = max(float(np.abs(tuned[n] - module_arrays[n]).max()) for n in shared)
    spread = min(float(module_arrays[n].std()) for n in shared if module_arrays[n].size > 100)
    assert 0 < moved < 1e-3 < spread, (moved, spread)
    result = _run("run_classifier.py", [f"--albert_hub_module_handle={tmp_path / 'missing'}", "--task_name=sst-2",
                                        f"--albert_config_file={mg_fixtures['config']}", f"--output_dir={out}2",
                                        f"--spm_model_file={SPM}", f"--data_dir={DATA_DIR}/glue", "--do_train"])
    assert result.returncode == 1
    assert "--albert_hub_module_handle" in result.stderr.strip().splitlines()[-1]
