"""Which heads a conversion carries over (albert_tf/checkpoints/task_heads.py): the classifier head from the run's
task.json, `--num_labels` and `--label_list`, each disagreement one line naming both sides; the model each input is
read into (pretraining, SQuAD v1.1, classifier); a task head never dropped; a keras-hub task preset refused. The
conversions themselves: tests/checkpoints/test_run_files.py."""

import json

import pytest

from albert_tf.checkpoints import CheckpointMismatchError, save_checkpoint, task_heads
from albert_tf.checkpoints.name_table import pretraining_head_entries
from albert_tf.checkpoints.original import read_tf1, write_tf1
from albert_tf.errors import UsageError
from albert_tf.model import AlbertClassifier, AlbertForPretraining, AlbertForSquad, AlbertModel, dummy_inputs
from tests.helpers import tiny_config


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


# Which model an input is read into, and the heads never dropped.

def _saved(tmp_path, model, name, fmt="original", record=None):
    folder = tmp_path / name
    folder.mkdir()
    if record is not None:
        (folder / "task.json").write_text(json.dumps(record))
    return save_checkpoint(model, str(folder / "ckpt-1"), fmt)


def _built(model, **inputs):
    model(dummy_inputs(**inputs), training=False)
    return model


def test_each_input_is_read_into_the_model_of_its_heads(tmp_path):
    config = tiny_config()
    pretrained = _saved(tmp_path, _built(AlbertForPretraining(config), num_predictions=1), "pre")
    model, result = task_heads.load_model(config, pretrained, None, False)
    assert type(model) is AlbertForPretraining and not result.missing
    task_heads.refuse_dropped_head(pretrained, model, result)  # nothing to drop
    squad = _saved(tmp_path, _built(AlbertForSquad(config), seq_length=4), "squad")
    model, result = task_heads.load_model(config, squad, None, False)
    assert type(model) is AlbertForSquad and not result.missing
    encoder = _saved(tmp_path, _built(AlbertModel(config)), "encoder")
    model, result = task_heads.load_model(config, encoder, None, False)  # no head at all: pretraining, heads missing
    assert type(model) is AlbertForPretraining and any(n.startswith("cls/predictions/") for n in result.missing)
    heads = {id(e.variable) for e in pretraining_head_entries(model)}
    assert task_heads.missing_variable_ids(model, result) == heads and heads
    classifier = _saved(tmp_path, _built(AlbertClassifier(config, 3)), "cls")
    model, result = task_heads.load_model(config, classifier, 3, False)
    assert type(model) is AlbertClassifier and model.num_labels == 3 and not result.missing
    model, result = task_heads.load_model(config, classifier, None, False)
    with pytest.raises(UsageError, match=r"^the input .*ckpt-1 holds a classifier head \(output_bias, "
                                         r"output_weights\) and no .*task.json gives its labels; pass --num_labels"):
        task_heads.refuse_dropped_head(classifier, model, result)
    squad_v2 = _saved(tmp_path, _built(AlbertForSquad(config, version_2=True), seq_length=4), "squad2")
    model, result = task_heads.load_model(config, squad_v2, None, False)
    assert type(model) is AlbertForPretraining
    with pytest.raises(CheckpointMismatchError, match=r"^the input .*ckpt-1 holds a task head \(answer_class/dense_0/"
                                                      r"bias, answer_class/dense_0/kernel, \.\.\.\) that the "
                                                      r"converter cannot write; it would be dropped"):
        task_heads.refuse_dropped_head(squad_v2, model, result)


def test_an_input_with_half_a_squad_head_stays_a_pretraining_read(tmp_path):
    config = tiny_config()
    arrays = read_tf1(_saved(tmp_path, _built(AlbertForSquad(config), seq_length=4), "squad"))
    del arrays["cls/squad/output_bias"]
    (tmp_path / "partial").mkdir()
    partial = write_tf1(arrays, str(tmp_path / "partial" / "ckpt-1"))
    model, result = task_heads.load_model(config, partial, None, False)
    assert type(model) is AlbertForPretraining and "cls/squad/output_weights" in result.unused
    with pytest.raises(CheckpointMismatchError, match=r"holds a task head \(cls/squad/output_weights\)"):
        task_heads.refuse_dropped_head(partial, model, result)


def test_a_native_squad_checkpoint_is_told_by_its_task_json(tmp_path):
    config = tiny_config()
    squad = _built(AlbertForSquad(config), seq_length=4)
    v1 = _saved(tmp_path, squad, "v1", "native", {"task_name": "squad", "version_2_with_negative": False})
    assert type(task_heads.load_model(config, v1, None, False)[0]) is AlbertForSquad
    v2 = _saved(tmp_path, squad, "v2", "native", {"task_name": "squad", "version_2_with_negative": True})
    assert type(task_heads.load_model(config, v2, None, False)[0]) is AlbertForPretraining
    unnamed = _saved(tmp_path, squad, "unnamed", "native")
    model, result = task_heads.load_model(config, unnamed, None, False)
    assert type(model) is AlbertForPretraining
    heads = {id(e.variable) for e in pretraining_head_entries(model)}
    assert task_heads.missing_variable_ids(model, result) == heads and heads  # found by the native keys
