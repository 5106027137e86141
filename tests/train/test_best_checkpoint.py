"""Evaluating checkpoints and keeping the best (albert_tf/train/best_checkpoint.py) on its own: each checkpoint's
weights restored before it is scored, the records written (history, the original's `eval_results.txt`, the best
copied with its state file), read back by a restarted run of the same metric only, and nothing written by a
worker that does not write."""

import json
import logging
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.errors import UsageError
from albert_tf.train import best_checkpoint

SCORES = {1: 0.5, 2: 0.75, 3: 0.625}


def _model():
    return keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False)])


def _checkpoints(tmp_path):
    """ckpt-<step> for each step of SCORES, the kernel holding the step: a restored checkpoint says which it is."""
    model = _model()
    prefixes = {}
    for step in SCORES:
        model.layers[0].kernel.assign([[float(step)]])
        prefixes[step] = tf.train.Checkpoint(model=model).write(str(tmp_path / "run" / f"ckpt-{step}"))
    return prefixes


def _evaluator(tmp_path, model, metric="accuracy", write=True):
    def evaluate(step):
        restored = int(model.layers[0].kernel.numpy()[0, 0])
        assert restored == step  # the checkpoint's own weights are the ones scored
        return {"accuracy": SCORES[step], "loss": 1.0 - SCORES[step]}

    return best_checkpoint.CheckpointEvaluator(model, evaluate, metric, str(tmp_path / "run"), write=write)


def test_the_best_checkpoint_is_copied_and_every_result_recorded(tmp_path, caplog):
    prefixes = _checkpoints(tmp_path)
    evaluator = _evaluator(tmp_path, _model())
    with caplog.at_level(logging.INFO):
        for step, prefix in prefixes.items():
            results = evaluator.evaluate_checkpoint(prefix, step)
            assert results == {"accuracy": SCORES[step], "loss": 1.0 - SCORES[step], "global_step": step}
    logged = [r.getMessage() for r in caplog.records]
    assert "Eval results at step 3: accuracy=0.625, global_step=3, loss=0.375" in logged
    assert [line for line in logged if line.startswith("New best")] == ["New best accuracy = 0.5 at step 1",
                                                                       "New best accuracy = 0.75 at step 2"]
    run = tmp_path / "run"
    best = json.loads((run / "best_checkpoint.json").read_text())
    assert best == {"step": 2, "metric": "accuracy", "value": 0.75, "checkpoint": os.path.join("best_checkpoint",
                                                                                             "ckpt-2"),
                    "results": {"accuracy": 0.75, "loss": 0.25, "global_step": 2}}
    copied = sorted(n for n in os.listdir(run / "best_checkpoint") if not n.startswith("."))  # .albert_tf: manifest
    assert copied == ["checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index"]
    prefix = best_checkpoint.best_checkpoint_prefix(str(run))
    assert prefix == str(run / "best_checkpoint" / "ckpt-2")
    restored = _model()
    tf.train.Checkpoint(model=restored).read(prefix).expect_partial()
    assert restored.layers[0].kernel.numpy()[0, 0] == 2.0
    history = json.loads((run / "eval_history.json").read_text())
    assert history["metric"] == "accuracy" and sorted(history["results"]) == ["1", "2", "3"]
    assert (run / "eval_results.txt").read_text() == "".join(
        f"accuracy = {SCORES[s]!r}\nglobal_step = {s}\nloss = {1.0 - SCORES[s]!r}\n{'=' * 50}\n" for s in (1, 2, 3)
    ) + "best_step = 2\nbest_accuracy = 0.75\n"


def test_a_restarted_run_keeps_its_record_for_the_same_metric_only(tmp_path):
    prefixes = _checkpoints(tmp_path)
    model = _model()
    first = _evaluator(tmp_path, model)
    first.evaluate_checkpoint(prefixes[2], 2)
    again = _evaluator(tmp_path, model)
    assert sorted(again.history) == [2] and again.best["step"] == 2
    again.evaluate_checkpoint(prefixes[3], 3)  # 0.625 does not beat the recorded 0.75
    assert json.loads((tmp_path / "run" / "best_checkpoint.json").read_text())["step"] == 2
    other = _evaluator(tmp_path, model, metric="loss")
    assert other.history == {} and other.best is None


def test_weights_already_loaded_are_scored_as_they_are_and_a_missing_metric_is_named(tmp_path):
    prefixes = _checkpoints(tmp_path)
    model = _model()
    model.layers[0].kernel.assign([[3.0]])
    evaluator = _evaluator(tmp_path, model)
    evaluator.evaluate_checkpoint(prefixes[3], 3, weights_loaded=True)
    with pytest.raises(UsageError, match=r"^metric 'f1' is not among the results \(accuracy, global_step, loss\)$"):
        _evaluator(tmp_path, model, metric="f1").evaluate_weights(3)


def test_a_worker_that_does_not_write_leaves_the_folder_as_it_was(tmp_path):
    prefixes = _checkpoints(tmp_path)
    before = sorted(os.listdir(tmp_path / "run"))
    evaluator = _evaluator(tmp_path, _model(), write=False)
    for step, prefix in prefixes.items():
        evaluator.evaluate_checkpoint(prefix, step)
    assert evaluator.best["step"] == 2
    assert sorted(os.listdir(tmp_path / "run")) == before


def test_values_are_written_as_python_writes_them_and_nothing_beats_nan():
    assert best_checkpoint.format_value(0.1) == "0.1" and best_checkpoint.format_value(np.int64(3)) == "3"
    assert best_checkpoint.format_value(1 / 3) == repr(1 / 3)
    assert not best_checkpoint.is_better(None, 0.5)
    assert best_checkpoint.is_better(0.1, None) and not best_checkpoint.is_better(0.4, 0.5)


def test_a_tie_keeps_the_first_best_and_the_evaluator_writes_by_default(tmp_path):
    assert best_checkpoint.is_better(0.5, 0.5) is False and best_checkpoint.is_better(float("nan"), None) is False
    assert best_checkpoint.is_better(0.5, float("nan")) is True
    prefixes = _checkpoints(tmp_path)
    model = _model()
    evaluator = best_checkpoint.CheckpointEvaluator(model, lambda step: {"accuracy": 0.5}, "accuracy",
                                                    str(tmp_path / "run"))
    for step, prefix in prefixes.items():
        evaluator.evaluate_checkpoint(prefix, step)
    assert json.loads((tmp_path / "run" / "best_checkpoint.json").read_text())["step"] == 1


def test_copying_a_checkpoint_replaces_the_previous_best_and_returns_its_prefix(tmp_path):
    prefixes = _checkpoints(tmp_path)
    out = str(tmp_path / "out")
    for step in (1, 3):
        assert best_checkpoint.copy_checkpoint(prefixes[step], out, step) == os.path.join(out, "best_checkpoint",
                                                                                          f"ckpt-{step}")
    assert sorted(n for n in os.listdir(os.path.join(out, "best_checkpoint")) if not n.startswith(".")) == \
        ["checkpoint", "ckpt-3.data-00000-of-00001", "ckpt-3.index"]
    assert tf.train.latest_checkpoint(os.path.join(out, "best_checkpoint")).endswith("ckpt-3")


def test_no_best_checkpoint_folder_means_none(tmp_path):
    assert best_checkpoint.best_checkpoint_prefix(str(tmp_path)) is None
