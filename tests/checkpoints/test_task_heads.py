"""Which classifier head a conversion writes (albert_tf/checkpoints/task_heads.py `classifier_head`): from the
run's task.json, `--num_labels` and `--label_list`, each disagreement one line naming both sides; and a keras-hub
task preset refused. The conversions themselves: tests/checkpoints/test_run_files.py."""

import json

import pytest

from albert_tf.checkpoints import CheckpointMismatchError, task_heads
from albert_tf.errors import UsageError


def _run(tmp_path, record):
    if record is not None:
        (tmp_path / "task.json").write_text(json.dumps(record))
    return str(tmp_path / "ckpt-4")


def test_the_head_comes_from_task_json_or_the_flags(tmp_path):
    assert task_heads.classifier_head(_run(tmp_path, None)) == (None, None, False)
    assert task_heads.classifier_head(_run(tmp_path, None), num_labels=3) == (3, None, False)
    assert task_heads.classifier_head(_run(tmp_path, None), label_list=["x", "y"]) == (2, ["x", "y"], False)
    path = _run(tmp_path, {"task_name": "mrpc", "labels": [0, 1], "regression": False})
    assert task_heads.classifier_head(path) == (2, ["0", "1"], False)
    assert task_heads.classifier_head(path, num_labels=2, label_list=["0", "1"]) == (2, ["0", "1"], False)


def test_a_regression_head_has_one_output_and_no_names(tmp_path):
    path = _run(tmp_path, {"task_name": "sts-b", "labels": [None], "regression": True})
    assert task_heads.classifier_head(path) == (1, None, True)
    assert task_heads.classifier_head(path, num_labels=1) == (1, None, True)
    with pytest.raises(UsageError, match=r"^--num_labels=2, but .*task.json beside the input gives the classifier "
                                         r"1 label\(s\) \(\[None\]\)$"):
        task_heads.classifier_head(path, num_labels=2)


def test_a_record_without_labels_is_no_record(tmp_path):
    path = _run(tmp_path, {"task_name": "squad"})
    assert task_heads.classifier_head(path) == (None, None, False)
    assert task_heads.classifier_head(path, num_labels=4) == (4, None, False)


def test_each_disagreement_names_both_sides(tmp_path):
    path = _run(tmp_path, {"labels": ["neg", "pos"]})
    with pytest.raises(UsageError, match=r"^--label_list=pos,neg, but .*task.json beside the input names the "
                                         r"classifier's labels \['neg', 'pos'\]$"):
        task_heads.classifier_head(path, label_list=["pos", "neg"])
    with pytest.raises(UsageError, match=r"^--num_labels=3, but there are 2 label names \(\['neg', 'pos'\], from "
                                         r".*task.json\)$"):
        task_heads.classifier_head(path, num_labels=3)
    (tmp_path / "none").mkdir()
    with pytest.raises(UsageError, match=r"^--num_labels=3, but there are 2 label names \(\['a', 'b'\], from "
                                         r"--label_list\)$"):
        task_heads.classifier_head(_run(tmp_path / "none", None), num_labels=3, label_list=["a", "b"])


def test_a_keras_hub_task_preset_is_refused(tmp_path):
    task_heads.refuse_keras_hub_task(str(tmp_path))  # a folder without a task: fine
    (tmp_path / "task.json").write_text(json.dumps({"class_name": "AlbertTextClassifier"}))
    (tmp_path / "task.weights.h5").write_bytes(b"weights")
    with pytest.raises(CheckpointMismatchError, match=r"is a keras-hub AlbertTextClassifier preset; the converter "
                                                      r"reads a preset's backbone only"):
        task_heads.refuse_keras_hub_task(str(tmp_path))
