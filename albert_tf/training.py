"""Training machinery shared by every script: gradient clipping across replicas, checkpoints that resume,
stopping at an exact step, and stopping on a non-finite loss.

Checkpoints are TF2 object-based (`tf.train.Checkpoint(model=..., optimizer=...)`), written by a
`tf.train.CheckpointManager` every `save_checkpoints_steps` steps and kept `keep_checkpoint_max` deep. TF writes
each checkpoint under temporary names and publishes it by updating the `checkpoint` state file last, so a run
killed mid-save still resumes from the previous one. The optimizer's step counter is the global step; a
restarted run restores model, optimizer state and step, and the scripts skip the batches already consumed
(the input pipelines are deterministic for a given seed), so the run continues as if never stopped.
"""

import dataclasses
import json
import logging
import math
import os
import time

import keras
import numpy as np
import tensorflow as tf

from albert_tf.config import AlbertConfig


class NonFiniteLossError(FloatingPointError):
    """Training produced a NaN or infinite loss; the message names the step."""


def clip_gradients_across_replicas(grads, clip_norm=1.0, loss_scale=1.0):
    """Scales each replica's gradients so that their sum has global norm at most `clip_norm`.

    Keras sums gradients over replicas after the optimizer would clip them, so clipping there would clip
    each replica's part separately. Here the norm is taken of the summed gradient (divided by the loss scale
    under float16), which makes a distributed step equal to a single-device step on the same global batch.
    Dense copies are taken of sparse (embedding) gradients; `None` gradients (unused weights, such as the
    pooler under a span head) stay `None` and the optimizer skips them.
    """
    grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
    present = [g for g in grads if g is not None]
    context = tf.distribute.get_replica_context()
    summed = present
    if context is not None and context.num_replicas_in_sync > 1:
        summed = context.all_reduce(tf.distribute.ReduceOp.SUM, present)
    norm = tf.linalg.global_norm(summed) / tf.cast(loss_scale, tf.float32)
    factor = clip_norm / tf.maximum(norm, clip_norm)
    return [None if g is None else g * tf.cast(factor, g.dtype) for g in grads]


def global_sum(value):
    """Sum of `value` over all replicas (identity on one replica)."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


def loss_scale_of(optimizer):
    """The current loss-scale factor (1 unless the optimizer is a `LossScaleOptimizer`)."""
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return optimizer.dynamic_scale
    return 1.0


def check_output_dir(output_dir, config, source_flag="--albert_config_file"):
    """Creates `output_dir` and records the model config there; refuses a directory that holds a different
    model (resuming someone else's run would silently corrupt it)."""
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, "albert_config.json")
    if os.path.exists(path):
        existing = AlbertConfig.from_json_file(path)
        if existing.to_dict() != config.to_dict():
            diff = [k for k, v in config.to_dict().items() if existing.to_dict().get(k) != v]
            raise ValueError(f"--output_dir {output_dir} holds a run of a different model (fields "
                             f"{', '.join(diff)} differ from {source_flag}); use a new --output_dir")
    else:
        config.to_json_file(path)


def set_precision(mixed_precision):
    """Sets Keras' global dtype policy from `--mixed_precision` (None, "bf16" or "fp16")."""
    policies = {None: "float32", "": "float32", "fp32": "float32", "bf16": "mixed_bfloat16",
                "fp16": "mixed_float16"}
    if mixed_precision not in policies:
        raise ValueError(f"--mixed_precision must be bf16 or fp16, got {mixed_precision!r}")
    keras.mixed_precision.set_global_policy(policies[mixed_precision])


class CheckpointCallback(keras.callbacks.Callback):
    """Saves through `manager` every `every` steps and at `last_step`; step = the optimizer's iterations."""

    def __init__(self, manager, every, last_step):
        super().__init__()
        self.manager = manager
        self.every = max(int(every), 1)
        self.last_step = last_step
        self._saved_at = None

    def _maybe_save(self, force=False):
        step = int(self.model.optimizer.iterations.numpy())
        if step == self._saved_at:
            return
        if force or step % self.every == 0 or step >= self.last_step:
            path = self.manager.save(checkpoint_number=step)
            self._saved_at = step
            logging.info("Saved checkpoint for step %d: %s", step, path)

    def on_train_batch_end(self, batch, logs=None):
        self._maybe_save()

    def on_train_end(self, logs=None):
        self._maybe_save()


class StopAtStep(keras.callbacks.Callback):
    """Stops `fit` once the optimizer has made `last_step` steps (the global step, across restarts)."""

    def __init__(self, last_step):
        super().__init__()
        self.last_step = last_step

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) >= self.last_step:
            self.model.stop_training = True


class StopOnNonFiniteLoss(keras.callbacks.Callback):
    """Raises `NonFiniteLossError` naming the step when the loss is NaN or infinite.

    It runs before the checkpoint callback in the callback list, so the bad state is never saved and the
    last good checkpoint stays the latest.
    """

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(np.asarray(loss))):
            step = int(self.model.optimizer.iterations.numpy())
            raise NonFiniteLossError(f"non-finite loss ({float(np.asarray(loss))}) at step {step}; stopped "
                                     "without saving, the last good checkpoint is kept")


class StepLogger(keras.callbacks.Callback):
    """Logs `step N/total` with the metrics every `every` steps (Keras' bar counts per epoch only)."""

    def __init__(self, total_steps, every=100):
        super().__init__()
        self.total_steps = total_steps
        self.every = max(int(every), 1)

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        if step % self.every == 0 or step >= self.total_steps:
            shown = ", ".join(f"{k}={float(np.asarray(v)):.4g}" for k, v in sorted((logs or {}).items()))
            logging.info("step %d/%d: %s", step, self.total_steps, shown)


class StepSummaries(keras.callbacks.Callback):
    """TensorBoard scalars of the training logs (losses, accuracies, learning_rate) against the global step,
    written after every call into the device (every `steps_per_execution` steps).

    Used instead of `keras.callbacks.TensorBoard`, which counts `on_train_batch_end` calls (executions, not
    steps), restarts that count at 0 in a resumed run, and with `update_freq=N` records every N-th call only,
    its epoch summaries falling under the same condition (most were dropped).
    """

    def __init__(self, log_dir):
        super().__init__()
        self.log_dir = log_dir
        self._writer = None

    def on_train_begin(self, logs=None):
        self._writer = tf.summary.create_file_writer(self.log_dir)

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        with self._writer.as_default():
            for name, value in (logs or {}).items():
                tf.summary.scalar(name, float(np.asarray(value)), step=step)

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.close()
            self._writer = None


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


def write_results(path, results):
    """Writes `key = value` lines (the original's eval_results.txt format), atomically."""
    tmp = path + ".tmp"
    with tf.io.gfile.GFile(tmp, "w") as f:
        for key in sorted(results):
            f.write(f"{key} = {results[key]}\n")
    tf.io.gfile.rename(tmp, path, overwrite=True)
    return path


def write_json(path, value):
    """Writes JSON atomically."""
    tmp = path + ".tmp"
    with tf.io.gfile.GFile(tmp, "w") as f:
        f.write(json.dumps(value, indent=2, sort_keys=True) + "\n")
    tf.io.gfile.rename(tmp, path, overwrite=True)
    return path


def restore_or_initialize(model, directory, keep_checkpoint_max, initialize=None):
    """Resumes `model` (and its compiled optimizer) from the latest checkpoint in `directory`, or calls
    `initialize()` (e.g. loading `--init_checkpoint`) when there is none.

    Returns (checkpoint manager, global step). The optimizer must be built first so its slots restore.
    """
    # The dropout RNG states (Keras seed generators) are saved too: `model.variables` holds them, but the
    # model's checkpoint children do not, and without them a resumed run would draw other dropout masks.
    rng_states = [v.value for v in model.variables if v.path.endswith("seed_generator_state")]
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer, rng_states=rng_states)
    manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=keep_checkpoint_max)
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
        logging.info("Resumed from %s at step %d", manager.latest_checkpoint, int(model.optimizer.iterations))
    elif initialize is not None:
        initialize()
    return manager, int(model.optimizer.iterations.numpy())


def fit_to_step(model, dataset, manager, num_train_steps, save_checkpoints_steps, iterations_per_loop,
                log_dir=None, log_every=100, callbacks=()):
    """Runs `fit` from the current global step to `num_train_steps`, saving checkpoints on the way.

    `dataset` must already skip the batches of the steps done (the step counter is the optimizer's). Returns
    the number of steps run and the seconds taken.
    """
    done = int(model.optimizer.iterations.numpy())
    if done >= num_train_steps:
        return 0, 0.0
    steps_per_epoch, epochs, initial_epoch, per_execution = plan_steps(
        num_train_steps, save_checkpoints_steps, iterations_per_loop, done)
    model.steps_per_execution = per_execution
    model.make_train_function(force=True)
    all_callbacks = [StopOnNonFiniteLoss(), CheckpointCallback(manager, save_checkpoints_steps, num_train_steps),
                     StopAtStep(num_train_steps), StepLogger(num_train_steps, log_every), *callbacks]
    if log_dir:
        all_callbacks.append(StepSummaries(log_dir))
    start = time.time()
    model.fit(dataset, epochs=epochs, initial_epoch=initial_epoch, steps_per_epoch=steps_per_epoch, shuffle=False,
              callbacks=all_callbacks, verbose=2 if log_every else 0)
    return int(model.optimizer.iterations.numpy()) - done, time.time() - start


def _multi_worker():
    strategy = tf.distribute.get_strategy()
    return (isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
            and strategy.extended._in_multi_worker_mode())  # pylint: disable=protected-access


def multi_worker_logs(logs):
    """The logs a `train_step`/`test_step` returns, in a shape Keras can reduce across workers.

    Under MultiWorkerMirroredStrategy, Keras 3.15 averages every log over replicas with
    `strategy.reduce("MEAN", value, axis=0)`, which fails on the scalars steps return ("Invalid reduction
    dimension 0 for input with 0 dimensions"; tensorflow/tensorflow#72388). There each log is given a length-1
    axis, which that reduce removes; elsewhere the logs are returned unchanged.
    """
    if not _multi_worker():
        return logs
    return {name: tf.reshape(value, [1]) for name, value in logs.items()}


class LocalBatchSymbolicBuild:
    """Mixin making Keras 3.15's `fit`/`evaluate` work under MultiWorkerMirroredStrategy.

    Before `fit`/`evaluate`, Keras takes the first distributed batch and averages it across replicas with
    `strategy.reduce("MEAN", batch)`, only to learn its shapes. MultiWorkerMirroredStrategy's `reduce` does not
    accept a nested batch (a dict of features): it fails with "Attempt to convert a value
    ({'input_ids': PerReplica...}) with an unsupported type (<class 'dict'>) to a Tensor". Here each feature's
    local replica value is used instead: same shapes, no cross-worker traffic, any strategy. Steps must
    return their logs through `multi_worker_logs` (the default `test_step` is wrapped here).
    """

    def test_step(self, data):
        return multi_worker_logs(super().test_step(data))

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        if iterator is not None and getattr(self, "_distribute_strategy", None) is not None:
            strategy = self._distribute_strategy
            for _, _, batches in iterator:
                data_batch = tf.nest.map_structure(
                    lambda v: strategy.experimental_local_results(v)[0]
                    if isinstance(v, tf.distribute.DistributedValues) else v, next(batches))
                break
            iterator = None
        return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)


class ClippedTrainStep(LocalBatchSymbolicBuild):
    """Mixin for Keras models: the standard compiled-loss `train_step`, with the original's gradient clipping
    (global norm 1.0) done across replicas by `clip_gradients_across_replicas`.

    It follows Keras 3's TensorFlow `train_step` (including its private loss bookkeeping, pinned by
    requirements.txt) so `compile(loss=..., metrics=...)` and `fit` behave as usual.
    """

    clip_norm = 1.0

    def train_step(self, data):
        from keras.src import tree  # pylint: disable=import-outside-toplevel
        from keras.src.losses import loss as loss_module  # pylint: disable=import-outside-toplevel
        from keras.src.trainers.data_adapters import data_adapter_utils  # pylint: disable=import-outside-toplevel

        x, y, sample_weight = data_adapter_utils.unpack_x_y_sample_weight(data)
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self._compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)
            batch = tf.shape(next(i for i in tree.flatten(x) if i is not None))[0]
            self._loss_tracker.update_state(loss_module.unscale_loss_for_distribution(loss), sample_weight=batch)
            scaled = self.optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, self.trainable_weights)
        grads = clip_gradients_across_replicas(grads, self.clip_norm, loss_scale_of(self.optimizer))
        self.optimizer.apply(grads, self.trainable_weights)
        return multi_worker_logs(self.compute_metrics(x, y, y_pred, sample_weight=sample_weight))


@dataclasses.dataclass(kw_only=True)
class RuntimeParams:
    """Where and how a run executes, common to every script's parameters: the distribution flags (the
    original's TPU flags and `--strategy`), precision, XLA, the seed and the logging interval."""

    strategy: str = "default"
    use_tpu: bool = False
    tpu_name: str = None
    tpu_zone: str = None
    gcp_project: str = None
    master: str = None
    mixed_precision: str = None
    jit_compile: bool = False
    seed: int = 12345
    log_every: int = 100
