"""Usage errors reach the user as the README promises: a malformed number, an unknown flag or a value outside a
flag's choices is one line, `<script>: error: <message>` naming the flag, with exit status 2 and no traceback (not
absl's two-line `FATAL Flags parsing error` with status 1), in every script and in `python -m albert_tf.convert`;
`--help` still prints the usage. A missing input file is bad input, status 1, in convert as in the training
scripts."""

import os
import subprocess
import sys

import pytest

from tests.helpers import (DATA_DIR, REPO, SAMPLE_GLUE, SPM, assert_one_line_error, error_lines, log_tail, run_script,
                           subprocess_env)

TINY_CONFIG = os.path.join(DATA_DIR, "albert_config_tiny.json")

# One kind of bad flag per script (each subprocess pays TensorFlow's import), every kind in some script; all of
# them for run_classifier.py below.
BAD_FLAGS = [
    ("create_pretraining_data.py", ["--max_seq_length=long"], ["--max_seq_length", "long"]),
    ("run_pretraining.py", ["--strategy=gpu"], ["--strategy", "gpu"]),
    ("run_squad.py", ["--learning_rate=fast"], ["--learning_rate", "fast"]),
    ("run_race.py", ["--mixed_precision=fp8"], ["--mixed_precision", "fp8"]),
    ("export_model.py", ["--max_sequence_length=128"], ["--max_sequence_length"]),
    ("predict.py", ["--batch_size=ten"], ["--batch_size", "ten"]),
    ("run_classifier.py", ["--train_batch_size=32.5"], ["--train_batch_size", "32.5"]),
    ("run_classifier.py", ["--no_such_flag=1"], ["--no_such_flag"]),
    ("run_classifier.py", ["--optimizer=sgd"], ["--optimizer", "sgd"]),
    ("run_classifier.py", ["--do_train=maybe"], ["--do_train", "maybe"]),
]


def _convert(*args):
    return subprocess.run([sys.executable, "-m", "albert_tf.convert", *args], cwd=REPO, env=subprocess_env(),
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.parametrize("script,args,names", BAD_FLAGS, ids=[f"{s}:{a[0]}" for s, a, _ in BAD_FLAGS])
def test_a_bad_flag_is_one_line_with_status_2(script, args, names):
    result = run_script(script, args)
    line = assert_one_line_error(result, *names, status=2)
    assert line.startswith(f"{script}: error: "), line
    assert "FATAL" not in result.stderr


def test_an_unknown_flag_suggests_the_near_one():
    result = run_script("predict.py", ["--export=x", "--input_file=y"])
    line = assert_one_line_error(result, "--export", status=2)
    assert line.startswith("predict.py: error: ") and "--export_dir" in line, line


def test_convert_output_format_and_unknown_flags(tmp_path):
    result = _convert("--input_checkpoint=x", "--output_format=onnx", f"--output_path={tmp_path / 'out'}")
    line = assert_one_line_error(result, "--output_format", "onnx", status=2)
    assert line.startswith("convert.py: error: "), line
    result = _convert("--input_checkpoint=x", "--output_fmt=original", f"--output_path={tmp_path / 'out'}")
    assert_one_line_error(result, "--output_fmt", status=2)
    assert list(tmp_path.iterdir()) == []


def test_convert_missing_input_is_status_1_as_in_the_training_scripts(tmp_path):
    """A missing checkpoint or config file is bad input (status 1), not a usage error."""
    missing = tmp_path / "missing_ckpt"
    result = _convert(f"--input_checkpoint={missing}", "--output_format=original",
                      f"--output_path={tmp_path / 'out'}")
    assert_one_line_error(result, missing, status=1)
    result = _convert(f"--input_checkpoint={missing}", f"--albert_config_file={tmp_path / 'nope.json'}",
                      "--output_format=original", f"--output_path={tmp_path / 'out'}")
    assert_one_line_error(result, tmp_path / "nope.json", status=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    # A flag missing altogether is still a usage error.
    result = _convert("--output_format=original", f"--output_path={tmp_path / 'out'}")
    assert_one_line_error(result, "--input_checkpoint", status=2)


def test_a_missing_hub_module_directory_is_status_1(tmp_path):
    """`--albert_hub_module_handle` names an input like `--init_checkpoint`: missing, it is bad input (status 1)."""
    missing = tmp_path / "missing_module"
    result = run_script("run_classifier.py", [
        f"--albert_hub_module_handle={missing}", "--task_name=sst-2", f"--albert_config_file={TINY_CONFIG}",
        f"--output_dir={tmp_path / 'out'}", f"--spm_model_file={SPM}", f"--data_dir={SAMPLE_GLUE}", "--do_train"])
    assert_one_line_error(result, "--albert_hub_module_handle", missing, status=1)


def test_help_still_prints_the_usage():
    result = run_script("predict.py", ["--help"])
    assert "Traceback" not in result.stderr, log_tail(result)
    assert "--export_dir" in result.stdout + result.stderr
    assert not [line for line in error_lines(result.stderr) if ": error: " in line]
