"""`albert_tf.train.runner.run` in-process with a stand-in task (one Dense unit learning a line), so that each step
of the run loop is checked in seconds: checks before anything is written, training to the exact step with
checkpoints, every saved checkpoint evaluated and the best kept, prediction and a versioned export with the best
weights, a resume that skips the batches already seen and keeps an existing export, evaluation without a metric,
the precision policy and random states restored, and a corrupt training file named by the task. The real tasks
and scripts, killed and resumed across replicas: tests/train/test_runner.py and tests/tasks/."""

import dataclasses
import gc
import glob
import json
import os
import random
import re
import shutil
import time
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import checkpoints, fileio
from albert_tf.errors import DataError, RunError, UsageError
from albert_tf.settings import Range, setting
from albert_tf.tasks.common_settings import output_dir_setting
from albert_tf.train import runner
from tests.helpers import lock_held_elsewhere, tiny_config


@dataclasses.dataclass(kw_only=True)
class _TrainOnlyParams(runner.RuntimeParams):
    """The settings of a task with no --do_eval and no --do_predict (as pretraining has no --do_predict)."""
    output_dir: str = output_dir_setting("Where the run writes.", runner.RUN_WRITES)
    albert_config: object = dataclasses.field(default_factory=tiny_config)
    learning_rate: float = setting(0.05, "The peak learning rate.", bounds=Range(0, low_open=True))
    init_checkpoint: str = None
    export_dir: str = None
    do_train: bool = True
    num_train_steps: int = 6
    save_checkpoints_steps: int = 2
    keep_checkpoint_max: int = 5
    train_batch_size: int = 4
    iterations_per_loop: int = 1
    train_file: str = None
    vocab_file: str = None
    log_every: int = 0


@dataclasses.dataclass(kw_only=True)
class _LineParams(_TrainOnlyParams):
    do_eval: bool = False
    do_predict: bool = True


@dataclasses.dataclass(kw_only=True)
class _MaxSeqLineParams(_LineParams):
    max_seq_length: int = 16


class _Line(keras.Model):
    """y = w x + b, with the `encoder.remat` switch the runner sets."""

    def __init__(self):
        super().__init__(name="line")
        self.dense = keras.layers.Dense(1)  # its kernel drawn from the run's seed
        self.encoder = types.SimpleNamespace(remat=None)

    def call(self, x, training=False):  # pylint: disable=unused-argument
        return self.dense(x)

    def kernel(self):
        return float(self.dense.kernel.numpy()[0, 0])


class _LineTask:
    """A task whose dev scores are given in the order of evaluation; it records what the runner asks of it."""

    name = "line"

    def __init__(self, scores=(), metric="score", fail_check=None):
        self.scores, self.metric, self.fail_check = list(scores), metric, fail_check
        self.calls, self.skips, self.evaluated, self.model = [], [], [], None

    def check(self, params, strategy):  # pylint: disable=unused-argument
        self.calls.append("check")
        if self.fail_check:
            raise UsageError(self.fail_check)

    def primary_metric(self, params):  # pylint: disable=unused-argument
        return self.metric

    def train_schedule(self, params):
        return runner.Schedule(num_train_steps=params.num_train_steps, num_warmup_steps=0, start_warmup_step=0,
                               poly_power=1.0, optimizer="adamw", learning_rate=params.learning_rate,
                               save_checkpoints_steps=params.save_checkpoints_steps,
                               keep_checkpoint_max=params.keep_checkpoint_max,
                               iterations_per_loop=params.iterations_per_loop,
                               train_batch_size=params.train_batch_size)

    def build_model(self, params):  # pylint: disable=unused-argument
        self.model = _Line()
        self.model(np.zeros([1, 1], np.float32))
        return self.model

    def compile_args(self, params):  # pylint: disable=unused-argument
        return {"loss": "mse"}

    def prepare(self, params, strategy, cache_dir):
        assert isinstance(params, _TrainOnlyParams) and isinstance(strategy, tf.distribute.Strategy)
        assert cache_dir == params.output_dir  # the chief's folder
        self.calls.append("prepare")

    def train_dataset(self, params, input_context, skip_batches):  # pylint: disable=unused-argument
        self.skips.append(skip_batches)
        if params.train_file:
            return tf.data.TFRecordDataset(params.train_file).map(lambda r: (tf.zeros([4, 1]), tf.zeros([4, 1])))
        x = np.arange(64, dtype=np.float32)[:, None] / 64
        return tf.data.Dataset.from_tensor_slices((x, 3 * x - 1)).repeat().batch(params.train_batch_size) \
            .skip(skip_batches)

    def has_dev(self, params):  # pylint: disable=unused-argument
        return True

    def evaluate(self, model, params, strategy):  # pylint: disable=unused-argument
        self.evaluated.append(model.kernel())
        return {"score": self.scores[len(self.evaluated) - 1] if self.scores else 0.0, "kernel": model.kernel()}

    def predict(self, model, params, strategy, output_dir):  # pylint: disable=unused-argument
        return {"predicted_with": model.kernel()}

    def export(self, model, params, export_dir):
        assert export_dir.startswith(params.export_dir)
        self.calls.append(("export", export_dir, model.kernel()))
        os.makedirs(export_dir)
        return export_dir

    def data_error(self, params, error, evaluating=False):
        flag = "--dev_file" if evaluating else f"--train_file {params.train_file}"
        return DataError(f"{flag}: corrupt ({type(error).__name__})")


def _weights_at(prefix):
    """(kernel [1, 1], bias [1]) of the stand-in model in checkpoint `prefix`."""
    reader = tf.train.load_checkpoint(prefix)
    return tuple(reader.get_tensor(f"model/dense/{name}/.ATTRIBUTES/VARIABLE_VALUE") for name in ("_kernel", "bias"))


def _kernel_at(prefix):
    return float(_weights_at(prefix)[0][0, 0])


def _steps(output_dir):
    return sorted(int(name[5:-6]) for name in os.listdir(output_dir) if name.endswith(".index"))


def test_a_run_trains_to_the_step_keeps_the_best_and_predicts_and_exports_with_it(tmp_path, caplog):
    out, export = str(tmp_path / "run"), str(tmp_path / "export")
    task = _LineTask(scores=(0.1, 0.9, 0.5))
    caplog.set_level("INFO")  # the runner logs through the root logger
    started = time.time()
    outcome = runner.run(task, _LineParams(output_dir=out, export_dir=export, remat=True))
    elapsed = time.time() - started
    assert "Training line from step 0 to 6, global batch size 4" in caplog.messages
    assert (outcome["start_step"], outcome["step"], outcome["num_train_steps"]) == (0, 6, 6)
    assert _steps(out) == [2, 4, 6] and task.skips == [0] and task.model.encoder.remat is True
    assert sorted(outcome["eval_history"]) == [2, 4, 6] and outcome["best_step"] == 4
    assert outcome["eval_results"]["score"] == 0.9 and outcome["eval_results"]["global_step"] == 4
    kernels = [_kernel_at(os.path.join(out, f"ckpt-{step}")) for step in (2, 4, 6)]
    assert task.evaluated == kernels and len(set(kernels)) == 3  # each checkpoint evaluated with its weights
    assert outcome["final_weights"] == os.path.join(out, "best_checkpoint", "ckpt-4") and outcome["final_step"] == 4
    assert outcome["predicted_with"] == kernels[1] and outcome["export_dir"] == os.path.join(export, "4")
    assert _kernel_at(outcome["final_weights"]) == kernels[1]
    assert task.calls == ["check", "prepare", ("export", os.path.join(export, "4"), kernels[1])]
    assert 0 < outcome["train_seconds"] <= elapsed
    assert glob.glob(os.path.join(out, "train", "events.out.tfevents.*"))  # TensorBoard's step summaries
    assert outcome["train_examples_per_second"] == pytest.approx(6 * 4 / outcome["train_seconds"])  # steps x batch
    with open(os.path.join(out, "settings.json"), encoding="utf-8") as f:
        assert json.load(f)["settings"]["learning_rate"] == 0.05
    with open(os.path.join(out, "albert_config.json"), encoding="utf-8") as f:
        assert json.load(f) == tiny_config().to_dict()
    with open(os.path.join(out, "best_checkpoint.json"), encoding="utf-8") as f:
        assert json.load(f)["step"] == 4

    # Resumed to step 10: the 6 batches seen are skipped, the new checkpoints evaluated, the best kept, and
    # the export of the best step (still 4) is left as it is.
    task = _LineTask(scores=(0.2, 0.3))
    outcome = runner.run(task, _LineParams(output_dir=out, export_dir=export, num_train_steps=10))
    assert (outcome["start_step"], outcome["step"]) == (6, 10) and task.skips == [6]
    assert outcome["train_examples_per_second"] == pytest.approx(4 * 4 / outcome["train_seconds"])  # 4 steps run
    assert sorted(outcome["eval_history"]) == [2, 4, 6, 8, 10] and outcome["best_step"] == 4
    assert task.evaluated == [_kernel_at(os.path.join(out, f"ckpt-{step}")) for step in (8, 10)]
    assert outcome["export_dir"] == os.path.join(export, "4") and task.calls == ["check", "prepare"]
    assert f"{os.path.join(export, '4')} exists (an export of step 4): kept as it is" in caplog.messages
    assert outcome["predicted_with"] == kernels[1]

    # At its last step already: nothing trained, nothing evaluated again; by default no XLA, no recomputation.
    # The optimizer is restored whole all the same (no TensorFlow warning of checkpointed values left unrestored).
    task = _LineTask()
    outcome = runner.run(task, _LineParams(output_dir=out, num_train_steps=10, export_dir=None))
    assert outcome["start_step"] == outcome["step"] == 10 and "train_seconds" not in outcome
    assert task.model.jit_compile is False and task.model.encoder.remat is False
    assert task.skips == [] and task.evaluated == [] and outcome["best_step"] == 4
    caplog.clear()
    task.model = None
    gc.collect()
    assert not [m for m in caplog.messages if "could not be found in the restored object" in m]


def test_a_run_stopped_at_a_checkpoint_resumes_to_the_uninterrupted_runs_weights(tmp_path):
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    ended = runner.run(_LineTask(metric=None), _LineParams(output_dir=str(whole)))
    shutil.copytree(whole, parts)  # as if killed after saving step 4
    for name in os.listdir(parts):
        if name.startswith("ckpt-6."):
            os.remove(parts / name)
    (parts / "checkpoint").write_text('model_checkpoint_path: "ckpt-4"\nall_model_checkpoint_paths: "ckpt-4"\n')
    (parts / "ckpt-9_temp").mkdir()  # what TF leaves when killed while saving
    sidecar = fileio.sidecar_dir(str(parts))
    os.makedirs(sidecar, exist_ok=True)
    stale = os.path.join(sidecar, ".eval_results.txt.partial-999999999-0123abcd")  # its writer's pid is gone
    open(stale, "w", encoding="utf-8").close()
    task = _LineTask(metric=None)
    resumed = runner.run(task, _LineParams(output_dir=str(parts)))
    assert not (parts / "ckpt-9_temp").exists() and not os.path.exists(stale)
    assert (resumed["start_step"], task.skips) == (4, [4])
    assert resumed["predicted_with"] == ended["predicted_with"] == _kernel_at(str(whole / "ckpt-6")) != 0.0
    assert resumed["final_weights"] == str(parts / "ckpt-6") and resumed["final_step"] == 6


def test_an_export_folder_another_process_holds_is_refused_after_training(tmp_path):
    """Settings built in code (no script's guard around the run): the runner takes `--export_dir`'s lock itself."""
    export = tmp_path / "export"
    with lock_held_elsewhere(export, "--export_dir") as pid:
        task = _LineTask(metric=None)
        with pytest.raises(RunError, match=rf"^--export_dir {export} is in use by another run \(pid {pid} "):
            runner.run(task, _LineParams(output_dir=str(tmp_path / "run"), export_dir=str(export)))
        assert task.calls == ["check", "prepare"] and _steps(tmp_path / "run") == [2, 4, 6]


def test_the_seed_decides_the_run_and_the_last_interval_may_be_short(tmp_path):
    runs = [runner.run(_LineTask(metric=None), _LineParams(output_dir=str(tmp_path / f"run{i}"), random_seed=seed,
                                                           num_train_steps=5))
            for i, seed in enumerate((1, 1, 2))]
    assert runs[0]["predicted_with"] == runs[1]["predicted_with"] != runs[2]["predicted_with"]
    assert runs[0]["step"] == 5 and _steps(tmp_path / "run0") == [2, 4, 5]


def test_keras_prints_an_epochs_summary_only_when_logging(tmp_path, capsys):
    """Keras's own lines on stdout: one per checkpoint interval (its epoch) with --log_every, none with 0."""
    for log_every in (0, 2):
        runner.run(_LineTask(metric=None), _LineParams(output_dir=str(tmp_path / str(log_every)), log_every=log_every,
                                                       do_predict=False))
        lines = capsys.readouterr().out.splitlines()
        assert [line for line in lines if line.startswith("Epoch ")] == (
            [f"Epoch {i}/3" for i in (1, 2, 3)] if log_every else [])
        assert sum(line.startswith("2/2 - ") and "loss: " in line for line in lines) == (3 if log_every else 0)


def test_steps_run_per_call_as_iterations_per_loop_says_and_are_logged_by_global_step(tmp_path, caplog):
    """`--log_every` counts global steps out of `num_train_steps`; `--iterations_per_loop` steps run in each call
    into the device, so a line is written where a call ends on a multiple of `log_every`, and at the last step."""
    caplog.set_level("INFO")
    for per_loop, logged in ((1, [3, 6, 8]), (2, [6, 8])):
        caplog.clear()
        runner.run(_LineTask(metric=None), _LineParams(output_dir=str(tmp_path / str(per_loop)), num_train_steps=8,
                                                       save_checkpoints_steps=4, iterations_per_loop=per_loop,
                                                       log_every=3, do_predict=False))
        lines = [m for m in caplog.messages if re.match(r"step \d+/", m)]
        assert [line.split(":")[0] for line in lines] == [f"step {step}/8" for step in logged]
        assert all("loss=" in line for line in lines)


def test_keep_checkpoint_max_keeps_the_latest_and_zero_keeps_all(tmp_path):
    for keep, kept in ((2, [10, 12]), (0, [2, 4, 6, 8, 10, 12])):
        runner.run(_LineTask(metric=None), _LineParams(output_dir=str(tmp_path / str(keep)), num_train_steps=12,
                                                       keep_checkpoint_max=keep, do_predict=False))
        assert _steps(tmp_path / str(keep)) == kept


def test_each_checkpoint_is_evaluated_when_saved_before_keep_checkpoint_max_deletes_it(tmp_path):
    out = str(tmp_path / "run")
    task = _LineTask(scores=(0.1, 0.9, 0.5))
    outcome = runner.run(task, _LineParams(output_dir=out, keep_checkpoint_max=1))
    assert _steps(out) == [6] and sorted(outcome["eval_history"]) == [2, 4, 6] and len(set(task.evaluated)) == 3
    assert outcome["best_step"] == 4 and outcome["predicted_with"] == task.evaluated[1]


def test_checkpoints_saved_without_evaluation_are_evaluated_on_the_next_start(tmp_path):
    out = str(tmp_path / "run")
    runner.run(_LineTask(metric=None), _LineParams(output_dir=out, do_predict=False))
    task = _LineTask(scores=(0.1, 0.9, 0.5))
    outcome = runner.run(task, _LineParams(output_dir=out))
    kernels = [_kernel_at(os.path.join(out, f"ckpt-{step}")) for step in (2, 4, 6)]
    assert task.evaluated == kernels and task.skips == [] and outcome["best_step"] == 4
    assert outcome["predicted_with"] == kernels[1]


def test_a_finished_run_cleaned_down_to_its_best_checkpoint_still_predicts_with_it(tmp_path):
    """The checkpoints of a finished run removed but `best_checkpoint/` and its record: a run without --do_train
    evaluates nothing again and predicts with the best weights."""
    out = tmp_path / "run"
    first = runner.run(_LineTask(scores=(0.1, 0.9, 0.5)), _LineParams(output_dir=str(out)))
    for name in os.listdir(out):
        if name.startswith("ckpt-") or name == "checkpoint":
            os.remove(out / name)
    task = _LineTask()
    outcome = runner.run(task, _LineParams(output_dir=str(out), do_train=False, do_eval=True))
    assert task.evaluated == [] and outcome["best_step"] == 4 and outcome["eval_results"]["score"] == 0.9
    assert outcome["predicted_with"] == first["predicted_with"] == _kernel_at(out / "best_checkpoint" / "ckpt-4")


def test_without_a_metric_it_evaluates_once_at_the_end_with_the_latest_weights(tmp_path, caplog):
    out = str(tmp_path / "run")
    task = _LineTask(metric=None)
    caplog.set_level("INFO")
    outcome = runner.run(task, _LineParams(output_dir=out, do_eval=True, keep_checkpoint_max=1))
    assert f"Eval results: {outcome['eval_results']}" in caplog.messages
    assert _steps(out) == [6] and len(task.evaluated) == 1
    assert outcome["eval_results"] == {"score": 0.0, "kernel": task.evaluated[0], "global_step": 6}
    assert task.evaluated[0] == _kernel_at(os.path.join(out, "ckpt-6")) == outcome["predicted_with"]
    with open(outcome["eval_results_file"], encoding="utf-8") as f:
        assert "global_step = 6" in f.read().splitlines()
    assert "best_step" not in outcome and not os.path.exists(os.path.join(out, "best_checkpoint"))

    task = _LineTask(metric=None)  # without --do_eval: a dev set is there, nothing is evaluated
    outcome = runner.run(task, _LineParams(output_dir=str(tmp_path / "no_eval"), do_eval=False))
    assert task.evaluated == [] and "eval_results" not in outcome
    assert not os.path.exists(os.path.join(tmp_path, "no_eval", "eval_results.txt"))


def test_a_task_without_eval_and_predict_flags_only_trains(tmp_path):
    """Settings without `do_eval` and `do_predict` (a dev set there, no metric): nothing is evaluated, predicted
    or loaded again after training."""
    task = _LineTask(metric=None)
    outcome = runner.run(task, _TrainOnlyParams(output_dir=str(tmp_path / "run")))
    assert outcome["step"] == 6 and task.evaluated == []
    assert not {"eval_results", "final_weights", "predicted_with"} & set(outcome)


def test_a_model_from_init_checkpoint_alone_is_evaluated_predicted_and_exported(tmp_path, monkeypatch):
    """No training and no checkpoint of its own: the --init_checkpoint weights are evaluated as they are (recorded
    in eval_results.txt), predicted and exported with, as step 0."""
    runner.run(_LineTask(metric=None), _LineParams(output_dir=str(tmp_path / "first"), do_predict=False))
    init = str(tmp_path / "first" / "ckpt-6")
    loaded = []

    def load_init_checkpoint(model, params):  # the weights only, as the formats' loaders read them
        loaded.append(params.init_checkpoint)
        kernel, bias = _weights_at(params.init_checkpoint)
        model.dense.kernel.assign(kernel)
        model.dense.bias.assign(bias)

    monkeypatch.setattr(runner, "load_init_checkpoint", load_init_checkpoint)
    out, export = tmp_path / "second", tmp_path / "export"
    task = _LineTask(scores=(0.7,))
    outcome = runner.run(task, _LineParams(output_dir=str(out), init_checkpoint=init, do_train=False,
                                           export_dir=str(export)))
    assert loaded == [init] and task.evaluated == [_kernel_at(init)]
    assert outcome["eval_results"] == {"score": 0.7, "kernel": _kernel_at(init), "global_step": 0}
    assert "global_step = 0" in (out / "eval_results.txt").read_text().splitlines()
    assert (outcome["final_weights"], outcome["final_step"]) == (init, 0)
    assert outcome["predicted_with"] == _kernel_at(init) and outcome["export_dir"] == str(export / "0")
    assert _steps(out) == [] and "best_step" not in outcome


def test_init_checkpoint_errors_name_the_flag_and_group0_is_used_only_when_asked(monkeypatch, caplog):
    asked = []
    caplog.set_level("INFO")

    def load_checkpoint(model, path, init_from_group0):  # pylint: disable=unused-argument
        asked.append(init_from_group0)
        if path == "misfit":
            raise checkpoints.CheckpointMismatchError("misfit: shape of x differs")
        if path == "missing":
            raise checkpoints.CheckpointNotFoundError("missing: not found")
        return "all weights loaded"

    monkeypatch.setattr(runner.checkpoints, "load_checkpoint", load_checkpoint)
    model = types.SimpleNamespace(config=tiny_config())
    assert runner.load_init_checkpoint(model, types.SimpleNamespace(init_checkpoint="ok")) == "all weights loaded"
    assert caplog.messages == ["Initialised from ok: all weights loaded"]
    runner.load_init_checkpoint(model, types.SimpleNamespace(init_checkpoint="ok", init_from_group0=True))
    assert asked == [False, True]
    c = model.config
    with pytest.raises(checkpoints.CheckpointMismatchError, match=re.escape(
            f"--init_checkpoint misfit does not fit the model of the albert config (hidden_size={c.hidden_size}, "
            f"num_hidden_layers={c.num_hidden_layers}, vocab_size={c.vocab_size}, ...): misfit: shape of x differs")):
        runner.load_init_checkpoint(model, types.SimpleNamespace(init_checkpoint="misfit"))
    with pytest.raises(checkpoints.CheckpointNotFoundError, match="^--init_checkpoint: missing: not found$"):
        runner.load_init_checkpoint(model, types.SimpleNamespace(init_checkpoint="missing"))


def test_a_resume_with_another_learning_rate_is_refused_unless_allowed(tmp_path):
    out = tmp_path / "run"
    runner.run(_LineTask(metric=None), _LineParams(output_dir=str(out), num_train_steps=2, do_predict=False))
    with pytest.raises(RunError, match=r"--learning_rate=0\.05 \(now 0\.1\)"):
        runner.run(_LineTask(metric=None), _LineParams(output_dir=str(out), num_train_steps=4, learning_rate=0.1))
    assert _steps(out) == [2]
    outcome = runner.run(_LineTask(metric=None), _LineParams(output_dir=str(out), num_train_steps=4,
                                                             learning_rate=0.1, allow_settings_change=True))
    assert (outcome["start_step"], outcome["step"]) == (2, 4)


def test_checks_come_before_anything_is_written(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(UsageError, match=r"^--learning_rate=0: must be greater than 0$"):  # params made in code
        runner.run(_LineTask(), _LineParams(output_dir=str(out), learning_rate=0))
    with pytest.raises(ValueError, match="--max_seq_length"):
        runner.run(_LineTask(), _MaxSeqLineParams(output_dir=str(out), max_seq_length=513))
    with pytest.raises(UsageError, match="^the task says no$"):
        runner.run(_LineTask(fail_check="the task says no"), _LineParams(output_dir=str(out)))
    assert not out.exists()
    with pytest.raises(UsageError, match="^--save_checkpoints_steps must be at least 1, got 0$"):
        runner.run(_LineTask(), _LineParams(output_dir=str(out), save_checkpoints_steps=0))
    with pytest.raises(UsageError, match="^--train_batch_size must be at least 1, got 0$"):
        runner.run(_LineTask(), _LineParams(output_dir=str(out), train_batch_size=0))
    with pytest.raises(UsageError, match="^--keep_checkpoint_max must be at least 0, got -1$"):
        runner.run(_LineTask(), _LineParams(output_dir=str(out), keep_checkpoint_max=-1))
    with pytest.raises(UsageError, match="^--iterations_per_loop must be at least 1, got 0$"):
        runner.run(_LineTask(), _LineParams(output_dir=str(out), iterations_per_loop=0))
    assert not out.exists()
    with pytest.raises(RunError, match=rf"^nothing to evaluate: no checkpoint in {out} and no --init_checkpoint$"):
        runner.run(_LineTask(), _LineParams(output_dir=str(out), do_train=False))
    with pytest.raises(RunError, match=rf"^nothing to predict or export with: no checkpoint in {out} and no "
                                       r"--init_checkpoint$"):
        runner.run(_LineTask(metric=None), _LineParams(output_dir=str(out), do_train=False))
    # Not training: the batch size is not checked, and there is nothing else to do.
    outcome = runner.run(_LineTask(metric=None), _LineParams(output_dir=str(out), do_train=False, do_predict=False,
                                                             train_batch_size=0))
    assert outcome["step"] == 0 and "final_weights" not in outcome and _steps(out) == []


def test_a_corrupt_training_file_is_the_tasks_error(tmp_path):
    bad = tmp_path / "train.tf_record"
    bad.write_bytes(b"\x05" * 64)
    with pytest.raises(DataError, match=rf"^--train_file {bad}: corrupt \(DataLossError\)$"):
        runner.run(_LineTask(metric=None), _LineParams(output_dir=str(tmp_path / "run"), train_file=str(bad)))


def test_a_corrupt_dev_file_is_the_tasks_error_and_another_models_folder_is_refused(tmp_path, monkeypatch):
    out = tmp_path / "run"
    runner.run(_LineTask(metric=None), _LineParams(output_dir=str(out), do_predict=False))

    def corrupt(model, params, strategy):  # pylint: disable=unused-argument
        raise tf.errors.DataLossError(None, None, "corrupted record at 12")

    task = _LineTask(metric=None)
    monkeypatch.setattr(task, "evaluate", corrupt)
    with pytest.raises(DataError, match=r"^--dev_file: corrupt \(DataLossError\)$"):
        runner.run(task, _LineParams(output_dir=str(out), do_train=False, do_eval=True, do_predict=False))
    with pytest.raises(RunError, match=r"holds a run of a different model \(fields vocab_size differ"):
        runner.run(_LineTask(metric=None), _LineParams(output_dir=str(out), albert_config=tiny_config(vocab_size=99)))


@pytest.mark.parametrize("where", ["", "best_checkpoint"])
def test_a_checkpoint_state_file_that_is_not_one_is_named_before_anything_is_written(tmp_path, where):
    out = tmp_path / "run"
    runner.run(_LineTask(scores=(0.5, 0.9, 0.1)), _LineParams(output_dir=str(out), do_predict=False))
    state = out / where / "checkpoint"
    state.write_bytes(b"\xff\xfe not a state file")
    before = sorted(os.listdir(out))
    with pytest.raises(checkpoints.CorruptCheckpointError, match=f"{state} is corrupt"):
        runner.run(_LineTask(), _LineParams(output_dir=str(out), num_train_steps=8))
    assert sorted(os.listdir(out)) == before
    with pytest.raises(checkpoints.CorruptCheckpointError, match=f"^--output_dir: {state} is corrupt"):
        runner.restore_or_initialize(_Line(), str(out), 5)  # a worker's own folder is checked here too


def test_a_checkpoint_of_other_objects_is_refused_and_a_resume_is_logged(tmp_path, caplog):
    out = tmp_path / "run"
    runner.run(_LineTask(metric=None), _LineParams(output_dir=str(out), do_predict=False))
    caplog.set_level("INFO")
    runner.run(_LineTask(metric=None), _LineParams(output_dir=str(out), num_train_steps=8, do_predict=False))
    assert f"Resumed from {out / 'ckpt-6'} at step 6" in caplog.messages
    other = tmp_path / "other"
    shutil.copytree(out, other)
    for name in os.listdir(other):
        if name.startswith("ckpt-8."):
            os.remove(other / name)
    tf.train.Checkpoint(unrelated=tf.Variable(1.0)).write(str(other / "ckpt-8"))  # the model's objects missing
    with pytest.raises(RunError, match=f"^cannot resume from {other / 'ckpt-8'}: "):
        runner.run(_LineTask(metric=None), _LineParams(output_dir=str(other), num_train_steps=10))


def test_the_precision_policy_and_random_states_are_the_callers_again_after_a_run(tmp_path):
    random.seed(7)
    np.random.seed(7)
    expected = (random.random(), float(np.random.random()))
    random.seed(7)
    np.random.seed(7)
    before = keras.mixed_precision.global_policy().name
    task = _LineTask(metric=None)
    outcome = runner.run(task, _LineParams(output_dir=str(tmp_path / "run"), mixed_precision="bf16",
                                           num_train_steps=2, jit_compile=True))
    assert outcome["dtype_policy"] == "mixed_bfloat16" and keras.mixed_precision.global_policy().name == before
    assert task.model.jit_compile is True
    assert (random.random(), float(np.random.random())) == expected


def test_the_files_a_run_reads_are_listed_and_never_written_over(tmp_path):
    for name in ("a.txt", "b1.txt", "b2.txt", "vocab.txt"):
        (tmp_path / name).write_text("x")
    params = types.SimpleNamespace(input_file=f" {tmp_path / 'a.txt'}, {tmp_path / 'b*.txt'},", vocab_file="",
                                   spm_model_file=str(tmp_path / "missing.model"), init_checkpoint=None,
                                   train_file=7, albert_config_file=str(tmp_path / "vocab.txt"))
    assert runner.run_inputs(params) == [("--input_file", str(tmp_path / "a.txt")),
                                         ("--input_file", str(tmp_path / "b1.txt")),
                                         ("--input_file", str(tmp_path / "b2.txt")),
                                         ("--spm_model_file", str(tmp_path / "missing.model")),
                                         ("--albert_config_file", str(tmp_path / "vocab.txt"))]
    out = tmp_path / "run"
    out.mkdir()
    (out / "eval_results.txt").write_text("read by the run")
    with pytest.raises(UsageError, match="--vocab_file"):
        runner.run(_LineTask(metric=None), _LineParams(output_dir=str(out), do_eval=True,
                                                       vocab_file=str(out / "eval_results.txt")))
    assert (out / "eval_results.txt").read_text() == "read by the run"


def test_the_config_is_recorded_in_a_new_folder_and_only_when_it_changes(tmp_path):
    out = tmp_path / "new" / "run"
    runner.record_config(str(out), tiny_config())
    recorded = out / "albert_config.json"
    assert json.loads(recorded.read_text()) == tiny_config().to_dict()
    recorded.write_text(recorded.read_text() + " ")  # the same config: left as it is
    runner.record_config(str(out), tiny_config())
    assert recorded.read_text().endswith(" ")
    runner.record_config(str(out), tiny_config(vocab_size=1000))
    assert json.loads(recorded.read_text())["vocab_size"] == 1000


def test_precision_names_and_export_versions():
    assert [runner.precision_policy(name) for name in (None, "", "fp32", "bf16", "fp16")] == \
        ["float32", "float32", "float32", "mixed_bfloat16", "mixed_float16"]
    with pytest.raises(UsageError, match=r"^--mixed_precision must be bf16 or fp16, got 'fp8'$"):
        runner.precision_policy("fp8")
    assert runner.versioned_export_dir("/exports", 12.0) == os.path.join("/exports", "12")
    with pytest.raises(TypeError):  # keyword-only: a task's params add fields of their own after these
        runner.RuntimeParams("mirrored")
    defaults = runner.RuntimeParams()  # this project's own runtime settings: off, or every 100 steps
    assert (defaults.strategy, defaults.mixed_precision, defaults.jit_compile, defaults.remat, defaults.log_every,
            defaults.allow_settings_change) == ("default", None, False, False, 100, False)
    schedule = _LineTask().train_schedule(_LineParams(output_dir="x"))
    with pytest.raises(dataclasses.FrozenInstanceError):  # what a task declared, not changed on the way
        schedule.learning_rate = 1.0
