"""GLUE metrics: hand-checked values, scipy's correlations, and the real dev sets' labels when ../shared exists."""

import math
import os

import numpy as np
import pytest

from albert_tf.evaluation import glue as metrics
from albert_tf.train.best_checkpoint import is_better
from tests.helpers import REPO as REPO_ROOT

SHARED_GLUE = os.path.join(os.path.dirname(REPO_ROOT), "shared", "data", "glue")
needs_shared = pytest.mark.skipif(not os.path.isdir(SHARED_GLUE),
                                  reason="the official GLUE files (../shared/data/glue) are not here (CI clone)")


def _scipy_stats():
    return pytest.importorskip("scipy.stats", reason="scipy is not installed (requirements-test.txt)")


# ------------------------------------------------------------------------------------------- hand-checked
def test_accuracy_by_hand():
    assert metrics.accuracy([0, 1, 1, 0], [0, 1, 0, 0]) == 0.75
    assert metrics.accuracy(np.array([[2], [1]]), np.array([2, 1])) == 1.0  # [N, 1] columns are accepted


def test_f1_by_hand():
    # TP = 2 (positions 0, 4), FP = 1 (position 2), FN = 1 (position 1): F1 = 2*2 / (2*2 + 1 + 1) = 2/3.
    assert metrics.f1_score([1, 1, 0, 0, 1], [1, 0, 1, 0, 1]) == pytest.approx(2 / 3, abs=1e-12)
    assert metrics.f1_score([0, 0, 0], [0, 0, 0]) == 0.0  # no positives anywhere: 0, as scikit-learn
    assert metrics.f1_score([1, 1], [0, 0]) == 0.0


def test_matthews_by_hand():
    # TP = 2, TN = 2, FP = 1, FN = 1: (2*2 - 1*1) / sqrt(3*3*3*3) = 1/3.
    assert metrics.matthews_corrcoef([1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 1]) == pytest.approx(1 / 3, abs=1e-12)
    assert metrics.matthews_corrcoef([1, 0, 1, 0], [1, 0, 1, 0]) == pytest.approx(1.0)
    assert metrics.matthews_corrcoef([1, 0, 1, 0], [0, 1, 0, 1]) == pytest.approx(-1.0)
    assert metrics.matthews_corrcoef([1, 0, 1, 0], [1, 1, 1, 1]) == 0.0  # constant predictions: 0


def test_pearson_and_spearman_by_hand():
    # x = [1, 2, 3], y = [1, 2, 5]: deviations [-1, 0, 1] and [-5/3, -2/3, 7/3]; r = 4 / sqrt(2 * 78/9).
    assert metrics.pearson([1, 2, 3], [1, 2, 5]) == pytest.approx(4 / math.sqrt(2 * 78 / 9), abs=1e-12)
    # Ties take average ranks: x ranks [1, 2.5, 2.5, 4], y ranks [1, 3, 2, 4]; r = 4.5 / sqrt(4.5 * 5).
    assert metrics.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5), abs=1e-12)
    np.testing.assert_array_equal(metrics.rankdata([10, 20, 10, 30]), [1.5, 3, 1.5, 4])
    assert math.isnan(metrics.pearson([1, 1, 1], [1, 2, 3]))  # constant input: NaN, as scipy
    assert metrics.mean_squared_error([1.0, 2.0], [2.0, 4.0]) == 2.5


def test_bad_inputs():
    with pytest.raises(ValueError, match="differ in length"):
        metrics.accuracy([0, 1], [0])
    with pytest.raises(ValueError, match="no examples"):
        metrics.accuracy([], [])
    with pytest.raises(ValueError, match="one-dimensional"):
        metrics.accuracy(np.zeros((2, 2)), np.zeros((2, 2)))


# ------------------------------------------------------------------------------------------------ scipy
def test_correlations_equal_scipy():
    stats = _scipy_stats()
    rng = np.random.RandomState(0)
    for trial in range(5):
        x = rng.randint(0, 6, size=200).astype(np.float64)  # many ties
        y = x + rng.normal(scale=1.0 + trial, size=200)
        assert metrics.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
        assert metrics.spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)
        np.testing.assert_allclose(metrics.rankdata(x), stats.rankdata(x))


def _matthews_binary(labels, predictions):
    """The original run_classifier's form: (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN))."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    tp = float(np.sum((labels == 1) & (predictions == 1)))
    tn = float(np.sum((labels == 0) & (predictions == 0)))
    fp = float(np.sum((labels == 0) & (predictions == 1)))
    fn = float(np.sum((labels == 1) & (predictions == 0)))
    denominator = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return (tp * tn - fp * fn) / denominator if denominator else 0.0


def test_matthews_multiclass_equals_binary_form_on_two_classes():
    rng = np.random.RandomState(1)
    for _ in range(5):
        labels = rng.randint(0, 2, size=300)
        predictions = np.where(rng.rand(300) < 0.7, labels, 1 - labels)
        assert metrics.matthews_corrcoef(labels, predictions) == pytest.approx(
            _matthews_binary(labels, predictions), abs=1e-12)


# --------------------------------------------------------------------------------------- per-task results
def test_task_metrics_names_and_primary_metric():
    labels, predictions = [0, 1, 1, 0], [0, 1, 0, 0]
    assert set(metrics.task_metrics("SST-2", labels, predictions)) == {"eval_accuracy"}
    assert set(metrics.task_metrics("mrpc", labels, predictions)) == {"eval_accuracy", "f1"}
    assert set(metrics.task_metrics("qqp", labels, predictions)) == {"eval_accuracy", "f1"}
    assert set(metrics.task_metrics("cola", labels, predictions)) == {"eval_accuracy", "matthew_corr"}
    assert set(metrics.task_metrics("sts-b", [1.0, 2.0, 3.0], [1.0, 2.5, 2.9])) == {"pearson", "spearman", "MSE"}
    assert set(metrics.task_metrics("mine", labels, predictions, num_labels=2)) == {"eval_accuracy", "f1",
                                                                                    "matthew_corr"}
    assert set(metrics.task_metrics("mine", [0, 2], [0, 1], num_labels=3)) == {"eval_accuracy"}
    assert [metrics.primary_metric(t) for t in ("cola", "sts-b", "mrpc", "qqp", "rte", "mnli")] == [
        "matthew_corr", "pearson", "f1", "f1", "eval_accuracy", "eval_accuracy"]
    assert metrics.primary_metric("mine", regression=True) == "pearson"


def test_is_better_never_picks_nan():
    assert is_better(0.5, None)
    assert not is_better(float("nan"), None)
    assert is_better(0.1, float("nan"))
    assert not is_better(0.5, 0.5)
    assert is_better(0.6, 0.5)


# ------------------------------------------------------------------------------------ real GLUE dev sets
@needs_shared
def test_metrics_on_real_dev_labels():
    """The official CoLA, MRPC and STS-B dev labels, scored against deterministic imperfect predictions."""
    stats = _scipy_stats()
    from albert_tf.data import glue  # pylint: disable=import-outside-toplevel

    rng = np.random.RandomState(2)
    cola = glue.get_processor("cola")
    labels = np.array([cola.label_index(e.label) for e in cola.get_dev_examples(SHARED_GLUE)])
    assert labels.shape == (1043,)
    predictions = np.where(rng.rand(labels.size) < 0.8, labels, 1 - labels)
    assert metrics.matthews_corrcoef(labels, predictions) == pytest.approx(_matthews_binary(labels, predictions),
                                                                           abs=1e-12)

    mrpc = glue.get_processor("mrpc")
    labels = np.array([mrpc.label_index(e.label) for e in mrpc.get_dev_examples(SHARED_GLUE)])
    predictions = np.where(rng.rand(labels.size) < 0.75, labels, 1 - labels)
    tp = np.sum((labels == 1) & (predictions == 1))
    precision, recall = tp / np.sum(predictions == 1), tp / np.sum(labels == 1)
    assert metrics.f1_score(labels, predictions) == pytest.approx(2 * precision * recall / (precision + recall),
                                                                  abs=1e-12)

    stsb = glue.get_processor("sts-b")
    scores = np.array([e.label for e in stsb.get_dev_examples(SHARED_GLUE)])
    assert scores.shape == (1500,)
    predicted = np.clip(scores + rng.normal(scale=1.0, size=scores.size), 0, 5).round(1)  # ties
    results = metrics.task_metrics("sts-b", scores, predicted)
    assert results["pearson"] == pytest.approx(stats.pearsonr(scores, predicted)[0], abs=1e-12)
    assert results["spearman"] == pytest.approx(stats.spearmanr(scores, predicted)[0], abs=1e-12)
