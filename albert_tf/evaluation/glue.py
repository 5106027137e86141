"""The metrics GLUE tasks are judged by, computed with numpy on whole evaluation sets: accuracy, F1 of the
positive class (label index 1), Matthews correlation coefficient, Pearson and Spearman correlation and MSE (for a
score). Which task reports which is its entry's in `albert_tf.task_table`.

The functions take label and prediction arrays (label indices for classification, scores for regression) and
return Python floats. Degenerate inputs follow scikit-learn's conventions where it has one: F1 and Matthews
correlation are 0.0 when undefined (no positive labels or predictions; a constant row or column of the
confusion matrix), and the correlations are NaN when either input is constant (as scipy's).

`task_metrics(task_name, labels, predictions)` gives a task's dict of results under the original's result names
(`eval_accuracy`, `matthew_corr`, `pearson`, plus `f1`, `spearman`, `MSE`), and `primary_metric(task_name)` the
one used to pick the best checkpoint (a name the table does not hold is a user's own task).
"""

import math

import numpy as np

from albert_tf import task_table


def _as_1d(values, name):
    array = np.asarray(values)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    return array


def _pair(labels, predictions):
    labels = _as_1d(labels, "labels")
    predictions = _as_1d(predictions, "predictions")
    if labels.shape != predictions.shape:
        raise ValueError(f"labels and predictions differ in length: {labels.shape[0]} vs {predictions.shape[0]}")
    if labels.size == 0:
        raise ValueError("cannot compute a metric on no examples")
    return labels, predictions


def accuracy(labels, predictions):
    """Fraction of predictions equal to the labels."""
    labels, predictions = _pair(labels, predictions)
    return float(np.mean(labels == predictions))


def f1_score(labels, predictions, positive=1):
    """F1 of class `positive`: 2 TP / (2 TP + FP + FN); 0.0 when there are no positives at all."""
    labels, predictions = _pair(labels, predictions)
    truth, guess = labels == positive, predictions == positive
    tp = float(np.sum(truth & guess))
    fp = float(np.sum(~truth & guess))
    fn = float(np.sum(truth & ~guess))
    denominator = 2 * tp + fp + fn
    return 2 * tp / denominator if denominator else 0.0


def matthews_corrcoef(labels, predictions):
    """Matthews correlation coefficient (the multi-class form, which is the usual one for two classes).

    MCC = (c s - sum_k p_k t_k) / sqrt((s^2 - sum_k p_k^2)(s^2 - sum_k t_k^2)), with s samples, c correct,
    t_k true and p_k predicted counts of class k; 0.0 when the denominator is 0.
    """
    labels, predictions = _pair(labels, predictions)
    classes, inverse = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    n = labels.shape[0]
    true_idx, pred_idx = inverse[:n], inverse[n:]
    k = classes.shape[0]
    t = np.bincount(true_idx, minlength=k).astype(np.float64)
    p = np.bincount(pred_idx, minlength=k).astype(np.float64)
    c = float(np.sum(true_idx == pred_idx))
    s = float(n)
    cov_ytyp = c * s - float(np.dot(t, p))
    cov_ypyp = s * s - float(np.dot(p, p))
    cov_ytyt = s * s - float(np.dot(t, t))
    if cov_ypyp * cov_ytyt == 0:
        return 0.0
    return float(cov_ytyp / math.sqrt(cov_ytyt * cov_ypyp))


def pearson(x, y):
    """Pearson correlation of two score arrays; NaN if either is constant."""
    x, y = _pair(x, y)
    x = x.astype(np.float64) - np.mean(x, dtype=np.float64)
    y = y.astype(np.float64) - np.mean(y, dtype=np.float64)
    norm = math.sqrt(float(np.dot(x, x)) * float(np.dot(y, y)))
    if norm == 0:
        return float("nan")
    return float(max(-1.0, min(1.0, float(np.dot(x, y)) / norm)))


def rankdata(values):
    """Ranks starting at 1, ties given the average of the ranks they span (scipy's "average" method)."""
    values = _as_1d(values, "values")
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    boundaries = np.concatenate([[True], sorted_values[1:] != sorted_values[:-1], [True]])
    starts = np.flatnonzero(boundaries)
    # Group g spans sorted positions [starts[g], starts[g + 1]); its average 1-based rank is the mean of the ends.
    average = (starts[:-1] + starts[1:] + 1) / 2.0
    group = np.cumsum(boundaries[:-1]) - 1
    ranks = np.empty(values.shape[0], np.float64)
    ranks[order] = average[group]
    return ranks


def spearman(x, y):
    """Spearman rank correlation (Pearson of the average ranks); NaN if either is constant."""
    x, y = _pair(x, y)
    return pearson(rankdata(x), rankdata(y))


def mean_squared_error(labels, predictions):
    labels, predictions = _pair(labels, predictions)
    return float(np.mean((labels.astype(np.float64) - predictions.astype(np.float64)) ** 2))


# The functions behind the result names a task of `task_table` reports.
_METRICS = {"eval_accuracy": accuracy, "f1": f1_score, "matthew_corr": matthews_corrcoef, "pearson": pearson,
            "spearman": spearman, "MSE": mean_squared_error}


def _scoring(task_name, regression, two_class=False):
    return task_table.classifier_task(task_name).scoring_for(regression, two_class)


def primary_metric(task_name, regression=False):
    """The result name that picks the best checkpoint for `task_name` (`pearson` for any regression task)."""
    return _scoring(task_name, regression).primary


def task_metrics(task_name, labels, predictions, regression=False, num_labels=None):
    """The results reported for a task: a dict of floats.

    Args:
      task_name: a task of `task_table` (any case) or a user's task name.
      labels: label indices (classification) or gold scores (regression), shape [N].
      predictions: predicted label indices or scores, shape [N].
      regression: whether the task is a regression task (implied for sts-b).
      num_labels: number of classes of a user's task (two-class tasks also get `f1` and `matthew_corr`); when
        None, a task whose labels and predictions are all 0 or 1 counts as two-class.
    Returns:
      the task's results (`task_table`): classification: `eval_accuracy`, plus `f1` (MRPC, QQP, and any two-class
      user task) and `matthew_corr` (CoLA, and any two-class user task); regression: `pearson`, `spearman`, `MSE`.
    """
    labels, predictions = _pair(labels, predictions)
    if num_labels is not None:
        two_class = num_labels == 2
    else:
        two_class = np.max(np.concatenate([labels, predictions])) <= 1
    names = _scoring(task_name, regression, bool(two_class)).metrics
    return {name: _METRICS[name](labels, predictions) for name in names}


def probabilities_from_logits(logits, regression):
    """Softmax probabilities [N, C] (regression: the scores [N, 1], as the original's `probabilities`)."""
    logits = np.asarray(logits, np.float64)
    if regression:
        return logits
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def predictions_from_logits(logits, regression):
    """Predicted label indices [N] (regression: scores [N])."""
    logits = np.asarray(logits)
    return logits[:, 0] if regression else np.argmax(logits, axis=-1)


def eval_loss(logits, labels, regression):
    """The original's `eval_loss`: mean cross-entropy, or mean squared error."""
    logits = np.asarray(logits, np.float64)
    if regression:
        return float(np.mean((logits[:, 0] - np.asarray(labels, np.float64)) ** 2))
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return float(-np.mean(log_probs[np.arange(logits.shape[0]), np.asarray(labels, np.int64)]))


def evaluation_results(task_name, logits, labels, regression, num_labels=None):
    """The task's metrics (`task_metrics`) plus `eval_loss`, as floats."""
    predictions = predictions_from_logits(logits, regression)
    results = task_metrics(task_name, labels, predictions, regression=regression, num_labels=num_labels)
    results["eval_loss"] = eval_loss(logits, labels, regression)
    return results
