"""RACE accuracy (overall and per level, as the original's `eval_accuracy` / `eval_loss`) and the prediction
records written per question."""

import numpy as np

from albert_tf import task_table

LABELS = task_table.get("race").labels
LEVELS = ("middle", "high")
NO_LABEL = -1


def softmax(logits):
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def accuracy_by_level(examples, logits):
    """The original's `eval_accuracy` / `eval_loss` (over labelled questions) and accuracy per level.

    Returns:
      dict with `accuracy`, `eval_accuracy` (the same, the original's name), `eval_loss` (mean cross-entropy),
      `num_examples`, and `accuracy_<level>` / `num_examples_<level>` for each level present.
    """
    probabilities = softmax(logits)
    labels = np.array([NO_LABEL if e.label is None else e.label for e in examples])
    levels = np.array([e.level for e in examples])
    labelled = labels >= 0
    if not labelled.any():
        return {}
    correct = probabilities.argmax(-1) == labels
    losses = -np.log(np.maximum(probabilities[labelled, labels[labelled]], 1e-300))
    results = {"accuracy": float(correct[labelled].mean()), "eval_loss": float(losses.mean()),
               "num_examples": int(labelled.sum())}
    results["eval_accuracy"] = results["accuracy"]
    for level in LEVELS:
        mask = labelled & (levels == level)
        if mask.any():
            results[f"accuracy_{level}"] = float(correct[mask].mean())
            results[f"num_examples_{level}"] = int(mask.sum())
    return results


def predictions(examples, logits):
    """{question_id: {"answer": letter, "probabilities": [p_A, ..., p_D], "level": ..., "label": letter?}}."""
    probabilities = softmax(logits)
    out = {}
    for example, probs in zip(examples, probabilities):
        entry = {"answer": LABELS[int(probs.argmax())], "probabilities": [float(p) for p in probs],
                 "level": example.level}
        if example.label is not None:
            entry["label"] = LABELS[example.label]
        out[example.question_id] = entry
    return out
