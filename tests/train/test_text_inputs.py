"""Raw text in `fit` / `evaluate` / `predict` (`albert_tf.train.text_inputs`, `albert_tf.text_classifier`): the ids
the `tf.data` pipeline gives are `FullTokenizer`'s, every form of text input trains and predicts alike, pairs work,
a saved model keeps its tokenizer, and the tokenizer stays out of the function `fit` differentiates."""

import os
import shutil
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf

import albert_tf
from albert_tf.data import glue
from albert_tf.text.preprocessor import AlbertTextPreprocessor
from albert_tf.text.tokenization import FullTokenizer
from albert_tf.train import text_inputs
from tests.helpers import DATA_DIR, SAMPLE_GLUE, SPM, tiny_config

SEQ = 48
VOCAB_ZH = os.path.join(DATA_DIR, "vocab_chinese.txt")


def _examples(task, count):
    _, examples = glue.read_split(glue.get_processor(task), os.path.join(SAMPLE_GLUE, task.upper()), "train")
    return examples[:count]


SST = _examples("sst-2", 32)
SST_TEXTS = [e.text_a for e in SST]
SST_LABELS = np.array([int(e.label) for e in SST], np.int32)
# SST-2's rows are lower-case: the same rows in mixed and upper case, so that lowercasing is needed for the ids.
SST_MIXED = [t.upper() if i % 3 == 0 else t.title() if i % 3 == 1 else t.capitalize() for i, t in enumerate(SST_TEXTS)]
MRPC = _examples("mrpc", 8)
MRPC_A, MRPC_B = [e.text_a for e in MRPC], [e.text_b for e in MRPC]
MRPC_LABELS = np.array([int(e.label) for e in MRPC], np.int32)


def _pipeline_features(preprocessor, x):
    """The features the model is fed for in-memory text `x`, concatenated over batches."""
    dataset = text_inputs.preprocess_dataset(text_inputs.text_dataset(text_inputs.in_memory_texts(x),
                                                                      batch_size=5), preprocessor)
    batches = list(dataset.as_numpy_iterator())
    return {name: np.concatenate([b[name] for b in batches]) for name in glue.FEATURE_NAMES}


def _python_features(tokenizer, texts_a, texts_b=None):
    return glue.features_from_texts(tokenizer, texts_a, texts_b, SEQ)


def _assert_same_features(got, want):
    for name in glue.FEATURE_NAMES:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def _classifier(learning_rate=1e-3):
    keras.utils.set_random_seed(1)
    model = albert_tf.text_classifier(tiny_config(), num_labels=2, spm_model_file=SPM, max_seq_length=SEQ,
                                      dropout_prob=0.0)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), metrics=["accuracy"])
    return model


@pytest.fixture(scope="module")
def trained():
    """A classifier trained on SST-2 rows given as a Python list, and its loss history."""
    model = _classifier(learning_rate=1e-2)
    history = model.fit(x=SST_TEXTS, y=SST_LABELS, batch_size=8, epochs=6, shuffle=False, verbose=0)
    return model, history.history["loss"]


# -------------------------------------------------------------------------------------------- the same ids

@pytest.mark.slow
def test_sentencepiece_pipeline_ids_are_full_tokenizers():
    tokenizer = FullTokenizer(spm_model_file=SPM, do_lower_case=True)
    preprocessor = AlbertTextPreprocessor(spm_model_file=SPM, max_seq_length=SEQ)
    texts = SST_TEXTS[:10] + ["1,000,000 Ünïcode ``quotes'' and   spaces", "", "a" * 300]
    _assert_same_features(_pipeline_features(preprocessor, texts), _python_features(tokenizer, texts))
    _assert_same_features(_pipeline_features(preprocessor, (MRPC_A, MRPC_B)),
                          _python_features(tokenizer, MRPC_A, MRPC_B))
    # A list of (text_a, text_b) tuples and an [N, 2] array are pairs too; numpy str and bytes arrays are texts.
    _assert_same_features(_pipeline_features(preprocessor, list(zip(MRPC_A, MRPC_B))),
                          _python_features(tokenizer, MRPC_A, MRPC_B))
    _assert_same_features(_pipeline_features(preprocessor, np.array([MRPC_A, MRPC_B]).T),
                          _python_features(tokenizer, MRPC_A, MRPC_B))
    _assert_same_features(_pipeline_features(preprocessor, np.array([t.encode() for t in texts])),
                          _python_features(tokenizer, texts))


@pytest.mark.slow
def test_wordpiece_pipeline_ids_are_full_tokenizers():
    tokenizer = FullTokenizer(vocab_file=VOCAB_ZH, do_lower_case=True)
    preprocessor = AlbertTextPreprocessor(vocab_file=VOCAB_ZH, max_seq_length=SEQ)
    texts_a = ["今天天气很好，我们去公园散步吧。", "这部电影非常精彩！", "ALBERT 模型在GLUE上表现很好", "北京是中国的首都"]
    texts_b = ["天气不错", "我不喜欢这部电影。", "是的", "上海也很大"]
    _assert_same_features(_pipeline_features(preprocessor, np.array(texts_a)), _python_features(tokenizer, texts_a))
    _assert_same_features(_pipeline_features(preprocessor, (texts_a, texts_b)),
                          _python_features(tokenizer, texts_a, texts_b))
    assert (_pipeline_features(preprocessor, texts_a)["input_ids"] == tokenizer.vocab["[UNK]"]).sum() < 3


# -------------------------------------------------------------------------------------------- fit, evaluate, predict

@pytest.mark.slow
def test_fit_on_a_list_of_texts_lowers_the_loss(trained):
    _, losses = trained
    assert len(losses) == 6
    assert losses[-1] < losses[0] - 0.1


def _rows_stepped(model, initial):
    """The rows of the word-embedding table the last step changed: the ids the model was fed."""
    index = next(i for i, w in enumerate(initial) if w.shape == (30000, 16))
    return set(np.flatnonzero(np.any(model.get_weights()[index] != initial[index], axis=1)).tolist())


@pytest.mark.slow
def test_every_form_of_text_gives_the_same_first_step():
    model = _classifier()
    initial = model.get_weights()
    texts, labels = SST_MIXED[:8], SST_LABELS[:8]
    forms = {
        "list": (texts, labels),
        "numpy str": (np.array(texts), labels),
        "numpy bytes": (np.array([t.encode("utf-8") for t in texts]), labels),
        "tf.data": (tf.data.Dataset.from_tensor_slices((texts, labels)).batch(8), None),
    }
    losses, rows = {}, {}

    def step(name, x, y):
        model.set_weights(initial)
        model.compile(optimizer=keras.optimizers.Adam(1e-3))
        losses[name] = model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0).history["loss"][0]
        rows[name] = _rows_stepped(model, initial)

    for name, (x, y) in forms.items():
        step(name, x, y)
    # The same step on the Python tokenizer's features: the pipeline fed the model FullTokenizer's ids.
    features = _python_features(FullTokenizer(spm_model_file=SPM), texts)
    step("features", features, labels)
    assert max(losses.values()) - min(losses.values()) < 1e-6, losses
    assert set(features["input_ids"][features["input_mask"] == 1].tolist()) == rows["features"]  # padding: none
    assert all(changed == rows["features"] for changed in rows.values()), {k: len(v) for k, v in rows.items()}
    # ... and not the ids of the texts as they are written: the mixed-case texts needed the lower-casing.
    step("cased", _python_features(FullTokenizer(spm_model_file=SPM, do_lower_case=False), texts), labels)
    assert rows["cased"] != rows["features"]


@pytest.mark.slow
def test_evaluate_and_predict_on_texts(trained):
    model, _ = trained
    texts = SST_MIXED  # in mixed case: FullTokenizer lower-cases them (do_lower_case=True), as must the pipeline
    features = _python_features(FullTokenizer(spm_model_file=SPM), texts)
    want = model.predict(features, batch_size=32, verbose=0)
    cased = model.predict(_python_features(FullTokenizer(spm_model_file=SPM, do_lower_case=False), texts),
                          verbose=0)
    assert np.abs(cased - want).max() > 1e-3  # the case of the texts changes the predictions
    np.testing.assert_allclose(model.predict(texts, verbose=0), want, atol=1e-5)
    only_texts = tf.data.Dataset.from_tensor_slices(texts).batch(7)
    np.testing.assert_allclose(model.predict(only_texts, verbose=0), want, atol=1e-5)
    np.testing.assert_allclose(model.predict_on_batch(texts[:4]), want[:4], atol=1e-5)
    results = model.evaluate(texts, SST_LABELS, batch_size=8, verbose=0, return_dict=True)
    reference = model.evaluate(features, SST_LABELS, batch_size=8, verbose=0, return_dict=True)
    assert results["loss"] == pytest.approx(reference["loss"], abs=1e-5)
    assert results["accuracy"] == pytest.approx(np.mean(np.argmax(want, -1) == SST_LABELS))
    dataset = tf.data.Dataset.from_tensor_slices((texts, SST_LABELS)).batch(8)
    assert model.evaluate(dataset, verbose=0, return_dict=True)["loss"] == pytest.approx(reference["loss"],
                                                                                        abs=1e-5)


@pytest.mark.slow
def test_validation_split_on_texts_takes_the_rows_keras_takes():
    """`fit(texts, y, validation_split=...)` trains on the first rows and validates on the last ones, with their
    labels and sample weights, as Keras' own `validation_split` does on the same rows' features."""
    texts, labels = SST_MIXED[:10], SST_LABELS[:10]
    weights = np.linspace(0.2, 2.0, 10).astype(np.float32)
    assert 0 < labels[:7].sum() < 7 and 0 < labels[7:].sum() < 3
    model = _classifier()
    initial = model.get_weights()
    features = _python_features(FullTokenizer(spm_model_file=SPM), texts)
    histories = []
    for x in (texts, features):  # 10 rows at 0.25: Keras keeps floor(7.5) = 7 for training
        model.set_weights(initial)
        model.compile(optimizer=keras.optimizers.Adam(1e-2), metrics=["accuracy"])
        histories.append(model.fit(x, labels, sample_weight=weights, batch_size=4, epochs=2, shuffle=False,
                                   validation_split=0.25, verbose=0).history)
    text_history, keras_history = histories
    assert sorted(text_history) == sorted(keras_history) and "val_loss" in text_history
    for name in keras_history:
        np.testing.assert_allclose(text_history[name], keras_history[name], atol=1e-5, err_msg=name)
    # Keras' own split, checked from the outside: the weights after fit, evaluated on the last 3 rows.
    last = {name: value[7:] for name, value in features.items()}
    assert model.evaluate(last, labels[7:], sample_weight=weights[7:], verbose=0) == pytest.approx(
        [keras_history["val_loss"][-1], keras_history["val_accuracy"][-1]], abs=1e-5)
    with pytest.raises(ValueError, match="validation_split"):
        model.fit(texts[:2], labels[:2], validation_split=0.6, verbose=0)  # 0.8 of a row to train on


@pytest.mark.slow
def test_text_pairs_fit_evaluate_and_predict():
    model = _classifier()
    history = model.fit((MRPC_A, MRPC_B), MRPC_LABELS, batch_size=4, epochs=2, shuffle=False, verbose=0,
                        validation_data=((MRPC_A, MRPC_B), MRPC_LABELS))
    assert len(history.history["val_loss"]) == 2
    features = _python_features(FullTokenizer(spm_model_file=SPM), MRPC_A, MRPC_B)
    want = model.predict(features, verbose=0)
    np.testing.assert_allclose(model.predict((MRPC_A, MRPC_B), verbose=0), want, atol=1e-5)
    pairs = tf.data.Dataset.from_tensor_slices(((MRPC_A, MRPC_B), MRPC_LABELS)).batch(3)
    np.testing.assert_allclose(model.predict(pairs, verbose=0), want, atol=1e-5)
    assert model.evaluate(pairs, verbose=0) == pytest.approx(
        model.evaluate(features, MRPC_LABELS, verbose=0), abs=1e-5)


@pytest.mark.slow
def test_save_and_load_keeps_the_tokenizer(trained, tmp_path):
    model, _ = trained
    # The model is rebuilt from a copy of the SentencePiece model that is gone when it is loaded: the tokenizer
    # must come from the .keras archive.
    spm_copy = str(tmp_path / "copy" / "30k-clean.model")
    os.makedirs(os.path.dirname(spm_copy))
    shutil.copy(SPM, spm_copy)
    original = albert_tf.text_classifier(tiny_config(), num_labels=2, spm_model_file=spm_copy,
                                         max_seq_length=SEQ)
    original.set_weights(model.get_weights())
    path = str(tmp_path / "classifier.keras")
    original.save(path)
    shutil.rmtree(os.path.dirname(spm_copy))
    with zipfile.ZipFile(path) as archive:
        assert any(name.endswith("30k-clean.model") for name in archive.namelist())
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded.preprocessor, AlbertTextPreprocessor)
    assert loaded.preprocessor.max_seq_length == SEQ
    texts = SST_TEXTS[:6] + ["a gorgeous, witty movie."]
    np.testing.assert_array_equal(loaded.predict(texts, verbose=0), original.predict(texts, verbose=0))


@pytest.mark.slow
def test_the_tokenizer_is_not_in_the_function_fit_differentiates():
    model = _classifier()
    graphs = []
    train_step = model.train_step

    def recording_train_step(data):
        graphs.append(tf.compat.v1.get_default_graph())
        return train_step(data)

    model.train_step = recording_train_step
    model.fit(SST_TEXTS[:8], SST_LABELS[:8], batch_size=8, shuffle=False, verbose=0)
    assert graphs and all(isinstance(g, tf.Graph) for g in graphs)  # traced, not run eagerly
    op_types = {op.type for graph in graphs for op in graph.get_operations()}
    assert "MatMul" in op_types or "BatchMatMulV2" in op_types or "Einsum" in op_types  # the model is there
    string_ops = {t for t in op_types if any(word in t for word in ("Sentencepiece", "Regex", "String", "Lookup",
                                                                     "Normalize", "Unicode", "Wordpiece"))}
    assert not string_ops
    assert all(v.dtype != "string" for v in model.trainable_variables)


def test_a_model_without_preprocessor_is_unchanged_and_unbatched_text_is_refused():
    from albert_tf.tasks.classification import build_classifier

    plain = build_classifier(tiny_config(), 2)
    assert plain.preprocessor is None and "preprocessor" not in plain.get_config()
    model = _classifier()
    with pytest.raises(ValueError, match="batch"):
        model.predict(tf.data.Dataset.from_tensor_slices(SST_TEXTS[:3]), verbose=0)


def test_in_memory_text_is_shuffled_each_epoch_with_its_labels():
    texts = [f"text {i}" for i in range(20)]
    dataset = text_inputs.text_dataset(text_inputs.in_memory_texts(texts), np.arange(20), batch_size=20,
                                       shuffle=True)
    orders = []
    for _ in range(2):
        (batch_texts, batch_labels), = list(dataset.as_numpy_iterator())
        assert [t.decode() for t in batch_texts] == [f"text {i}" for i in batch_labels]
        orders.append(list(batch_labels))
    assert sorted(orders[0]) == list(range(20)) and orders[0] != list(range(20)) and orders[0] != orders[1]
    unshuffled = text_inputs.text_dataset(text_inputs.in_memory_texts(texts), np.arange(20), batch_size=20)
    assert list(next(unshuffled.as_numpy_iterator())[1]) == list(range(20))


@pytest.mark.slow
def test_the_readme_keras_example(tmp_path):
    """The README's Keras fine-tuning example, with a tiny config and a stand-in "pretrained" checkpoint."""
    from albert_tf.model import AlbertModel, dummy_inputs  # pylint: disable=import-outside-toplevel
    from albert_tf.train.optimization import create_optimizer  # pylint: disable=import-outside-toplevel

    config = tiny_config()
    encoder = AlbertModel(config)
    encoder(dummy_inputs())
    pretrained = tf.train.Checkpoint(model=encoder).write(str(tmp_path / "pretrained" / "ckpt"))

    # --- as in the README ---
    texts, labels = ["a gorgeous, witty movie.", "boilerplate cliches."] * 4, [1, 0] * 4
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = albert_tf.text_classifier(config, num_labels=2, spm_model_file=SPM, max_seq_length=32,
                                          dropout_prob=0.1)
        albert_tf.load_checkpoint(model, pretrained)
        loaded_encoder = [np.array_equal(a, b) for a, b in zip(model.albert.get_weights(), encoder.get_weights())]
        model.compile(optimizer=create_optimizer("adamw", 1e-3, num_train_steps=4, num_warmup_steps=1),
                      metrics=["accuracy"])
    history = model.fit(x=texts, y=labels, batch_size=4, epochs=2, verbose=0)
    results = model.evaluate(x=texts, y=labels, verbose=0, return_dict=True)
    logits = model.predict(["an utterly charming film."], verbose=0)
    model.save(str(tmp_path / "sst2.keras"))
    # ---
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()
    assert int(model.optimizer.iterations.numpy()) == 4 and np.isfinite(results["loss"])
    assert logits.shape == (1, 2) and all(loaded_encoder)
    loaded = keras.saving.load_model(str(tmp_path / "sst2.keras"))
    np.testing.assert_array_equal(loaded.predict(["an utterly charming film."], verbose=0), logits)
