"""The classifier SavedModel in-process (albert_tf/serving/classifier.py): every signature against the Keras model
and the Python tokenizer's features, label names, the threshold, regression, a WordPiece tokenizer, and what the
export refuses. The export served by TF Serving's REST rules and a fresh process: the slow tests of
tests/serving/ and tests/tasks/."""

import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data.glue import features_from_texts
from albert_tf.serving.classifier import export_classifier
from albert_tf.serving.savedmodel import ExportError
from albert_tf.tasks.classification import build_classifier
from albert_tf.text.tokenization import FullTokenizer
from tests.helpers import DATA_DIR, SPM, randomize, tiny_config

TEXTS_A = ["A delight from start to finish.", "dull", "It rains; nobody goes out, and the streets stay empty."]
TEXTS_B = ["Truly moving.", "", "The town sleeps."]
LABELS = ["neg", "neutral", "pos"]
SEQ = 16


@pytest.fixture(name="exported", scope="module")
def _exported(tmp_path_factory):
    model = randomize(build_classifier(tiny_config(), 3), scale=0.1)  # outputs that a changed input moves
    export_dir = export_classifier(model, str(tmp_path_factory.mktemp("export") / "cls"), SPM, max_seq_length=SEQ,
                                   threshold=0.25, label_list=LABELS)
    return model, tf.saved_model.load(export_dir)


def _expected(model, features):
    logits = model({k: tf.constant(v) for k, v in features.items()}, training=False).numpy()
    return tf.nn.softmax(logits, axis=-1).numpy()


def _check(served, probabilities):
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, atol=1e-5)
    predictions = probabilities.argmax(axis=-1)
    np.testing.assert_array_equal(served["predictions"].numpy(), predictions)
    assert served["predictions"].dtype == tf.int32
    assert [label.decode() for label in served["labels"].numpy()] == [LABELS[i] for i in predictions]
    assert served["threshold"].shape == [len(probabilities)]
    np.testing.assert_array_equal(served["threshold"].numpy(), [0.25] * len(probabilities))


def test_ids_examples_and_text_signatures_serve_the_models_probabilities(exported):
    model, loaded = exported
    assert sorted(loaded.signatures) == ["serialized_example", "serving_default", "text", "text_pair",
                                         "tokenization_info"]
    features = features_from_texts(FullTokenizer(spm_model_file=SPM), TEXTS_A, TEXTS_B, max_seq_length=SEQ)
    expected = _expected(model, features)
    assert expected.min() > 0.01 and np.ptp(expected, axis=0).max() > 0.01  # neither saturated nor flat
    _check(loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in features.items()}), expected)
    _check(loaded.signatures["text_pair"](text_a=tf.constant(TEXTS_A), text_b=tf.constant(TEXTS_B)), expected)

    singles = features_from_texts(FullTokenizer(spm_model_file=SPM), TEXTS_A, max_seq_length=SEQ)
    single_expected = _expected(model, singles)
    _check(loaded.signatures["text"](text=tf.constant(TEXTS_A)), single_expected)
    _check(loaded.signatures["text_pair"](text_a=tf.constant(TEXTS_A), text_b=tf.constant([""] * 3)),
           single_expected)

    # tf.Examples of the records' int64 features, each only as long as its tokens (shorter ones padded)
    lengths = singles["input_mask"].sum(axis=1)
    examples = [tf.train.Example(features=tf.train.Features(feature={
        name: tf.train.Feature(int64_list=tf.train.Int64List(value=singles[name][row, :lengths[row]].tolist()))
        for name in ("input_ids", "input_mask", "segment_ids")})).SerializeToString() for row in range(3)]
    _check(loaded.signatures["serialized_example"](serialized_example=tf.constant(examples)), single_expected)

    none = tf.constant([], tf.string)  # an empty request: empty outputs
    for served in (loaded.signatures["text"](text=none), loaded.signatures["text_pair"](text_a=none, text_b=none)):
        assert served["probabilities"].shape == [0, 3] and served["threshold"].shape == [0]


def test_regression_serves_the_score_and_no_labels(tmp_path):
    model = randomize(build_classifier(tiny_config(), 1), scale=0.1)
    loaded = tf.saved_model.load(export_classifier(model, str(tmp_path / "reg"), SPM, max_seq_length=SEQ,
                                                   label_list=["ignored"]))
    features = features_from_texts(FullTokenizer(spm_model_file=SPM), TEXTS_A, max_seq_length=SEQ)
    served = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in features.items()})
    logits = model({k: tf.constant(v) for k, v in features.items()}, training=False).numpy()
    assert sorted(served) == ["predictions", "probabilities"]
    np.testing.assert_allclose(served["probabilities"].numpy(), logits, atol=1e-5)
    np.testing.assert_allclose(served["predictions"].numpy(), logits[:, 0], atol=1e-5)


def test_a_wordpiece_vocabulary_tokenizes_in_the_graph(tmp_path):
    vocab = os.path.join(DATA_DIR, "vocab_chinese.txt")
    model = build_classifier(tiny_config(vocab_size=sum(1 for _ in open(vocab, encoding="utf-8"))), 2)
    loaded = tf.saved_model.load(export_classifier(model, str(tmp_path / "zh"), vocab, max_seq_length=SEQ))
    texts = ["今天天气很好", "我不喜欢下雨"]
    features = features_from_texts(FullTokenizer(vocab_file=vocab), texts, max_seq_length=SEQ)
    served = loaded.signatures["text"](text=tf.constant(texts))
    np.testing.assert_allclose(served["probabilities"].numpy(), _expected(model, features), atol=1e-5)
    assert "labels" not in served and "threshold" not in served
    info = loaded.signatures["tokenization_info"]()
    assert os.path.basename(info["vocab_file"].numpy().decode()) == "vocab_chinese.txt"


def test_what_the_export_refuses(tmp_path):
    model = build_classifier(tiny_config(), 3)
    with pytest.raises(ExportError, match="needs the tokenizer file"):
        export_classifier(model, str(tmp_path / "a"), None)
    with pytest.raises(ExportError, match="^label_list has 2 labels, the model 3$"):
        export_classifier(model, str(tmp_path / "b"), SPM, label_list=["x", "y"])
    with pytest.raises(ValueError, match="max_seq_length"):
        export_classifier(model, str(tmp_path / "c"), SPM, max_seq_length=129)
    assert not any((tmp_path / name).exists() for name in "abc")


def test_the_defaults_inference_mode_and_the_id_check(tmp_path):
    """Exported with its defaults (lowercasing, 128 tokens, no overwrite) from a model with dropout: the text
    signature serves the Keras model in inference mode on the Python tokenizer's features, every call alike; the
    restored object keeps its functions; ids outside the vocabulary are refused in the graph."""
    model = randomize(build_classifier(tiny_config(hidden_dropout_prob=0.5, attention_probs_dropout_prob=0.5), 3),
                      scale=0.1)
    export_dir = export_classifier(model, str(tmp_path / "cls"), SPM)
    loaded = tf.saved_model.load(export_dir)
    long_text = "The QUICK Brown fox " * 40  # 160 words: cut at 128 tokens
    features = features_from_texts(FullTokenizer(spm_model_file=SPM, do_lower_case=True), [long_text, "HELLO"],
                                   max_seq_length=128)
    expected = _expected(model, features)
    for _ in range(2):
        served = loaded.serve_text(text=tf.constant([long_text, "HELLO"]))
        np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=1e-5)
    assert int(loaded.max_seq_length.numpy()) == 128 and not loaded.max_seq_length.trainable  # a setting, not a weight
    assert bool(loaded.signatures["tokenization_info"]()["do_lower_case"].numpy()) is True
    served = loaded.serve(**{k: tf.constant(v) for k, v in features.items()})
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=1e-5)
    outside = {k: tf.constant(v) for k, v in features.items()}
    outside["input_ids"] = tf.tensor_scatter_nd_update(outside["input_ids"], [[1, 1]], [tiny_config().vocab_size])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"input_ids outside the vocabulary \[0, "):
        loaded.signatures["serving_default"](**outside)
    with pytest.raises(ExportError, match="exists"):
        export_classifier(model, export_dir, SPM)
