"""A fine-tuning run's files found from its checkpoints (`checkpoints.run_files`), and the converter on a real
tiny run's `best_checkpoint/`: the classifier head is written in every output format (transformers' and
keras-hub's classifiers give the run's logits), and an input whose head the output would not hold is refused in
one line, never converted without it."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints import (CheckpointMismatchError, LoadResult, conversion, load_checkpoint, run_files,
                                  save_checkpoint)
from albert_tf.errors import MissingDataError, UsageError
from albert_tf.model import AlbertForSquad, dummy_inputs
from albert_tf.scripts import convert
from albert_tf.tasks.classification import ClassifierParams, build_classifier, run_classifier
from albert_tf.train import best_checkpoint
from tests.helpers import REPO, SAMPLE_GLUE, SPM, assert_one_line_error, padded_batch, subprocess_env, tiny_config


@pytest.fixture(scope="module")
def fine_tuned(tmp_path_factory):
    """A real run_classifier run (SST-2 sample, 2 steps): (its output folder, a batch, the logits of its best
    checkpoint on that batch)."""
    run = tmp_path_factory.mktemp("fine_tuned") / "run"
    run_classifier(ClassifierParams(
        albert_config=tiny_config(), output_dir=str(run), task_name="sst-2", data_dir=SAMPLE_GLUE,
        spm_model_file=SPM, max_seq_length=32, train_batch_size=8, eval_batch_size=50, learning_rate=1e-3,
        train_step=2, save_checkpoints_steps=2, iterations_per_loop=2, keep_checkpoint_max=1, log_every=0,
        do_train=True, do_eval=True))
    classifier = build_classifier(tiny_config(), 2)
    load_checkpoint(classifier, str(run / "best_checkpoint"))
    batch = padded_batch(seed=8)
    ids, mask, segments = batch
    logits = np.asarray(classifier({"input_ids": ids, "input_mask": mask, "segment_ids": segments},
                                   training=False))
    return run, batch, logits


@pytest.mark.slow
def test_the_run_s_files_are_found_from_its_folder_checkpoints_and_best_checkpoint(fine_tuned, tmp_path):
    run = fine_tuned[0]
    step = json.loads((run / best_checkpoint.BEST_JSON).read_text())["step"]
    for path in (run, run / f"ckpt-{step}", run / "best_checkpoint", run / "best_checkpoint" / f"ckpt-{step}"):
        assert run_files.config_file(str(path)) == str(run / "albert_config.json"), path
        found, record = run_files.task_record(str(path))
        assert found == str(run / "task.json") and record["labels"] == ["0", "1"], path
    # Only a run's best_checkpoint/ (best_checkpoint.json beside it) looks one folder up.
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    os.remove(copy / best_checkpoint.BEST_JSON)
    assert run_files.run_folders(str(copy / "best_checkpoint")) == [str(copy / "best_checkpoint")]
    assert run_files.task_record(str(copy / "best_checkpoint")) == (str(copy / "best_checkpoint" / "task.json"),
                                                                    None)
    assert run_files.config_file(str(copy / "best_checkpoint")) is None
    (copy / "task.json").write_text("{not json")
    (copy / best_checkpoint.BEST_JSON).write_text("{}")
    with pytest.raises(MissingDataError, match="cannot read .*copy/task.json"):
        run_files.task_record(str(copy / "best_checkpoint"))


def test_a_folder_named_best_checkpoint_outside_a_run_is_not_a_runs(tmp_path):
    """Only a `best_checkpoint/` with `best_checkpoint.json` beside it sends the look-up to the folder above; a
    checkpoint with no task.json is told where one would be."""
    folder = tmp_path / "copies" / run_files.BEST_DIR
    folder.mkdir(parents=True)
    (tmp_path / "copies" / run_files.TASK_JSON).write_text('{"labels": ["a", "b"]}')
    assert run_files.run_folders(str(folder / "ckpt-2")) == [str(folder)]
    assert run_files.task_record(str(folder / "ckpt-2")) == (str(folder / run_files.TASK_JSON), None)
    (tmp_path / "copies" / run_files.BEST_JSON).write_text("{}")
    assert run_files.run_folders(str(folder)) == [str(folder), str(tmp_path / "copies")]
    assert run_files.task_record(str(folder))[1] == {"labels": ["a", "b"]}


def test_a_keras_hub_task_is_named_from_its_task_json_or_task_when_unreadable(tmp_path):
    assert run_files.keras_hub_task(str(tmp_path)) is None
    (tmp_path / "task.weights.h5").write_bytes(b"weights")
    (tmp_path / "task.json").write_text('{"class_name": "AlbertTextClassifier"}')
    assert run_files.keras_hub_task(str(tmp_path)) == "AlbertTextClassifier"
    (tmp_path / "task.json").write_text("{not json")
    assert run_files.keras_hub_task(str(tmp_path)) == "task"
    (tmp_path / "task.json").write_text("[1]")
    assert run_files.keras_hub_task(str(tmp_path)) == "task"


def test_names_match_the_training_code():
    assert (run_files.BEST_DIR, run_files.BEST_JSON) == (best_checkpoint.BEST_DIR, best_checkpoint.BEST_JSON)


def test_task_head_names_the_heads_a_pretraining_model_leaves_unused():
    def head(fmt, *unused):
        return run_files.task_head(LoadResult(fmt, [], [], list(unused)))

    assert head("original", "output_weights", "output_bias", "cls/squad/output_weights", "sentence_order/x") == [
        "output_weights", "output_bias", "cls/squad/output_weights"]
    assert head("huggingface", "classifier.weight", "qa_outputs.bias", "pooler.extra") == [
        "classifier.weight", "qa_outputs.bias"]
    assert head("native", "model/start_dense/bias/.ATTRIBUTES/VARIABLE_VALUE") == [
        "model/start_dense/bias/.ATTRIBUTES/VARIABLE_VALUE"]
    assert run_files.is_output_layer(["output_weights", "output_bias"])
    assert run_files.is_output_layer(["model/output_layer/_kernel/.ATTRIBUTES/VARIABLE_VALUE"])
    assert not run_files.is_output_layer(["cls/squad/output_weights"]) and not run_files.is_output_layer([])


def test_best_checkpoint_to_huggingface_is_the_fine_tuned_classifier(fine_tuned, tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    run, (ids, mask, segments), logits = fine_tuned
    output = str(tmp_path / "hf")
    convert.convert_argv(["convert", f"--input_checkpoint={run / 'best_checkpoint'}", "--output_format=huggingface",
                          f"--output_path={output}", f"--spm_model_file={SPM}"])
    with open(os.path.join(output, "config.json"), encoding="utf-8") as f:
        assert json.load(f)["architectures"] == ["AlbertForSequenceClassification"]
    model = transformers.AutoModelForSequenceClassification.from_pretrained(output, local_files_only=True)
    model.eval()
    assert model.config.id2label == {0: "0", 1: "1"}  # SST-2's labels, from the run's task.json
    with torch.no_grad():
        theirs = model(input_ids=torch.tensor(ids, dtype=torch.long),
                       attention_mask=torch.tensor(mask, dtype=torch.long),
                       token_type_ids=torch.tensor(segments, dtype=torch.long)).logits.numpy()
    np.testing.assert_allclose(theirs, logits, atol=1e-5, rtol=0)


def test_best_checkpoint_to_keras_hub_is_the_fine_tuned_classifier(fine_tuned, tmp_path):
    keras_hub = pytest.importorskip("keras_hub")
    run, (ids, mask, segments), logits = fine_tuned
    output = str(tmp_path / "preset")
    convert.convert_argv(["convert", f"--input_checkpoint={run / 'best_checkpoint'}", "--output_format=keras_hub",
                          f"--output_path={output}", f"--spm_model_file={SPM}"])
    task = keras_hub.models.AlbertTextClassifier.from_preset(output)
    assert task.num_classes == 2
    theirs = np.asarray(task({"token_ids": ids, "padding_mask": mask, "segment_ids": segments}, training=False))
    np.testing.assert_allclose(theirs, logits, atol=1e-5, rtol=0)
    # The preset as input: the converter reads a preset's backbone only, so the classifier preset is refused.
    with pytest.raises(CheckpointMismatchError, match="keras-hub AlbertTextClassifier preset; .* would drop"):
        conversion.convert(output, str(tmp_path / "back"), "original")
    assert not os.path.exists(tmp_path / "back.index")


@pytest.mark.parametrize("fmt", ["original", "native"])
def test_best_checkpoint_to_checkpoint_formats_keeps_the_head(fine_tuned, tmp_path, fmt):
    run, batch, logits = fine_tuned
    prefix = str(tmp_path / "out" / "model.ckpt")
    os.makedirs(tmp_path / "out")
    conversion.convert(str(run / "best_checkpoint"), prefix, fmt)
    classifier = build_classifier(tiny_config(), 2)
    result = load_checkpoint(classifier, prefix)
    assert not result.missing and not result.unused
    ids, mask, segments = batch
    ours = classifier({"input_ids": ids, "input_mask": mask, "segment_ids": segments}, training=False)
    np.testing.assert_allclose(np.asarray(ours), logits, atol=1e-6, rtol=0)
    if fmt == "original":
        assert tf.train.load_checkpoint(prefix).get_variable_to_shape_map()["output_weights"] == [2, 32]


@pytest.mark.slow
def test_a_head_without_its_labels_is_refused_or_written_with_num_labels(fine_tuned, tmp_path):
    """best_checkpoint/ moved away from its run: no task.json says the labels, so the output would lack the
    head; refused in one line (exit status 2) naming --num_labels, nothing written; --num_labels writes it."""
    run, _, logits = fine_tuned
    alone = tmp_path / "alone"
    shutil.copytree(run / "best_checkpoint", alone)
    config = str(run / "albert_config.json")
    output = tmp_path / "hf"
    result = subprocess.run(
        [sys.executable, "-m", "albert_tf.convert", f"--input_checkpoint={alone}", f"--albert_config_file={config}",
         "--output_format=huggingface", f"--output_path={output}", f"--spm_model_file={SPM}"],
        cwd=REPO, env=subprocess_env(), capture_output=True, text=True, timeout=600, check=False)
    assert_one_line_error(result, "classifier head", "model/output_layer/", "--num_labels", status=2)
    assert not os.path.exists(output)
    with pytest.raises(UsageError, match="holds a classifier head"):
        conversion.convert(str(alone), str(tmp_path / "ckpt"), "native", albert_config_file=config)
    assert not [p for p in os.listdir(tmp_path) if p.startswith("ckpt")]

    conversion.convert(str(alone), str(output), "huggingface", albert_config_file=config, spm_model_file=SPM,
                       num_labels=2, label_list=["neg", "pos"])
    with open(output / "config.json", encoding="utf-8") as f:
        hf_config = json.load(f)
    assert hf_config["architectures"] == ["AlbertForSequenceClassification"]
    assert hf_config["id2label"] == {"0": "neg", "1": "pos"}
    assert logits.shape == (3, 2)


@pytest.mark.parametrize("fmt", ["original", "native"])
def test_a_head_the_converter_cannot_write_is_refused(tmp_path, fmt):
    """SQuAD 2.0's answer verifier has no place in the converter's models: refused, not written without it."""
    config = tiny_config()
    squad = AlbertForSquad(config, version_2=True)
    squad(dummy_inputs(seq_length=4), training=False)
    prefix = save_checkpoint(squad, str(tmp_path / "ckpt"), fmt)
    config.to_json_file(str(tmp_path / "albert_config.json"))
    with pytest.raises(CheckpointMismatchError, match="holds a task head .*answer.*cannot write"):
        conversion.convert(prefix, str(tmp_path / "hf"), "huggingface", spm_model_file=SPM)
    assert not os.path.exists(tmp_path / "hf")
