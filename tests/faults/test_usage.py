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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_missing_hub_module_directory_is_status_1(tmp_path):
    """`--albert_hub_module_handle` names an input like `--init_checkpoint`: missing, it is bad input (status 1)."""
    missing = tmp_path / "missing_module"
    result = run_script("run_classifier.py", [
        f"--albert_hub_module_handle={missing}", "--task_name=sst-2", f"--albert_config_file={TINY_CONFIG}",
        f"--output_dir={tmp_path / 'out'}", f"--spm_model_file={SPM}", f"--data_dir={SAMPLE_GLUE}", "--do_train"])
    assert_one_line_error(result, "--albert_hub_module_handle", missing, status=1)


# A flag only that script has, with its default as absl prints it (None: no default line).
OWN_FLAGS = {
    "create_pretraining_data.py": ("--dupe_factor", "(default: '40')"),
    "create_vocab.py": ("--character_coverage", "(default: '0.99995')"),
    "prepare_corpus.py": ("--min_document_chars", "(default: '"),
    "run_pretraining.py": ("--num_train_steps", "(default: '"),
    "run_classifier.py": ("--label_column", "(default: '1')"),
    "run_squad.py": ("--warmup_proportion", "(default: '0.1')"),
    "run_race.py": ("--[no]high_only", "(default: 'false')"),
    "export_model.py": ("--export_type", None),
    "predict.py": ("--encoder_dir", None),
}


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(OWN_FLAGS))
def test_help_lists_the_scripts_own_flags(script):
    """`--help` prints the usage with its line breaks (a `\\` continuation stays at a line's end) and then the
    script's own flags with their help and defaults, not only "Try --helpfull"."""
    result = run_script(script, ["--help"])
    assert result.returncode == 1 and "Traceback" not in result.stderr, log_tail(result)  # absl's --help status
    flag, default = OWN_FLAGS[script]
    lines = result.stdout.splitlines()
    heading = next(i for i, line in enumerate(lines) if line.endswith(f"{script}:") and not line.startswith(" "))
    usage, own_lines = lines[:heading], lines[heading + 1:]
    assert max(len(line) for line in usage) <= 120
    at = next(i for i, line in enumerate(own_lines) if line.startswith(f"  {flag}:"))
    assert len(own_lines[at]) > len(flag) + 6  # its help text
    if default:
        entry = own_lines[at:at + 8]
        assert any(line.strip().startswith(default) for line in entry), entry
    assert not [line for line in error_lines(result.stderr) if ": error: " in line]


@pytest.mark.slow
def test_console_command_help_lists_its_flags():
    """An installed console command (`albert-predict`) runs `run()` with its own path as argv[0]."""
    code = "import sys; from albert_tf.scripts.predict import run; sys.argv[0] = 'albert-predict'; run()"
    result = subprocess.run([sys.executable, "-c", code, "--help"], cwd=REPO, env=subprocess_env(),
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 1, log_tail(result)
    assert "\nalbert-predict:\n" in result.stdout and "  --encoder_dir:" in result.stdout
    assert "--export_dir" in result.stdout.split("\nalbert-predict:\n", 1)[1]
    usage = result.stdout.split("\nalbert-predict:\n", 1)[0]
    assert any(line.rstrip().endswith("\\") for line in usage.splitlines())


@pytest.mark.slow
def test_convert_help_lists_its_flags():
    result = _convert("--help")
    assert result.returncode == 1, log_tail(result)
    assert "  --output_format:" in result.stdout and "  --input_checkpoint:" in result.stdout
