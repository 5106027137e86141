"""The runner's callbacks on their own (albert_tf/train/callbacks.py), with a stand-in model whose optimizer step
is set by the test: when a checkpoint is saved, what a failed save leaves, when training stops, what is logged and
summarised, and which checkpoints are evaluated."""

import errno
import os
import types

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import fileio
from albert_tf.train import callbacks


class _Manager:
    """A `tf.train.CheckpointManager` stand-in: `save` writes a checkpoint's files (or, with `fail`, part of them
    and TensorFlow's temporary folder, then raises as a full disk does)."""

    def __init__(self, directory, kept=(), fail=False):
        self.directory = str(directory)
        self.checkpoints = [os.path.join(self.directory, f"ckpt-{step}") for step in kept]
        self.fail = fail
        self.saved = []
        for prefix in self.checkpoints:
            for suffix in (".index", ".data-00000-of-00001"):
                with open(prefix + suffix, "w", encoding="utf-8") as f:
                    f.write("weights")

    @property
    def latest_checkpoint(self):
        return self.checkpoints[-1] if self.checkpoints else None

    def save(self, checkpoint_number):
        prefix = os.path.join(self.directory, f"ckpt-{checkpoint_number}")
        with open(prefix + ".data-00000-of-00001", "w", encoding="utf-8") as f:
            f.write("half")
        if self.fail:
            os.makedirs(prefix + "_temp", exist_ok=True)
            raise OSError(errno.ENOSPC, "No space left on device")
        with open(prefix + ".index", "w", encoding="utf-8") as f:
            f.write("index")
        self.saved.append(checkpoint_number)
        self.checkpoints.append(prefix)
        return prefix


def _at_step(callback, step):
    """Sets the stand-in model's step (a real `optimizer.iterations` variable) and returns the callback."""
    if callback.model is None:
        callback.set_model(types.SimpleNamespace(optimizer=types.SimpleNamespace(iterations=tf.Variable(0, tf.int64)),
                                                 stop_training=False))
    callback.model.optimizer.iterations.assign(step)
    return callback


def test_checkpoints_are_saved_every_n_steps_at_the_last_and_once_per_step(tmp_path, monkeypatch):
    lines = []
    monkeypatch.setattr(callbacks.logging, "info", lambda message, *args: lines.append(message % args))
    manager = _Manager(tmp_path)
    saver = callbacks.CheckpointCallback(manager, every=3, last_step=7)
    for step in range(1, 8):
        _at_step(saver, step).on_train_batch_end(0)
    _at_step(saver, 7).on_train_end()  # already saved at 7: not again
    assert manager.saved == [3, 6, 7]
    assert lines == [f"Saved checkpoint for step {s}: {tmp_path / f'ckpt-{s}'}" for s in (3, 6, 7)]
    _at_step(saver, 8).on_train_end()  # past the last step (a resumed run's): saved
    assert manager.saved == [3, 6, 7, 8]
    _at_step(saver, 8).on_train_batch_end(0)
    assert manager.saved == [3, 6, 7, 8]


@pytest.mark.parametrize("every", [0, -5])
def test_an_interval_below_one_saves_every_step(tmp_path, every):
    manager = _Manager(tmp_path)
    saver = callbacks.CheckpointCallback(manager, every=every, last_step=100)
    for step in (1, 2, 3):
        _at_step(saver, step).on_train_batch_end(0)
    assert manager.saved == [1, 2, 3]


def test_a_failed_save_removes_what_it_wrote_and_names_the_checkpoint_kept(tmp_path):
    manager = _Manager(tmp_path, kept=[2], fail=True)
    saver = _at_step(callbacks.CheckpointCallback(manager, every=2, last_step=10), 4)
    with pytest.raises(fileio.OutputError, match=rf"^cannot save checkpoint ckpt-4 in {tmp_path}: .*No space left "
                                                 r"on device.* \(ckpt-2 is kept\)$"):
        saver.on_train_batch_end(0)
    assert sorted(os.listdir(tmp_path)) == ["ckpt-2.data-00000-of-00001", "ckpt-2.index"]
    os.makedirs(tmp_path / "new")
    empty = _Manager(tmp_path / "new", fail=True)
    with pytest.raises(fileio.OutputError, match=r"No space left on device[^(]*$"):  # nothing kept to name
        _at_step(callbacks.CheckpointCallback(empty, every=1, last_step=10), 1).on_train_batch_end(0)
    assert os.listdir(tmp_path / "new") == []


def test_training_stops_at_the_last_global_step():
    stopper = callbacks.StopAtStep(5)
    _at_step(stopper, 4).on_train_batch_end(0)
    assert not stopper.model.stop_training
    _at_step(stopper, 5).on_train_batch_end(0)
    assert stopper.model.stop_training


def test_a_non_finite_loss_is_named_with_its_step():
    guard = _at_step(callbacks.StopOnNonFiniteLoss(), 12)
    guard.on_train_batch_end(0, {"loss": np.float32(2.5)})
    guard.on_train_batch_end(0, {})
    with pytest.raises(callbacks.NonFiniteLossError, match=r"^non-finite loss \(inf\) at step 12; stopped"):
        guard.on_train_batch_end(0, {"loss": np.float32("inf")})


def test_the_step_log_comes_every_n_steps_and_at_the_end(monkeypatch):
    lines = []
    monkeypatch.setattr(callbacks.logging, "info", lambda message, *args: lines.append(message % args))
    logger = callbacks.StepLogger(total_steps=7, every=3)
    for step in range(1, 8):
        _at_step(logger, step).on_train_batch_end(0, {"loss": 0.5, "accuracy": np.float32(0.25)})
    assert lines == [f"step {s}/7: accuracy=0.25, loss=0.5" for s in (3, 6, 7)]
    lines.clear()
    every_step = callbacks.StepLogger(total_steps=7, every=0)
    for step in (1, 2):
        _at_step(every_step, step).on_train_batch_end(0, {})
    assert lines == ["step 1/7: ", "step 2/7: "]
    lines.clear()
    default = callbacks.StepLogger(total_steps=1000)  # every 100 steps unless told
    for step in (99, 100, 101, 200):
        _at_step(default, step).on_train_batch_end(0, {})
    assert lines == ["step 100/1000: ", "step 200/1000: "]


def test_the_summaries_are_written_at_the_global_step(tmp_path, monkeypatch):
    closed = []
    create = tf.summary.create_file_writer

    def recording_writer(log_dir):
        writer = create(log_dir)
        close = writer.close
        writer.close = lambda: (closed.append(log_dir), close())
        return writer

    monkeypatch.setattr(tf.summary, "create_file_writer", recording_writer)
    summaries = callbacks.StepSummaries(str(tmp_path))
    summaries.on_train_begin()
    _at_step(summaries, 40).on_train_batch_end(0, {"loss": 1.5})
    summaries.on_train_end()
    assert summaries._writer is None and closed == [str(tmp_path)]  # pylint: disable=protected-access
    events = [os.path.join(tmp_path, n) for n in os.listdir(tmp_path)]
    values = [(event.step, value.tag, float(tf.make_ndarray(value.tensor)))
              for path in events for event in tf.compat.v1.train.summary_iterator(path)
              for value in event.summary.value]
    assert values == [(40, "loss", 1.5)]


def test_each_new_checkpoint_is_evaluated_once(tmp_path):
    manager = _Manager(tmp_path, kept=[2])
    calls = []
    evaluator = callbacks.EvaluateOnSave(manager, lambda prefix, step: calls.append((prefix, step)), evaluated={4})
    evaluator.on_train_batch_end(0)  # ckpt-2 was there before training: not evaluated
    manager.save(4)
    evaluator.on_train_batch_end(0)  # evaluated already (a resumed run's record)
    manager.save(6)
    evaluator.on_train_batch_end(0)
    assert calls == [(os.path.join(str(tmp_path), "ckpt-6"), 6)]
    evaluator.on_train_batch_end(0)
    manager.save(8)  # the last save of fit, seen at its end
    evaluator.on_train_end()
    assert calls == [(os.path.join(str(tmp_path), f"ckpt-{s}"), s) for s in (6, 8)]
    assert callbacks.checkpoint_step("gs://b/run/ckpt-120") == 120
