"""The training scripts check what they can before writing anything, and a fault while they run (a full disk)
ends in one line with the last good checkpoint intact: exit 1 or 2, one line naming the flag or file, no
traceback, nothing of the user's changed, nothing partial left."""

import os

import pytest
import tensorflow as tf

from albert_tf.train import runner
from tests.helpers import (DATA_DIR, SPM, assert_one_line_error, leftovers, run_script, tiny_config, tmpfs,
                           tree_snapshot, write_config)


@pytest.fixture()
def config_file(tmp_path):
    return write_config(tiny_config(), tmp_path / "albert_config.json")


def classifier_args(config_file, output_dir, *extra):
    return [f"--albert_config_file={config_file}", f"--spm_model_file={SPM}", "--task_name=sst-2",
            f"--data_dir={DATA_DIR}/glue", f"--output_dir={output_dir}", "--do_train", "--max_seq_length=32",
            "--train_batch_size=4", "--train_step=2", "--save_checkpoints_steps=2", "--log_every=0", *extra]


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--train_batch_size=0", "--save_checkpoints_steps=0", "--iterations_per_loop=0"])
def test_a_schedule_no_run_can_follow_is_refused(config_file, tmp_path, flag):
    out = tmp_path / "out"
    result = run_script("run_classifier.py", classifier_args(config_file, out, flag))
    assert_one_line_error(result, flag.split("=")[0], status=2)
    assert not os.path.exists(out)


@pytest.mark.slow
def test_a_vocabulary_larger_than_the_config_is_refused_before_training(tmp_path):
    config_file = write_config(tiny_config(vocab_size=1000), tmp_path / "small_vocab.json")
    out = tmp_path / "out"
    result = run_script("run_classifier.py", classifier_args(config_file, out))
    assert_one_line_error(result, SPM, "vocab_size is 1000")
    assert not os.path.exists(out)  # no albert_config.json left to block the corrected rerun


@pytest.mark.slow
def test_an_output_dir_that_is_a_file(config_file, tmp_path):
    out = tmp_path / "out"
    out.write_text("my notes")
    result = run_script("run_classifier.py", classifier_args(config_file, out))
    assert_one_line_error(result, f"--output_dir {out}")
    assert out.read_text() == "my notes" and leftovers(tmp_path) == []


@pytest.mark.slow
def test_an_empty_eval_input_file_is_refused_before_training(pretraining_records, config_file, tmp_path):
    records, seq, predictions = pretraining_records
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    out = tmp_path / "out"
    result = run_script("run_pretraining.py", [
        f"--input_file={records}", f"--eval_input_file={empty}", f"--albert_config_file={config_file}",
        f"--output_dir={out}", "--do_train", "--do_eval", f"--max_seq_length={seq}",
        f"--max_predictions_per_seq={predictions}", "--train_batch_size=2", "--num_train_steps=1",
        f"--spm_model_file={SPM}", "--log_every=0"])
    assert_one_line_error(result, "--eval_input_file", str(empty))
    assert not os.path.exists(out)


@pytest.mark.slow
def test_a_full_disk_keeps_the_last_good_checkpoint(config_file, tmp_path):
    """The output directory is a disk of its own (a mount point) where the first checkpoint fits and the second
    does not: one line naming the output directory, the first checkpoint intact and readable, no `ckpt-N_temp`
    left."""
    with tmpfs(tmp_path / "disk", size="9m") as out:
        args = classifier_args(config_file, out)
        args = [a for a in args if not a.startswith(("--train_step", "--save_checkpoints_steps"))]
        result = run_script("run_classifier.py", [*args, "--train_step=4", "--save_checkpoints_steps=1",
                                                  "--keep_checkpoint_max=0"])
        line = assert_one_line_error(result, out, "No space left on device")
        assert "ckpt-1 is kept" in line
        assert tf.train.latest_checkpoint(out).endswith("ckpt-1")
        assert tf.train.load_checkpoint(os.path.join(out, "ckpt-1")).get_variable_to_shape_map()
        assert leftovers(out) == [] and not [n for n in os.listdir(out) if n.startswith("ckpt-2")]


def test_a_config_left_by_a_run_that_saved_nothing_does_not_block_the_rerun(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    runner.record_config(str(out), tiny_config(vocab_size=1000))
    corrected = tiny_config()
    runner.check_output_dir(str(out), corrected)  # no checkpoint: the corrected config is accepted
    runner.record_config(str(out), corrected)
    assert runner.AlbertConfig.from_json_file(str(out / "albert_config.json")).vocab_size == 30000
    (out / "ckpt-1.index").write_text("")
    (out / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    before = tree_snapshot(out)
    with pytest.raises(runner.RunError, match="holds a run of a different model"):
        runner.check_output_dir(str(out), tiny_config(vocab_size=1000))
    assert tree_snapshot(out) == before
