"""The one run loop: what every task (pretraining, classification, SQuAD, RACE) goes through.

`run(task, params)` does, in this order:

1. sets the precision policy and seeds for the run (restored afterwards), builds the `tf.distribute`
   strategy, and takes the output directory's lock (`fileio.DirectoryLock`: a second run on it is refused);
2. checks, writing nothing: the flags, the task's inputs (`task.check`: files, lengths, empty splits), that
   `--output_dir` holds no other model's run (nor checkpoints without an `albert_config.json`), and — after
   building the model and its optimizer — the checkpoint it starts from: the latest in `--output_dir` (a
   resumed run) or `--init_checkpoint` in any format `albert_tf.checkpoints` reads;
3. records `albert_config.json`, lets the task write its cached records (`task.prepare`), removes what killed
   runs left (TF's `ckpt-N_temp` directories, partial files);
4. trains to the exact step with `fit`, one Keras epoch per checkpoint interval, skipping on resume the batches
   already seen (`resume_skip`, right for any number of replicas and input pipelines), saving every
   `save_checkpoints_steps`; when the task has dev data and a metric, every saved checkpoint is evaluated as it
   is saved and the best kept (`best_checkpoint.CheckpointEvaluator`);
5. evaluates (tasks without a metric: once, at the end), predicts with the best checkpoint (else the latest,
   else the init checkpoint), and exports a versioned SavedModel `<export_dir>/<global_step>/` (the layout TF
   Serving watches), never removing anything it did not write.

A task is any object with the methods of `Task` below; `albert_tf.tasks` has the four of the original.
"""

import contextlib
import dataclasses
import logging
import math
import os
import random
import time
from typing import Protocol

import keras
import numpy as np
import tensorflow as tf

from albert_tf import checkpoints, fileio, guard
from albert_tf.config import AlbertConfig
from albert_tf.errors import RunError, UsageError
from albert_tf.model import set_remat
from albert_tf.settings import NON_NEGATIVE, setting
from albert_tf.train import callbacks, distribution, optimization, run_settings
from albert_tf.train.best_checkpoint import CheckpointEvaluator, best_checkpoint_prefix

CONFIG_JSON = "albert_config.json"
PRECISION_POLICIES = {None: "float32", "": "float32", "fp32": "float32", "bf16": "mixed_bfloat16",
                      "fp16": "mixed_float16"}


# The original's TPU flags among `RuntimeParams`' settings (`cli.define_tpu_flags`); the others are this project's
# (`cli.define_runtime_flags`).
TPU_SETTINGS = ("use_tpu", "tpu_name", "tpu_zone", "gcp_project", "master", "num_tpu_cores")


# What every training run writes inside its --output_dir (a task adds its own): an input found among these names
# there would be replaced by the run, so `albert_tf.guard` refuses it. (albert_config.json is not among them: a
# resume may read the config the run recorded, which is rewritten only when it differs, and refused then.)
RUN_WRITES = ("ckpt-*", "checkpoint", run_settings.SETTINGS_JSON, "eval_results.txt", "eval_history.json",
              "best_checkpoint", "best_checkpoint.json", "train", "eval", "*.tf_record")


@dataclasses.dataclass(kw_only=True)
class RuntimeParams:
    """Where and how a run executes, common to every script: the original's TPU flags, `--strategy`,
    precision, XLA, activation recomputation, the seed and the logging interval. Each `setting` field is the
    flag of its name; each task's params declare `random_seed`'s setting, saying what its seed seeds."""

    strategy: str = setting("default", "tf.distribute strategy: tpu, mirrored (GPUs of one machine), multi_worker "
                                       "(TF_CONFIG), one_device, or default (no distribution).",
                            choices=distribution.STRATEGIES, trains=False)
    use_tpu: bool = setting(False, "Whether to use TPU (same as --strategy=tpu).", trains=False)
    tpu_name: str = setting(None, "The Cloud TPU to use: its name, grpc:// address, or 'local' on a TPU VM.",
                            trains=False)
    tpu_zone: str = setting(None, "GCE zone of the Cloud TPU (found from metadata if not given).", trains=False)
    gcp_project: str = setting(None, "GCP project of the Cloud TPU (found from metadata if not given).", trains=False)
    master: str = setting(None, "[Optional] TensorFlow master URL.", trains=False)
    num_tpu_cores: int = setting(8, "Accepted for compatibility and unused: TPUStrategy finds the cores itself.",
                                 trains=False)
    mixed_precision: str = setting(None, "Mixed precision: bf16 (TPUs, recent GPUs) or fp16 (GPUs, with loss "
                                         "scaling).", choices=("bf16", "fp16"))
    jit_compile: bool = setting(False, "Compile the training step with XLA.", trains=False)
    remat: bool = setting(False, "Recompute each Transformer block's activations in the backward pass instead of "
                                 "keeping them (less memory, more compute).", trains=False)
    random_seed: int = 12345
    allow_settings_change: bool = setting(False, "Resume a run whose recorded settings (settings.json) differ in "
                                                 "what is trained (learning rate, batch size, data, ...).",
                                          trains=False)
    log_every: int = setting(100, "Log the training metrics every this many steps (0: quiet).",
                             bounds=NON_NEGATIVE, trains=False)


@dataclasses.dataclass(frozen=True)
class Schedule:
    """How long and how a task trains (what `Task.train_schedule` returns)."""

    num_train_steps: int
    num_warmup_steps: int
    start_warmup_step: int
    poly_power: float
    optimizer: str
    learning_rate: float
    save_checkpoints_steps: int
    keep_checkpoint_max: int
    iterations_per_loop: int
    train_batch_size: int


class Task(Protocol):
    """What a task declares; the runner does the rest. `params` is the task's own params dataclass (a
    `RuntimeParams` with `albert_config`, `output_dir`, `init_checkpoint`, `do_train`, `export_dir`, ...)."""

    name: str

    def check(self, params, strategy):
        """Validates flags and inputs, reading but writing nothing; raises an `AlbertError` naming the culprit."""

    def primary_metric(self, params):
        """The result that picks the best checkpoint, or None (evaluate once, at the end)."""

    def train_schedule(self, params):
        """The `Schedule`: steps, warm-up, optimizer, checkpoint interval and depth, batch size."""

    def build_model(self, params):
        """The trainable model with its weights built (called under the strategy's scope)."""

    def compile_args(self, params):
        """Keyword arguments for `compile` besides the optimizer (metrics)."""

    def prepare(self, params, strategy, cache_dir):
        """Writes the task's cached records (after every check passed)."""

    def train_dataset(self, params, input_context, skip_batches):
        """The training batches of one input pipeline, `skip_batches` batches in."""

    def has_dev(self, params):
        """Whether dev data is there to evaluate on."""

    def evaluate(self, model, params, strategy):
        """Results (a dict) of the model's weights on the dev data."""

    def predict(self, model, params, strategy, output_dir):
        """Writes the prediction files; returns the entries to add to the outcome."""

    def export(self, model, params, export_dir):
        """Writes the SavedModel(s) under `export_dir`; returns the written directory (or a dict of them)."""

    def data_error(self, params, error, evaluating=False):
        """The `DataError` (naming the file) for a `tf.errors.DataLossError` met while reading training data (or,
        `evaluating`, dev data)."""


def precision_policy(mixed_precision):
    """The Keras dtype policy of a `--mixed_precision` value (none, bf16 or fp16); UsageError otherwise."""
    if mixed_precision not in PRECISION_POLICIES:
        raise UsageError(f"--mixed_precision must be bf16 or fp16, got {mixed_precision!r}")
    return PRECISION_POLICIES[mixed_precision]


@contextlib.contextmanager
def dtype_policy_scope(policy):
    """Keras' global dtype policy set to `policy` (a name) for the models built inside, the previous one after."""
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(policy)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


@contextlib.contextmanager
def runtime_scope(params):
    """Sets Keras' dtype policy from `--mixed_precision` and the seeds from `--random_seed` for one run, and
    restores the previous policy and the Python / numpy random states afterwards."""
    policy = precision_policy(params.mixed_precision)
    python_state, numpy_state = random.getstate(), np.random.get_state()
    with dtype_policy_scope(policy):
        keras.utils.set_random_seed(params.random_seed)
        try:
            yield
        finally:
            random.setstate(python_state)
            np.random.set_state(numpy_state)


def check_schedule(schedule, do_train):
    """Refuses a schedule no run can follow: a batch of no example, checkpoints every 0 steps, and the like (the
    flags of these fields have the fields' names in every script)."""
    minimum = {"save_checkpoints_steps": 1, "iterations_per_loop": 1, "keep_checkpoint_max": 0}
    if do_train:
        minimum["train_batch_size"] = 1
    for name, least in minimum.items():
        value = getattr(schedule, name)
        if value is not None and value < least:
            raise UsageError(f"--{name} must be at least {least}, got {value}")


def get_strategy(params):
    return distribution.get_strategy(params.strategy, params.tpu_name, params.tpu_zone, params.gcp_project,
                                     params.master, params.use_tpu)


def check_output_dir(output_dir, config, source_flag="--albert_config_file"):
    """Refuses an `output_dir` that holds checkpoints of a different model, or checkpoints with no record of
    their model; writes nothing. A config recorded by a run that saved no checkpoint does not count: the
    corrected rerun replaces it."""
    if tf.io.gfile.exists(output_dir) and not tf.io.gfile.isdir(output_dir):
        raise UsageError(f"--output_dir {output_dir} is a file, not a directory")
    path = os.path.join(output_dir, CONFIG_JSON)
    if tf.io.gfile.exists(path) and checkpoints.latest_checkpoint(output_dir):
        existing = AlbertConfig.from_json_file(path)
        if existing.to_dict() != config.to_dict():
            diff = [k for k, v in config.to_dict().items() if existing.to_dict().get(k) != v]
            raise RunError(f"--output_dir {output_dir} holds a run of a different model (fields "
                           f"{', '.join(diff)} differ from {source_flag}); use a new --output_dir")
    elif tf.io.gfile.isdir(output_dir) and checkpoints.latest_checkpoint(output_dir):
        raise RunError(f"--output_dir {output_dir} holds checkpoints but no {CONFIG_JSON}, so their model cannot be "
                       f"checked against {source_flag}; use a new --output_dir (or copy the model's config there)")


def record_config(output_dir, config):
    """Writes `albert_config.json` into `output_dir` (made if needed) unless it records this config already."""
    path = os.path.join(output_dir, CONFIG_JSON)
    if not tf.io.gfile.exists(path) or AlbertConfig.from_json_file(path).to_dict() != config.to_dict():
        fileio.write_text(path, config.to_json_string())


def resume_skip(steps_done, input_context):
    """Batches one input pipeline skips to resume after `steps_done` steps: a step takes one batch per replica,
    and a pipeline feeds num_replicas / num_input_pipelines of them."""
    replicas = input_context.num_replicas_in_sync
    pipelines = input_context.num_input_pipelines
    return steps_done * replicas // pipelines


def plan_steps(num_train_steps, save_checkpoints_steps, iterations_per_loop, done):
    """Epoch layout for `fit`: (steps_per_epoch, epochs, initial_epoch, steps_per_execution).

    One Keras epoch spans a checkpoint interval, so a resumed run (whose step `done` is always at a
    checkpoint) starts at an epoch boundary; `steps_per_execution` divides every boundary.
    """
    steps_per_epoch = max(1, min(save_checkpoints_steps, num_train_steps))
    epochs = math.ceil(num_train_steps / steps_per_epoch)
    initial_epoch = done // steps_per_epoch
    steps_per_execution = math.gcd(math.gcd(max(iterations_per_loop, 1), steps_per_epoch), num_train_steps)
    if done % steps_per_execution:
        steps_per_execution = math.gcd(steps_per_execution, done)
    return steps_per_epoch, epochs, initial_epoch, steps_per_execution


def checkpoint_for(model):
    """The `tf.train.Checkpoint` of a training run: model, optimizer and the dropout RNG states (Keras seed
    generators are in `model.variables` but not among the model's checkpoint children; without them a resumed
    run would draw other dropout masks)."""
    rng_states = [v.value for v in model.variables if v.path.endswith("seed_generator_state")]
    return tf.train.Checkpoint(model=model, optimizer=model.optimizer, rng_states=rng_states)


def restore_or_initialize(model, directory, keep_checkpoint_max, initialize=None):
    """Resumes `model` (and its compiled, built optimizer) from the latest checkpoint in `directory`, or calls
    `initialize()` when there is none. Returns (checkpoint manager, global step).

    A `checkpoint` state file (here or in `best_checkpoint/`) that is not one, or a latest checkpoint that cannot
    be read, raises `CorruptCheckpointError` naming it, before anything is written (TF raises a
    `UnicodeDecodeError` on a state file that is not text, and ignores one that does not parse, so that training
    starts over and overwrites it); one of another model raises `RunError`."""
    try:
        checkpoints.latest_checkpoint(directory)
        best_checkpoint_prefix(directory)
    except checkpoints.CheckpointError as err:
        raise type(err)(f"--output_dir: {err}") from None
    checkpoint = checkpoint_for(model)
    manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=keep_checkpoint_max)
    if manager.latest_checkpoint:
        try:
            with checkpoints.errors.reading(manager.latest_checkpoint):
                status = checkpoint.restore(manager.latest_checkpoint)
            status.assert_existing_objects_matched()
        except checkpoints.CorruptCheckpointError as err:
            raise checkpoints.CorruptCheckpointError(f"--output_dir: cannot resume: {err}") from None
        except (tf.errors.OpError, ValueError, AssertionError) as err:
            raise RunError(f"cannot resume from {manager.latest_checkpoint}: {str(err).splitlines()[0]}") from None
        logging.info("Resumed from %s at step %d", manager.latest_checkpoint, callbacks.global_step(model))
    elif initialize is not None:
        initialize()
    return manager, callbacks.global_step(model)


def fit_to_step(model, dataset, manager, num_train_steps, save_checkpoints_steps, iterations_per_loop, *,
                log_every, log_dir=None, extra_callbacks=()):
    """Runs `fit` from the current global step (below `num_train_steps`) to `num_train_steps`, saving checkpoints
    on the way, logging every `log_every` steps (0: quietly) and writing step summaries under `log_dir` when given.

    `dataset` must already skip the batches of the steps done. Returns (steps run, seconds).
    """
    done = callbacks.global_step(model)
    steps_per_epoch, epochs, initial_epoch, per_execution = plan_steps(
        num_train_steps, save_checkpoints_steps, iterations_per_loop, done)
    model.steps_per_execution = per_execution
    all_callbacks = [callbacks.StopOnNonFiniteLoss(),
                     callbacks.CheckpointCallback(manager, save_checkpoints_steps, num_train_steps),
                     callbacks.StopAtStep(num_train_steps), callbacks.StepLogger(num_train_steps, log_every),
                     *extra_callbacks]
    if log_dir:
        all_callbacks.append(callbacks.StepSummaries(log_dir))
    start = time.time()
    model.fit(dataset, epochs=epochs, initial_epoch=initial_epoch, steps_per_epoch=steps_per_epoch, shuffle=False,
              callbacks=all_callbacks, verbose=2 if log_every else 0)
    return callbacks.global_step(model) - done, time.time() - start


def load_init_checkpoint(model, params):
    """Loads `--init_checkpoint` into `model`; a checkpoint that does not fit names the flag and the config, one
    that is not there or cannot be read names the flag and the file at fault (never "does not fit")."""
    try:
        result = checkpoints.load_checkpoint(model, params.init_checkpoint,
                                             init_from_group0=getattr(params, "init_from_group0", False))
    except checkpoints.CheckpointMismatchError as err:
        c = model.config
        raise checkpoints.CheckpointMismatchError(
            f"--init_checkpoint {params.init_checkpoint} does not fit the model of the albert config "
            f"(hidden_size={c.hidden_size}, num_hidden_layers={c.num_hidden_layers}, vocab_size={c.vocab_size}, "
            f"...): {err}") from None
    except checkpoints.CheckpointError as err:  # not there, or unreadable: it fits no model
        raise type(err)(f"--init_checkpoint: {err}") from None
    logging.info("Initialised from %s: %s", params.init_checkpoint, result)
    return result


def _final_weights(model, output_dir, manager, params):
    """Puts the weights to predict and export with into `model`: the best checkpoint, else the latest, else
    those of --init_checkpoint (already loaded). Returns what was used."""
    for prefix in (best_checkpoint_prefix(output_dir), manager.latest_checkpoint):
        if prefix:
            with checkpoints.errors.reading(prefix):
                tf.train.Checkpoint(model=model).read(prefix).expect_partial()
            return prefix
    if params.init_checkpoint:
        return params.init_checkpoint
    raise RunError(f"nothing to predict or export with: no checkpoint in {output_dir} and no --init_checkpoint")


INPUT_FLAGS = ("input_file", "eval_input_file", "train_file", "predict_file", "spm_model_file", "vocab_file",
               "albert_config_file", "init_checkpoint")


def run_inputs(params):
    """(flag, path) of the files a run reads, from the params of these names (comma-separated globs expanded);
    nothing the run writes may replace one of them (`fileio.inputs_protected`)."""
    inputs = []
    for name in INPUT_FLAGS:
        value = getattr(params, name, None)
        if not isinstance(value, str) or not value:
            continue
        for pattern in (p.strip() for p in value.split(",") if p.strip()):
            matches = tf.io.gfile.glob(pattern) if any(c in pattern for c in "*?[") else [pattern]
            inputs.extend((f"--{name}", path) for path in matches)
    return inputs


def versioned_export_dir(export_dir, step):
    """`<export_dir>/<step>`: TF Serving serves the highest version in `export_dir`."""
    return os.path.join(export_dir, str(int(step)))


def run(task, params):
    """Runs `task` as `params` asks (see the module docstring); returns the outcome dict: `output_dir`,
    `start_step`, `step`, and as applicable `train_seconds`, `train_examples_per_second`, `eval_results`,
    `best_step`, `eval_history`, `final_weights`, the task's prediction entries and `export_dir`."""
    guard.check_params(params)  # what the script's guard checked of its flags, for params built in code
    config = params.albert_config
    config.check_sequence_length(getattr(params, "max_seq_length", None), "--max_seq_length")
    with runtime_scope(params):
        strategy = get_strategy(params)
        write_dir = distribution.worker_dir(params.output_dir, strategy)
        chief = distribution.is_chief(strategy)
        with fileio.DirectoryLock(write_dir, "--output_dir"), fileio.inputs_protected(run_inputs(params)):
            return _run_locked(task, params, strategy, write_dir, chief)


def _evaluate(task, model, params, strategy):
    try:
        return task.evaluate(model, params, strategy)
    except tf.errors.DataLossError as err:
        raise task.data_error(params, err, evaluating=True) from None


def _run_locked(task, params, strategy, write_dir, chief):
    config = params.albert_config
    check_output_dir(params.output_dir, config)
    if checkpoints.latest_checkpoint(params.output_dir):
        run_settings.check_resume(params.output_dir, params, params.allow_settings_change)
    task.check(params, strategy)
    schedule = task.train_schedule(params)
    check_schedule(schedule, params.do_train)
    num_train_steps, train_batch_size = schedule.num_train_steps, schedule.train_batch_size
    if params.do_train and train_batch_size % strategy.num_replicas_in_sync:
        raise UsageError(f"--train_batch_size {train_batch_size} is not divisible by the "
                         f"{strategy.num_replicas_in_sync} replicas")

    with strategy.scope():
        model = set_remat(task.build_model(params), params.remat)  # --remat: recompute blocks
        optimizer = optimization.create_optimizer(schedule.optimizer, schedule.learning_rate, num_train_steps,
                                                  schedule.num_warmup_steps, schedule.start_warmup_step,
                                                  schedule.poly_power)
        model.compile(optimizer=optimizer, jit_compile=params.jit_compile, **task.compile_args(params))
        model.optimizer.build(model.trainable_variables)  # its slots restored now, even when no step is left
        keep = schedule.keep_checkpoint_max or None  # 0: keep all
        initialize = (lambda: load_init_checkpoint(model, params)) if params.init_checkpoint else None
        manager, done = restore_or_initialize(model, write_dir, keep, initialize)

    # Every check has passed: from here on the run writes.
    if chief:
        record_config(params.output_dir, config)
        run_settings.record_settings(params.output_dir, params)
    tf.io.gfile.makedirs(write_dir)
    fileio.remove_stale_checkpoint_temps(write_dir)
    fileio.remove_stale_partials(write_dir)
    task.prepare(params, strategy, write_dir)

    outcome = {"output_dir": params.output_dir, "start_step": done, "step": done, "num_train_steps": num_train_steps,
               "dtype_policy": keras.mixed_precision.global_policy().name}
    metric = task.primary_metric(params)
    evaluator = None
    if metric and task.has_dev(params):
        evaluator = CheckpointEvaluator(model, lambda step: _evaluate(task, model, params, strategy), metric,
                                        params.output_dir, write=chief)

    if params.do_train and done < num_train_steps:
        logging.info("Training %s from step %d to %d, global batch size %d", task.name, done, num_train_steps,
                     train_batch_size)

        def dataset_fn(context):
            return task.train_dataset(params, context, resume_skip(done, context))

        dataset = strategy.distribute_datasets_from_function(dataset_fn)
        extra = []
        if evaluator is not None:
            extra.append(callbacks.EvaluateOnSave(
                manager, lambda prefix, step: evaluator.evaluate_checkpoint(prefix, step, weights_loaded=True),
                evaluator.history))
        try:
            steps, seconds = fit_to_step(model, dataset, manager, num_train_steps, schedule.save_checkpoints_steps,
                                         schedule.iterations_per_loop, log_dir=os.path.join(write_dir, "train"),
                                         log_every=params.log_every, extra_callbacks=extra)
        except tf.errors.DataLossError as err:
            raise task.data_error(params, err) from None
        done = callbacks.global_step(model)
        outcome.update(step=done, train_seconds=seconds,
                       train_examples_per_second=steps * train_batch_size / max(seconds, 1e-9))

    if evaluator is not None:
        pending = [p for p in manager.checkpoints if callbacks.checkpoint_step(p) not in evaluator.history]
        for prefix in pending:  # each loads its weights; `_final_weights` loads those to predict with
            evaluator.evaluate_checkpoint(prefix, callbacks.checkpoint_step(prefix))
        if not manager.checkpoints and not evaluator.history:
            if not params.init_checkpoint:
                raise RunError(f"nothing to evaluate: no checkpoint in {params.output_dir} and no --init_checkpoint")
            # A model fine-tuned elsewhere (--init_checkpoint), evaluated as it is; no checkpoint to keep.
            outcome["eval_results"] = evaluator.evaluate_weights(done)
            if chief:
                fileio.write_results(os.path.join(params.output_dir, "eval_results.txt"), outcome["eval_results"])
        if evaluator.best is not None:
            outcome.update(eval_results=evaluator.best["results"], best_step=evaluator.best["step"],
                           eval_history=dict(evaluator.history))
    elif getattr(params, "do_eval", False) and task.has_dev(params):
        results = dict(_evaluate(task, model, params, strategy))
        results["global_step"] = done
        outcome["eval_results"] = results
        outcome["eval_results_file"] = fileio.write_results(os.path.join(write_dir, "eval_results.txt"), results)
        logging.info("Eval results: %s", results)

    predicting = getattr(params, "do_predict", False)
    if predicting or params.export_dir:
        outcome["final_weights"] = _final_weights(model, params.output_dir, manager, params)
        outcome["final_step"] = int(callbacks.checkpoint_step(outcome["final_weights"])) \
            if outcome["final_weights"] != params.init_checkpoint else done
    if predicting:
        outcome.update(task.predict(model, params, strategy, write_dir))
    if params.export_dir and chief:
        target = versioned_export_dir(params.export_dir, outcome["final_step"])
        with fileio.DirectoryLock(params.export_dir, "--export_dir"):
            if tf.io.gfile.exists(target):  # never replaced: it may be serving, and it is not this run's
                logging.warning("%s exists (an export of step %d): kept as it is", target, outcome["final_step"])
                outcome["export_dir"] = target
            else:
                outcome["export_dir"] = task.export(model, params, target)
    return outcome

