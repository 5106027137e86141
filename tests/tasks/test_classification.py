"""Fine-tuning runs end to end (CLI and API), resuming, the best checkpoint, predictions, bad input, the export
answering in a fresh process, and the Keras API example of the README."""

import dataclasses
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import checkpoints, guard
from albert_tf.checkpoints import CheckpointError
from albert_tf.config import AlbertConfig
from albert_tf.data import glue
from albert_tf.errors import AlbertError as RunError
from albert_tf.errors import UsageError
from albert_tf.tasks.classification import (ClassifierParams, build_classifier, run_classifier, task_processor,
                                           write_predictions)
from albert_tf.text.tokenization import FullTokenizer
from tests.helpers import REPO as REPO_ROOT
from tests.helpers import SAMPLE_GLUE, SPM, TINY, subprocess_env


def _params(output_dir, **overrides):
    values = dict(albert_config=AlbertConfig(**TINY), output_dir=str(output_dir), task_name="sst-2",
                  data_dir=SAMPLE_GLUE, spm_model_file=SPM, max_seq_length=32, train_batch_size=8,
                  eval_batch_size=50, predict_batch_size=25, learning_rate=1e-3, train_step=4,
                  save_checkpoints_steps=2, iterations_per_loop=2, keep_checkpoint_max=1, log_every=0,
                  )
    values.update(overrides)
    return ClassifierParams(**values)


def _read_tsv(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t") for line in f]


# ------------------------------------------------------------------------------ end to end through the CLI
LOAD_SCRIPT = r"""
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the text signatures use)

export_dir, inputs_file = sys.argv[1], sys.argv[2]
loaded = tf.saved_model.load(export_dir)
inputs = np.load(inputs_file, allow_pickle=False)
sig = loaded.signatures
out = {
    "ids": sig["serving_default"](input_ids=tf.constant(inputs["input_ids"]),
                                  input_mask=tf.constant(inputs["input_mask"]),
                                  segment_ids=tf.constant(inputs["segment_ids"])),
    "examples": sig["serialized_example"](serialized_example=tf.constant(
        [r.numpy() for r in tf.data.TFRecordDataset(inputs_file.replace("inputs.npz", "examples.tfrecord"))])),
    "text": sig["text"](text=tf.constant(inputs["texts"])),
    "pair": sig["text_pair"](text_a=tf.constant(inputs["texts"]), text_b=tf.constant([""] * len(inputs["texts"]))),
}
result = {name: {k: v.numpy().tolist() if v.dtype != tf.string else [s.decode() for s in v.numpy()]
                 for k, v in o.items()} for name, o in out.items()}
result["signatures"] = sorted(sig.keys())
result["modules"] = sorted(m for m in sys.modules if m.split(".")[0] == "albert_tf")
info = sig["tokenization_info"]()
result["do_lower_case"] = bool(info["do_lower_case"].numpy())
print(json.dumps(result))
"""


def _cli_run(work):
    work.mkdir(parents=True, exist_ok=True)
    config_file = work / "albert_config.json"
    AlbertConfig(**TINY).to_json_file(str(config_file))
    out = work / "out"
    command = [sys.executable, os.path.join(REPO_ROOT, "run_classifier.py"), "--task_name=SST-2",
               f"--data_dir={SAMPLE_GLUE}", f"--output_dir={out}", f"--albert_config_file={config_file}",
               f"--spm_model_file={SPM}", "--max_seq_length=64", "--do_train", "--do_eval", "--do_predict",
               "--train_batch_size=16", "--eval_batch_size=32", "--predict_batch_size=16", "--learning_rate=1e-3",
               "--train_step=6", "--save_checkpoints_steps=3", "--iterations_per_loop=3", "--keep_checkpoint_max=1",
               f"--export_dir={work / 'export'}", "--threshold_to_export=0.7", "--log_every=3"]
    done = subprocess.run(command, env=subprocess_env(), capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-5000:]
    return work, out, done.stdout


@pytest.mark.slow
def test_cli_end_to_end(tmp_path):
    """run_classifier.py on the SST-2 sample: train, evaluate each checkpoint, keep the best, predict, export;
    the export, loaded in a fresh process with only tensorflow and tensorflow_text, gives the same probabilities
    from ids, tf.Examples and raw text."""
    work, out, stdout = _cli_run(tmp_path / "cli")
    _check_outputs(out, stdout)
    _check_export(work, out, tmp_path)


def _check_outputs(out, stdout):
    assert "Done at step 6" in stdout and "best checkpoint (step" in stdout
    history = json.loads((out / "eval_history.json").read_text())
    assert history["metric"] == "eval_accuracy" and sorted(history["results"]) == ["3", "6"]
    best = json.loads((out / "best_checkpoint.json").read_text())
    values = {int(step): r["eval_accuracy"] for step, r in history["results"].items()}
    assert best["value"] == max(values.values()) and values[best["step"]] == best["value"]
    assert best["checkpoint"] == f"best_checkpoint/ckpt-{best['step']}"
    assert tf.train.latest_checkpoint(str(out / "best_checkpoint")).endswith(f"ckpt-{best['step']}")
    # keep_checkpoint_max=1: step 3's checkpoint was evaluated when saved, then rotated out.
    assert sorted(f for f in os.listdir(out) if f.endswith(".index")) == ["ckpt-6.index"]
    assert "global_step = 3" in (out / "eval_results.txt").read_text()

    probabilities = np.array(_read_tsv(out / "test_results.tsv"), np.float64)
    assert probabilities.shape == (50, 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-6)
    submission = _read_tsv(out / "submit_results.tsv")
    assert submission[0] == ["index", "prediction"] and len(submission) == 51
    assert [row[0] for row in submission[1:]] == [str(i) for i in range(50)]  # SST-2 test's index column
    assert [row[1] for row in submission[1:]] == [str(i) for i in probabilities.argmax(axis=1)]


def _check_export(work, out, tmp_path):
    examples = glue.get_processor("sst-2").get_test_examples(SAMPLE_GLUE)
    texts = [e.text_a for e in examples]
    features = glue.features_from_texts(FullTokenizer(spm_model_file=SPM), texts, max_seq_length=64)
    serialized = []
    for i in range(len(texts)):
        feature = {n: tf.train.Feature(int64_list=tf.train.Int64List(value=features[n][i])) for n in features}
        feature["label_ids"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[0]))
        serialized.append(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    inputs_file = tmp_path / "inputs.npz"
    np.savez(inputs_file, texts=np.array(texts), **features)
    with tf.io.TFRecordWriter(str(tmp_path / "examples.tfrecord")) as writer:
        for record in serialized:
            writer.write(record)
    script = tmp_path / "load.py"
    script.write_text(LOAD_SCRIPT)
    env = subprocess_env()
    env.pop("PYTHONPATH")
    best_step = json.loads((out / "best_checkpoint.json").read_text())["step"]
    assert os.listdir(work / "export") == [str(best_step)]  # <export_dir>/<global_step of the exported weights>
    done = subprocess.run([sys.executable, str(script), str(work / "export" / str(best_step)), str(inputs_file)], env=env,
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-5000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["modules"] == []  # only tensorflow and tensorflow_text were imported
    assert result["signatures"] == ["serialized_example", "serving_default", "text", "text_pair",
                                    "tokenization_info"]
    assert result["do_lower_case"] is True
    expected = np.array(_read_tsv(out / "test_results.tsv"), np.float64)
    for name in ("ids", "examples", "text", "pair"):
        outputs = result[name]
        np.testing.assert_allclose(outputs["probabilities"], expected, rtol=0, atol=1e-5, err_msg=name)
        assert outputs["predictions"] == list(expected.argmax(axis=1)), name
        assert outputs["labels"] == [str(p) for p in outputs["predictions"]], name
        assert outputs["threshold"] == [pytest.approx(0.7)] * 50, name


@pytest.mark.slow
def test_cli_rejects_bad_input(tmp_path):
    config_file = tmp_path / "albert_config.json"
    AlbertConfig(**TINY).to_json_file(str(config_file))
    command = [sys.executable, os.path.join(REPO_ROOT, "run_classifier.py"), "--task_name=sst-2",
               f"--data_dir={SAMPLE_GLUE}", f"--output_dir={tmp_path / 'out'}", f"--albert_config_file={config_file}",
               f"--spm_model_file={SPM}", "--do_train", "--max_seq_length=512"]
    done = subprocess.run(command, env=subprocess_env(), capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode != 0
    assert "Cannot use sequence length 512 because the ALBERT model was only trained up to sequence length 128" \
        in done.stderr


# ---------------------------------------------------------------------------------------- through the API
@pytest.mark.slow
def test_best_checkpoint_keep_max_and_predict(tmp_path):
    out = tmp_path / "out"
    params = _params(out, do_train=True, do_eval=True)
    first = run_classifier(params)
    assert (first["start_step"], first["step"]) == (0, 4)
    assert sorted(first["eval_history"]) == [2, 4]
    # keep_checkpoint_max=1: only the last checkpoint stays, but step 2 was evaluated when it was saved.
    assert sorted(f for f in os.listdir(out) if f.endswith(".index")) == ["ckpt-4.index"]
    best = json.loads((out / "best_checkpoint.json").read_text())
    accuracies = {int(s): r["eval_accuracy"]
                  for s, r in json.loads((out / "eval_history.json").read_text())["results"].items()}
    assert best["value"] == max(accuracies.values()) and best["step"] == first["best_step"]
    assert os.path.exists(out / "best_checkpoint" / f"ckpt-{best['step']}.index")

    # Evaluating again finds nothing new; predicting uses the best checkpoint.
    again = run_classifier(dataclasses.replace(params, do_train=False, do_predict=True))
    assert again["final_weights"].endswith(os.path.join("best_checkpoint", f"ckpt-{best['step']}"))
    assert sorted(again["eval_history"]) == [2, 4]
    assert len(_read_tsv(out / "test_results.tsv")) == 50


@pytest.mark.slow
def test_interrupted_run_resumes_to_the_same_weights(tmp_path):
    out = tmp_path / "out"
    params = _params(out, do_train=True, train_step=6, keep_checkpoint_max=0)
    assert run_classifier(params)["step"] == 6
    uninterrupted = [w.numpy() for w in _loaded_classifier(out / "ckpt-6").weights]  # encoder and head
    # As if killed after the checkpoint of step 4: drop step 6 and point the state file back.
    for path in out.glob("ckpt-6.*"):
        path.unlink()
    (out / "checkpoint").write_text('model_checkpoint_path: "ckpt-4"\nall_model_checkpoint_paths: "ckpt-2"\n'
                                    'all_model_checkpoint_paths: "ckpt-4"\n')
    resumed = run_classifier(params)
    assert (resumed["start_step"], resumed["step"]) == (4, 6)
    weights = _loaded_classifier(out / "ckpt-6").weights
    assert len(weights) == len(uninterrupted) > 20
    for weight, expected in zip(weights, uninterrupted):
        np.testing.assert_allclose(weight.numpy(), expected, rtol=0, atol=1e-6, err_msg=weight.path)


@pytest.mark.slow
def test_regression_task(tmp_path):
    outcome = run_classifier(_params(tmp_path / "out", task_name="sts-b", do_train=True, do_eval=True,
                                     do_predict=True, train_step=2, keep_checkpoint_max=0))
    assert set(outcome["eval_results"]) == {"pearson", "spearman", "MSE", "eval_loss", "global_step"}
    assert json.loads((tmp_path / "out" / "best_checkpoint.json").read_text())["metric"] == "pearson"
    scores = _read_tsv(tmp_path / "out" / "test_results.tsv")
    assert len(scores) == 50 and all(len(row) == 1 for row in scores)
    submission = _read_tsv(tmp_path / "out" / "submit_results.tsv")
    assert submission[1][0] == "0" and float(submission[1][1]) == pytest.approx(float(scores[0][0]))


@pytest.mark.slow
def test_own_csv_data(tmp_path):
    rows = [("a delight from start to finish", "pos"), ("dull and lifeless", "neg"), ("truly moving", "pos"),
            ("a waste of time", "neg")] * 4
    train = tmp_path / "train.csv"
    train.write_text("text,sentiment\n" + "".join(f'"{t}",{s}\n' for t, s in rows))
    processor = glue.CsvProcessor(train_file=str(train), dev_file=str(train), test_file=str(train),
                                  delimiter=",", text_a_column="text", label_column="sentiment", task_name="mine")
    outcome = run_classifier(_params(tmp_path / "out", task_name=None, data_dir=None, processor=processor,
                                     do_train=True, do_eval=True, do_predict=True, train_step=2))
    assert set(outcome["eval_results"]) == {"eval_accuracy", "f1", "matthew_corr", "eval_loss", "global_step"}
    assert json.loads((tmp_path / "out" / "task.json").read_text())["labels"] == ["neg", "pos"]
    labels = {row[1] for row in _read_tsv(tmp_path / "out" / "submit_results.tsv")[1:]}
    assert labels <= {"neg", "pos"}


def test_the_reader_comes_from_the_own_files_settings_else_the_named_task(tmp_path):
    """`task_processor`: the code-built `processor` first, else the user's files read as the settings say
    (relative to --data_dir, columns by header name, the labels inferred), else the named GLUE task."""
    (tmp_path / "train.csv").write_text('id;sentiment;text\n7;pos;"great; really"\n8;neg;dull\n')
    params = _params(tmp_path / "out", task_name="Mine", data_dir=str(tmp_path), train_file="train.csv",
                     delimiter=";", text_a_column="text", label_column="sentiment", guid_column="id", do_train=True)
    guard.check_params(params)  # a GLUE folder with own files: any task name
    with pytest.raises(UsageError, match="--task_name=Mine: unknown task 'mine'"):
        guard.check_params(dataclasses.replace(params, train_file=None))
    own = task_processor(params)
    assert own.task_name == "mine" and own.get_labels() == ["neg", "pos"] and not own.is_regression
    assert [(e.guid, e.text_a, e.label) for e in own.get_train_examples(None)] == [
        ("7", "great; really", "pos"), ("8", "dull", "neg")]
    listed = task_processor(dataclasses.replace(params, label_list=["pos", "neg", "sentiment"], has_header=False,
                                                text_a_column="2", label_column="1", guid_column=None))
    assert listed.get_labels() == ["pos", "neg", "sentiment"] and listed.num_labels == 3
    assert [e.text_a for e in listed.get_train_examples(None)] == ["text", "great; really", "dull"]  # no header
    assert task_processor(dataclasses.replace(params, regression=True, label_column="id")).is_regression
    assert task_processor(_params(tmp_path / "out")).task_name == "sst-2"
    given = glue.CsvProcessor(train_file=str(tmp_path / "train.csv"), delimiter=";", task_name="given")
    assert task_processor(dataclasses.replace(params, processor=given)) is given


def test_bad_input(tmp_path):
    with pytest.raises(RunError, match="Cannot use sequence length 256 because the ALBERT model was only trained "
                                       "up to sequence length 128"):
        run_classifier(_params(tmp_path / "a", do_train=True, max_seq_length=256))
    with pytest.raises(UsageError, match="--task_name=sst2: unknown task 'sst2'; known tasks: cola, "):
        run_classifier(_params(tmp_path / "b", task_name="sst2", do_train=True))
    with pytest.raises(UsageError, match="--task_name=: no task name given; known tasks: cola, "):
        run_classifier(_params(tmp_path / "b", task_name=None, do_train=True))
    assert not (tmp_path / "b").exists()
    with pytest.raises(RunError, match="--best_metric 'f1' is not reported for task sst-2"):
        run_classifier(_params(tmp_path / "c", do_eval=True, best_metric="f1"))
    with pytest.raises(RunError, match="nothing to evaluate"):
        run_classifier(_params(tmp_path / "d", do_eval=True))
    # An init checkpoint of another architecture.
    other = build_classifier(AlbertConfig(**{**TINY, "hidden_size": 48, "num_attention_heads": 4}), 2)
    prefix = tf.train.Checkpoint(model=other).write(str(tmp_path / "other" / "ckpt"))
    with pytest.raises(CheckpointError, match=r"--init_checkpoint .* does not fit the model of the albert config "
                                              r"\(hidden_size=32.*shape mismatch"):
        run_classifier(_params(tmp_path / "e", do_train=True, init_checkpoint=prefix))
    # An output_dir trained on another label set is refused.
    os.makedirs(tmp_path / "f")
    (tmp_path / "f" / "task.json").write_text(json.dumps({"labels": ["x", "y", "z"], "regression": False}))
    with pytest.raises(RunError, match="holds a run with labels"):
        run_classifier(_params(tmp_path / "f", do_train=True))


def test_write_predictions_format(tmp_path):
    examples = [glue.InputExample("7", "a"), glue.InputExample("8", "b")]
    logits = np.array([[2.0, 0.0], [0.0, 1.0]], np.float32)
    results, submit = write_predictions(str(tmp_path), examples, logits, ["entailment", "not_entailment"], False)
    rows = _read_tsv(results)
    np.testing.assert_allclose(np.array(rows, float)[0], [1 / (1 + np.exp(-2.0)), 1 / (1 + np.exp(2.0))], atol=1e-9)
    assert _read_tsv(submit) == [["index", "prediction"], ["7", "entailment"], ["8", "not_entailment"]]


# -------------------------------------------------------------------------------- the README's Keras example
def test_keras_api_example(tmp_path):
    """The README's Keras example, with a tiny config and a stand-in "pretrained" checkpoint."""
    # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints import load_checkpoint
    from albert_tf.model import AlbertClassifier, AlbertModel, dummy_inputs
    from albert_tf.train.optimization import create_optimizer

    config = AlbertConfig(**TINY)
    encoder = AlbertModel(config)
    encoder(dummy_inputs())
    pretrained = tf.train.Checkpoint(model=encoder).write(str(tmp_path / "pretrained" / "ckpt"))

    # --- as in the README ---
    tokenizer = FullTokenizer(spm_model_file=SPM, do_lower_case=True)
    texts = ["a gorgeous, witty, seductive movie.", "the plot is nothing but boilerplate cliches."] * 4
    labels = [1, 0] * 4
    features = glue.features_from_texts(tokenizer, texts, max_seq_length=32)
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).shuffle(8, seed=1).repeat().batch(4)
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = AlbertClassifier(config, num_labels=2, dropout_prob=0.1)
        load_checkpoint(model, pretrained)
        model.compile(optimizer=create_optimizer("adamw", 1e-3, num_train_steps=4, num_warmup_steps=1),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    history = model.fit(dataset, steps_per_epoch=2, epochs=2, verbose=0)
    probabilities = tf.nn.softmax(model.predict(glue.features_from_texts(tokenizer, ["what a film"], max_seq_length=32),
                                                verbose=0))
    # ---
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()
    assert int(model.optimizer.iterations.numpy()) == 4
    assert probabilities.shape == (1, 2)


@pytest.mark.slow
def test_head_only_steps_hold_the_encoder_in_a_run(tmp_path):
    """--head_only_steps=4 over 4 steps: between the checkpoints of steps 2 and 4 the classifier moves and the
    encoder only by AdamW's weight decay (lr 1e-3 x 0.01 a step); the setting is recorded with the run."""
    out = tmp_path / "out"
    run_classifier(_params(out, do_train=True, keep_checkpoint_max=0, head_only_steps=4))
    assert json.loads((out / "settings.json").read_text())["settings"]["head_only_steps"] == 4
    early, late = (_loaded_classifier(out / f"ckpt-{step}") for step in (2, 4))
    encoder = list(zip(early.albert.weights, late.albert.weights))
    assert len(encoder) > 10
    for before, after in encoder:
        np.testing.assert_allclose(after.numpy(), before.numpy(), rtol=1e-4, atol=1e-7, err_msg=before.path)
    head = zip(early.output_layer.weights, late.output_layer.weights)
    assert any(np.abs(after.numpy() - before.numpy()).max() > 1e-4 for before, after in head)


def _loaded_classifier(prefix):
    model = build_classifier(AlbertConfig(**TINY), 2)
    assert not checkpoints.load_checkpoint(model, str(prefix)).missing
    return model
