"""Outputs never destroy what the user owns: `--overwrite` replaces only an earlier export, an output is never one
of the inputs, and exports work on a folder that is a mount point of its own (a Docker volume)."""

import os
import shutil
import subprocess
import sys

import pytest

from albert_tf import checkpoints
from albert_tf.model import AlbertModel, dummy_inputs
from albert_tf.serving import savedmodel
from tests.helpers import (REPO, SAMPLE_GLUE, SPM, assert_one_line_error, leftovers, make_files, run_script,
                           subprocess_env, tiny_config, tmpfs, tree_snapshot, write_config)


@pytest.fixture(scope="module")
def training_output(tmp_path_factory):
    """What a fine-tuning run leaves in its --output_dir: checkpoints, the best one, results, the config."""
    out = tmp_path_factory.mktemp("faults") / "out"
    config = tiny_config()
    model = AlbertModel(config)
    model(dummy_inputs(), training=False)
    checkpoints.save_checkpoint(model, str(out / "best_checkpoint" / "ckpt-4"), fmt="original")
    write_config(config, out / "albert_config.json")
    (out / "eval_results.txt").write_text("eval_accuracy = 0.5\nglobal_step = 4\n")
    (out / "best_checkpoint.json").write_text('{"step": 4}\n')
    return out


def _copy(source, target):
    shutil.copytree(source, target)
    return target


def test_overwrite_refuses_a_training_run_that_holds_its_own_input(training_output, tmp_path):
    out = _copy(training_output, tmp_path / "out")
    before = tree_snapshot(out)
    result = run_script("export_model.py", ["--export_type=encoder", f"--export_dir={out}", "--overwrite",
                                            f"--init_checkpoint={out}/best_checkpoint/ckpt-4",
                                            f"--albert_config_file={out}/albert_config.json"])
    assert_one_line_error(result, f"--export_dir {out} would write over the input", status=2)
    assert tree_snapshot(out) == before


def test_overwrite_refuses_a_folder_that_is_not_an_export(tmp_path):
    data = _copy(os.path.join(SAMPLE_GLUE, "SST-2"), tmp_path / "SST-2")
    before = tree_snapshot(data)
    result = run_script("export_model.py", ["--export_type=preprocessing", f"--export_dir={data}", "--overwrite",
                                            f"--spm_model_file={SPM}"])
    line = assert_one_line_error(result, f"--export_dir {data}", "albert_tf did not write there", status=1)
    assert "train.tsv" in line
    assert tree_snapshot(data) == before and leftovers(data) == []


@pytest.mark.slow
def test_overwrite_replaces_an_earlier_export_on_a_mount_point(tmp_path):
    """An export into an empty volume, then replaced there with --overwrite (the volume cannot be renamed); a
    file added by the user makes the folder no longer an export."""
    with tmpfs(tmp_path / "volume", size="64m") as volume:
        args = ["--export_type=preprocessing", f"--export_dir={volume}", f"--spm_model_file={SPM}"]
        first = run_script("export_model.py", args)
        assert first.returncode == 0, first.stderr[-3000:]
        assert savedmodel.is_export(volume) and os.path.exists(os.path.join(volume, "saved_model.pb"))
        stamp = os.stat(os.path.join(volume, "saved_model.pb")).st_mtime_ns
        again = run_script("export_model.py", [*args, "--overwrite"])
        assert again.returncode == 0, again.stderr[-3000:]
        assert savedmodel.is_export(volume) and leftovers(volume) == []
        assert os.stat(os.path.join(volume, "saved_model.pb")).st_mtime_ns != stamp
        with open(os.path.join(volume, "notes.txt"), "w") as f:
            f.write("mine")
        before = tree_snapshot(volume)
        refused = run_script("export_model.py", [*args, "--overwrite"])
        assert_one_line_error(refused, "notes.txt")
        assert tree_snapshot(volume) == before


def test_is_export_knows_every_export_layout(tmp_path):
    assert savedmodel.is_export(make_files(tmp_path / "a", "saved_model.pb", "variables/variables.index", "assets/x"))
    assert savedmodel.is_export(make_files(tmp_path / "b", "ids/saved_model.pb", "text/saved_model.pb"))
    assert savedmodel.is_export(make_files(tmp_path / "c", "ids/3/saved_model.pb", "text/3/saved_model.pb"))
    tflite = make_files(tmp_path / "d", "model.tflite", "30k-clean.model")
    with open(os.path.join(tflite, "tflite_info.json"), "w") as f:
        f.write('{"tokenizer_file": "30k-clean.model"}')
    assert savedmodel.is_export(tflite)
    assert not savedmodel.is_export(make_files(tmp_path / "e", "saved_model.pb", "train.tsv"))
    assert not savedmodel.is_export(make_files(tmp_path / "f", "ids/saved_model.pb", "text/notes.txt"))
    assert not savedmodel.is_export(make_files(tmp_path / "g", "model.tflite", "tflite_info.json", "other.model"))
    assert not savedmodel.is_export(make_files(tmp_path / "h", "ckpt-4.index", "checkpoint"))
    assert not savedmodel.is_export(make_files(tmp_path / "i"))


@pytest.mark.slow
@pytest.mark.parametrize("output_format", ["huggingface", "keras_hub"])
def test_convert_overwrite_never_deletes_what_it_did_not_write(training_output, tmp_path, output_format):
    """`--overwrite` over a folder holding a user's file (a thesis, a GLUE folder, a training run) is refused in
    one line with everything left as it was; over its own earlier output it replaces it."""
    prefix = str(training_output / "best_checkpoint" / "ckpt-4")
    folder = tmp_path / "thesis"
    folder.mkdir()
    (folder / "thesis.tex").write_text("four years of work")
    args = [f"--input_checkpoint={prefix}", f"--albert_config_file={training_output}/albert_config.json",
            f"--output_format={output_format}", f"--spm_model_file={SPM}", "--overwrite"]
    command = [sys.executable, "-m", "albert_tf.convert"]
    before = tree_snapshot(folder)
    result = subprocess.run([*command, *args, f"--output_path={folder}"], cwd=REPO, env=subprocess_env(),
                            capture_output=True, text=True, timeout=600, check=False)
    assert_one_line_error(result, str(folder), "thesis.tex", "did not write", status=1)
    assert tree_snapshot(folder) == before and leftovers(tmp_path) == []
    fresh = tmp_path / "converted"
    for _ in range(2):  # written, then replaced: its own output
        result = subprocess.run([*command, *args, f"--output_path={fresh}"], cwd=REPO, env=subprocess_env(),
                                capture_output=True, text=True, timeout=600, check=False)
        assert result.returncode == 0, result.stderr[-3000:]
    assert leftovers(tmp_path) == []


def test_convert_refuses_to_write_over_its_input(training_output, tmp_path):
    from albert_tf.errors import UsageError  # pylint: disable=import-outside-toplevel
    from albert_tf.scripts import convert  # pylint: disable=import-outside-toplevel

    out = _copy(training_output, tmp_path / "out")
    prefix = str(out / "best_checkpoint" / "ckpt-4")
    before = tree_snapshot(out)
    with pytest.raises(UsageError, match=rf"^--output_path {prefix} is the input --input_checkpoint {prefix}; "):
        convert.convert_argv(["convert", f"--input_checkpoint={prefix}", f"--output_path={prefix}",
                              "--output_format=native", f"--albert_config_file={out}/albert_config.json",
                              "--overwrite"])
    assert tree_snapshot(out) == before
    # beside the input, with the same config there: written, the input and its config untouched
    convert.convert_argv(["convert", f"--input_checkpoint={prefix}", f"--output_path={out}/best_checkpoint/native",
                          "--output_format=native", f"--albert_config_file={out}/albert_config.json"])
    assert {p: h for p, h in tree_snapshot(out).items() if p in before} == before
    assert os.path.exists(out / "best_checkpoint" / "native.index") and leftovers(out) == []


def test_predict_refuses_an_output_file_that_is_its_input(tmp_path):
    texts = tmp_path / "reviews.txt"
    texts.write_text("a gorgeous film\n")
    result = run_script("predict.py", [f"--export_dir={tmp_path}", f"--input_file={texts}",
                                       f"--output_file={tmp_path}/./reviews.txt"])
    assert_one_line_error(result, "--output_file", f"--input_file {texts}", status=2)
    assert texts.read_text() == "a gorgeous film\n"
