"""Recognising a fine-tuned classifier that predicts one label for every dev example (a collapsed run): its dev
accuracy is that label's share of the dev set, and its F1 (of the last label) is 2p/(1+p), or 0 for another label.
`bench_pretrain_finetune.py` leaves such runs out when it chooses a learning rate: on a skewed dev set (MRPC: 68 %
one label) a collapsed run can score above every model that learned something."""

import os

def dev_label_shares(glue_dir, task):
    """{label: its share of the dev examples of GLUE `task` under `glue_dir`}."""
    from albert_tf.data import glue  # pylint: disable=import-outside-toplevel

    processor = glue.get_processor(task)
    labels = [e.label for e in processor.get_dev_examples(os.path.join(glue_dir, processor.task.directory))]
    return {label: labels.count(label) / len(labels) for label in sorted(set(labels))}


def predicts_one_class(result, shares, accuracy_key="eval_accuracy"):
    """Whether the dev `result` (a dict of metrics) is what always predicting one label of `shares` scores: the
    accuracy equals that label's share and, where an "f1" is reported, so does the F1."""
    last = max(shares)
    for label, share in shares.items():
        if abs(result[accuracy_key] - share) < 1e-6:
            f1 = 2 * share / (1 + share) if label == last else 0.0
            if "f1" not in result or abs(result["f1"] - f1) < 1e-6:
                return True
    return False
