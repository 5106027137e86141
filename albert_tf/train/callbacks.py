"""Callbacks of the training loop: checkpoints at exact steps, stopping at the last step or on a non-finite
loss, progress lines, TensorBoard scalars against the global step, and evaluation of each saved checkpoint.

Every callback counts steps by the optimizer's `iterations` (the global step, across restarts), not by Keras'
per-epoch batch index.
"""

import logging
import math
import os

import keras
import numpy as np
import tensorflow as tf

from albert_tf import fileio
from albert_tf.errors import RunError


class NonFiniteLossError(RunError, FloatingPointError):
    """Training produced a NaN or infinite loss; the message names the step."""


def global_step(model):
    return int(model.optimizer.iterations.numpy())


class CheckpointCallback(keras.callbacks.Callback):
    """Saves through `manager` every `every` steps and at `last_step`; step = the optimizer's iterations."""

    def __init__(self, manager, every, last_step):
        super().__init__()
        self.manager = manager
        self.every = max(int(every), 1)
        self.last_step = last_step
        self._saved_at = None

    def _maybe_save(self):
        step = global_step(self.model)
        if step == self._saved_at:
            return
        if step % self.every == 0 or step >= self.last_step:
            path = self._save(step)
            self._saved_at = step
            logging.info("Saved checkpoint for step %d: %s", step, path)

    def _save(self, step):
        """`manager.save`; a failed save (a full disk) removes what it wrote and names the directory, leaving the
        earlier checkpoints as they were."""
        try:
            return self.manager.save(checkpoint_number=step)
        except (tf.errors.OpError, OSError) as err:
            directory = self.manager.directory
            fileio.remove_stale_checkpoint_temps(directory)
            for path in tf.io.gfile.glob(os.path.join(directory, f"ckpt-{step}.*")):
                if not any(path.startswith(kept + ".") for kept in self.manager.checkpoints):
                    tf.io.gfile.remove(path)
            kept = self.manager.latest_checkpoint
            raise fileio.OutputError(
                f"cannot save checkpoint ckpt-{step} in {directory}: {fileio.describe(err)}"
                + (f" ({os.path.basename(kept)} is kept)" if kept else "")) from None

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
        if global_step(self.model) >= self.last_step:
            self.model.stop_training = True


class StopOnNonFiniteLoss(keras.callbacks.Callback):
    """Raises `NonFiniteLossError` naming the step when the loss is NaN or infinite.

    It runs before the checkpoint callback in the callback list, so the bad state is never saved and the
    last good checkpoint stays the latest.
    """

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(np.asarray(loss))):
            step = global_step(self.model)
            raise NonFiniteLossError(f"non-finite loss ({float(np.asarray(loss))}) at step {step}; stopped "
                                     "without saving, the last good checkpoint is kept")


class StepLogger(keras.callbacks.Callback):
    """Logs `step N/total` with the metrics every `every` steps (Keras' bar counts per epoch only)."""

    def __init__(self, total_steps, every=100):
        super().__init__()
        self.total_steps = total_steps
        self.every = max(int(every), 1)

    def on_train_batch_end(self, batch, logs=None):
        step = global_step(self.model)
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
        step = global_step(self.model)
        with self._writer.as_default():
            for name, value in (logs or {}).items():
                tf.summary.scalar(name, float(np.asarray(value)), step=step)

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class EvaluateOnSave(keras.callbacks.Callback):
    """Evaluates each checkpoint right after it is saved (the weights in memory are the saved ones), so
    checkpoints that `keep_checkpoint_max` later deletes are evaluated too. `evaluate(prefix, step)` does the
    work (the runner's `CheckpointEvaluator.evaluate_checkpoint`)."""

    def __init__(self, manager, evaluate, evaluated):
        super().__init__()
        self.manager = manager
        self.evaluate = evaluate
        self.evaluated = evaluated
        self._last = manager.latest_checkpoint

    def _check(self):
        latest = self.manager.latest_checkpoint
        if latest and latest != self._last:
            self._last = latest
            step = checkpoint_step(latest)
            if step not in self.evaluated:
                self.evaluate(latest, step)

    def on_train_batch_end(self, batch, logs=None):
        self._check()

    def on_train_end(self, logs=None):
        self._check()


def checkpoint_step(prefix):
    """The step of a checkpoint prefix `.../ckpt-<step>`."""
    return int(str(prefix).rsplit("-", 1)[-1])
