"""A training run records its resolved settings, and a resume with settings that change what is trained is refused
in one line unless allowed; logging-only changes pass."""

import dataclasses
import json
import sys

import keras
import pytest
import tensorflow as tf

import albert_tf
from albert_tf.errors import RunError
from albert_tf.settings import setting
from albert_tf.tasks.classification import ClassifierParams
from albert_tf.tasks.pretraining import PretrainingParams
from albert_tf.tasks.race import RaceParams
from albert_tf.tasks.squad import SquadParams
from albert_tf.train import run_settings
from albert_tf.train.runner import RuntimeParams
from tests.helpers import tiny_config


def _params(tmp_path, **changes):
    return dataclasses.replace(ClassifierParams(albert_config=tiny_config(), output_dir=str(tmp_path), do_train=True),
                               **changes)


def test_the_record_holds_every_setting_by_flag_name_versions_and_command(tmp_path):
    params = _params(tmp_path, learning_rate=3e-5)
    run_settings.record_settings(str(tmp_path), params)
    record = json.loads((tmp_path / "settings.json").read_text())
    assert record["settings"]["learning_rate"] == 3e-5
    assert record["settings"]["train_batch_size"] == 32 and record["settings"]["optimizer"] == "adamw"
    assert "albert_config_file" not in record["settings"]  # recorded in albert_config.json
    assert record["settings"]["threshold_to_export"] is None
    assert record["versions"] == {"albert_tf": albert_tf.__version__, "tensorflow": tf.__version__,
                                  "keras": keras.__version__}
    assert record["command"] == sys.argv
    assert run_settings.read_settings(str(tmp_path)) == record["settings"]


def test_a_resume_with_other_training_settings_is_refused(tmp_path):
    run_settings.record_settings(str(tmp_path), _params(tmp_path))
    with pytest.raises(RunError, match=r"other settings: --train_batch_size=32 \(now 8\), "
                                       r"--learning_rate=5e-05 \(now 0\.001\); .*--allow_settings_change"):
        run_settings.check_resume(str(tmp_path), _params(tmp_path, learning_rate=1e-3, train_batch_size=8))
    run_settings.check_resume(str(tmp_path), _params(tmp_path, learning_rate=1e-3), allow_change=True)


@pytest.mark.parametrize("params_class", [ClassifierParams, PretrainingParams, RaceParams, SquadParams])
def test_every_task_records_its_seed_and_a_resume_with_another_is_refused(tmp_path, params_class):
    """The seed orders the input and draws online masks: each task's params declare it as a setting."""
    assert "random_seed" in run_settings.training_settings(params_class)
    defaults = [{f.name: f.default for f in dataclasses.fields(cls)}["random_seed"] for cls in (params_class,
                                                                                               RuntimeParams)]
    assert defaults == [12345, 12345]  # the original's seed (create_pretraining_data.py's random_seed)
    run_settings.record_settings(str(tmp_path), _params(tmp_path, random_seed=7))
    assert run_settings.read_settings(str(tmp_path))["random_seed"] == 7
    with pytest.raises(RunError, match=r"--random_seed=7 \(now 12345\)"):
        run_settings.check_resume(str(tmp_path), _params(tmp_path))


def test_own_data_columns_are_recorded_and_change_what_is_trained(tmp_path):
    """A user's own files are read by the task's settings (not a processor the script built): their columns and
    labels are recorded and a resume reading other columns is refused; the files' paths may move."""
    trained = run_settings.training_settings(ClassifierParams)
    assert {"text_a_column", "label_column", "delimiter", "has_header", "label_list", "regression"} <= trained
    assert not {"train_file", "dev_file", "test_file"} & trained
    run_settings.record_settings(str(tmp_path), _params(tmp_path, train_file="a.csv", label_column="stars"))
    assert run_settings.read_settings(str(tmp_path))["train_file"] == "a.csv"
    run_settings.check_resume(str(tmp_path), _params(tmp_path, train_file="moved/a.csv", label_column="stars"))
    with pytest.raises(RunError, match=r"--label_column=stars \(now 1\)"):
        run_settings.check_resume(str(tmp_path), _params(tmp_path, train_file="a.csv"))


def test_logging_evaluation_and_placement_may_change(tmp_path):
    run_settings.record_settings(str(tmp_path), _params(tmp_path))
    run_settings.check_resume(str(tmp_path), _params(tmp_path, log_every=1, do_eval=True, eval_batch_size=64,
                                                     keep_checkpoint_max=1, export_dir="elsewhere",
                                                     jit_compile=True, strategy="one_device"))


def test_of_the_runtime_settings_only_precision_changes_what_is_trained():
    """`RuntimeParams` (every script's placement, TPU, logging and resume flags): none but `--mixed_precision`
    changes the trained weights' values, so a resume may move the run to other hardware or log differently."""
    assert run_settings.training_settings(RuntimeParams) == {"mixed_precision"}
    trained = run_settings.training_settings(ClassifierParams)
    assert "mixed_precision" in trained and not {"strategy", "use_tpu", "tpu_name", "tpu_zone", "gcp_project",
                                                  "master", "num_tpu_cores", "jit_compile", "remat", "log_every",
                                                  "allow_settings_change"} & trained


def test_no_record_means_no_check_and_a_broken_one_is_named(tmp_path):
    run_settings.check_resume(str(tmp_path), _params(tmp_path))
    (tmp_path / "settings.json").write_text("{not json")
    with pytest.raises(RunError, match=r"settings.json cannot be read"):
        run_settings.check_resume(str(tmp_path), _params(tmp_path))


def test_a_list_setting_is_recorded_as_a_list_and_compared_as_one(tmp_path):
    @dataclasses.dataclass
    class Columns:
        text_columns: tuple = setting((1, 2), "Columns.", kind="list")
        learning_rate: float = setting(1e-3, "Rate.")

    run_settings.record_settings(str(tmp_path), Columns())
    assert run_settings.read_settings(str(tmp_path)) == {"text_columns": [1, 2], "learning_rate": 1e-3}
    run_settings.check_resume(str(tmp_path), Columns())  # the tuple read back as a list is the same setting
    with pytest.raises(RunError, match=r"--text_columns=\[1, 2\] \(now \[3\]\)"):
        run_settings.check_resume(str(tmp_path), Columns(text_columns=(3,)))


def test_a_refusal_shows_four_changed_settings_and_counts_the_rest(tmp_path):
    run_settings.record_settings(str(tmp_path), _params(tmp_path))
    four = dict(learning_rate=1e-3, train_batch_size=8, warmup_step=10, max_seq_length=64)
    with pytest.raises(RunError, match=r"settings: --max_seq_length=512 \(now 64\), .*--warmup_step=0 \(now 10\); "
                                       "resume with"):
        run_settings.check_resume(str(tmp_path), _params(tmp_path, **four))
    with pytest.raises(RunError, match=r"--warmup_step=0 \(now 10\) and 1 more; resume with"):
        run_settings.check_resume(str(tmp_path), _params(tmp_path, **four, dropout_prob=0.2))
