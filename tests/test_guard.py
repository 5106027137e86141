"""The settings rules the guard checks before a script's `main` (albert_tf/guard.py): a required setting left
unset, one that may stand in for another, and two given that exclude each other, each one `UsageError` naming the
flags; and, through a real script, that the check runs before anything is read or written."""

import dataclasses
import subprocess
import sys

import pytest
from absl import flags

from albert_tf import cli, guard
from albert_tf.errors import UsageError
from albert_tf.settings import NON_NEGATIVE, Range, flag_specs, setting
from tests.helpers import REPO, subprocess_env


@dataclasses.dataclass
class _Request:
    input_file: str = setting(None, "In.", required=True)
    spm_model_file: str = setting(None, "Model.", required=("vocab_file",))
    vocab_file: str = setting(None, "Vocabulary.")
    num_output_shards: int = setting(1, "Shards.")
    shard_size_mb: float = setting(0.0, "MB per shard.", excludes=("num_output_shards",))
    runner: str = setting(None, "Runner.", choices=("DirectRunner", "DataflowRunner"))
    columns: list = setting(None, "Columns.", items=int, count=Range(1, 2), bounds=NON_NEGATIVE)
    overwrite: bool = setting(False, "Replace.", excludes=("runner",), why="a runner refuses existing outputs")


SPECS = {spec.name: spec for spec in flag_specs(_Request).values()}


def _values(**given):
    values = {name: spec.default for name, spec in SPECS.items()}
    values.update(given)
    return values


def test_a_run_with_its_required_settings_passes():
    guard.check_required(SPECS, _values(input_file="a.txt", spm_model_file="m.model"))
    guard.check_required(SPECS, _values(input_file="a.txt", vocab_file="vocab.txt"))
    guard.check_required(SPECS, _values(input_file="a.txt", vocab_file="v", shard_size_mb=5.0), ["shard_size_mb"])


@pytest.mark.parametrize("values, message", [
    (dict(spm_model_file="m.model"), "--input_file is required"),
    (dict(input_file="a.txt", spm_model_file=""), r"--spm_model_file \(or --vocab_file\) is required"),
])
def test_a_required_setting_left_unset_is_named(values, message):
    with pytest.raises(UsageError, match=f"^{message}$"):
        guard.check_required(SPECS, _values(**values))


@pytest.mark.parametrize("order, values", [
    (["num_output_shards", "shard_size_mb"], dict(num_output_shards=1, shard_size_mb=0.0)),
    (["shard_size_mb"], dict(num_output_shards=4, shard_size_mb=2.0)),
])
def test_settings_that_exclude_each_other_are_refused_together(order, values):
    with pytest.raises(UsageError, match="^give either --shard_size_mb or --num_output_shards, not both$"):
        guard.check_required(SPECS, _values(input_file="a", vocab_file="v", **values), order)


def test_an_exclusion_says_why_when_its_setting_does():
    with pytest.raises(UsageError, match="^give either --overwrite or --runner, not both: a runner refuses existing "
                                         "outputs$"):
        guard.check_required(SPECS, _values(input_file="a", vocab_file="v", overwrite=True, runner="DirectRunner"))


def test_params_built_in_code_meet_the_choices_and_bounds_a_flag_would():
    guard.check_params(_Request(input_file="a", vocab_file="v", runner="DataflowRunner"))
    with pytest.raises(UsageError, match="^--runner=Flink: must be one of DirectRunner, DataflowRunner$"):
        guard.check_params(_Request(input_file="a", vocab_file="v", runner="Flink"))
    with pytest.raises(UsageError, match=r"^--spm_model_file \(or --vocab_file\) is required$"):
        guard.check_params(_Request(input_file="a"))


@pytest.mark.parametrize("columns, message", [
    (["a"], "--columns=a: takes whole numbers"),
    (["1", "2", "3"], r"--columns=1,2,3: the number of values must be in \[1, 2\]"),
    (["3", "-1"], "--columns=3,-1: each must be at least 0"),
])
def test_a_list_settings_items_are_read_counted_and_bounded(columns, message):
    guard.check_values(SPECS, _values(columns=["0", "3"]))
    with pytest.raises(UsageError, match=f"^{message}$"):
        guard.check_values(SPECS, _values(columns=columns))


def test_a_list_setting_reaches_its_params_as_items_of_its_type():
    flag_values = flags.FlagValues()
    cli.define_flags(_Request, flag_values=flag_values)
    flag_values(["prog", "--columns=3,4", "--input_file=a", "--vocab_file=v"])
    assert cli.params_from_flags(_Request, flag_values).columns == [3, 4]


@pytest.mark.slow
def test_a_script_refuses_a_missing_setting_and_stray_arguments_before_writing(tmp_path):
    """create_vocab.py without --model_prefix, and with a stray argument: one line each, exit 2, nothing written."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("One sentence.\nAnother one.\n")
    runs = {"missing": [f"--input_file={corpus}"],
            "stray": [f"--input_file={corpus}", f"--model_prefix={tmp_path / 'vocab'}", "extra"]}
    for case, argv in runs.items():
        result = subprocess.run([sys.executable, "create_vocab.py", *argv], cwd=REPO, env=subprocess_env(),
                                capture_output=True, text=True, timeout=300, check=False)
        assert result.returncode == 2, (case, result.stderr)
        last = result.stderr.strip().splitlines()[-1]
        expected = "--model_prefix is required" if case == "missing" else "unexpected arguments: extra"
        assert last == f"create_vocab.py: error: {expected}", (case, result.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]
