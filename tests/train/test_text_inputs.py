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


# ------------------------------------------------------------------------ the forms of text, without a model

def _texts(value):
    return [t.decode() for t in value.numpy().tolist()]


def test_each_in_memory_form_of_text_is_read_as_one_or_two_sequences():
    read = text_inputs.in_memory_texts
    for x in (None, {"input_ids": [[1]]}, tf.data.Dataset.from_tensor_slices(["a"]), [], [1, 2], ["a", 1],
              np.array([1, 2]), np.array([1, "a"], dtype=object), tf.constant([1]), 3):
        assert read(x) is None, x
    assert _texts(read("one text")) == ["one text"]
    assert _texts(read(b"bytes")) == ["bytes"]
    for x in (["a", "b"], ("a", "b"), np.array(["a", "b"]), np.array([b"a", b"b"]), np.array(["a", "b"], object),
              tf.constant(["a", "b"]), np.array([["a"], ["b"]])):
        assert _texts(read(x)) == ["a", "b"], x
    assert read(np.array([], dtype=object)).shape == [0]
    # Two pairs as rows or as a tuple of columns (two rows of two texts are rows, never columns).
    for x in ((["a", "c"], ["b", "d"]), [("a", "b"), ("c", "d")], [["a", "b"], ["c", "d"]],
              np.array([["a", "b"], ["c", "d"]]), (np.array(["a", "c"]), tf.constant(["b", "d"]))):
        first, second = read(x)
        assert (_texts(first), _texts(second)) == (["a", "c"], ["b", "d"]), x
    with pytest.raises(ValueError, match=r"one-dimensional \(one text per example\), got shape \(2, 3\)"):
        read(np.array([["a", "b", "c"], ["d", "e", "f"]]))
    with pytest.raises(ValueError, match="one-dimensional"):
        read(np.array([[["a"]]]))
    with pytest.raises(ValueError, match=r"^a pair's two sequences of texts differ in length: 3 first texts, 2 "
                                         r"second texts$"):
        read((["a", "b", "c"], ["d", "e"]))


def test_a_datasets_text_layout_is_found_in_its_elements():
    texts, labels = tf.constant(["a", "b"]), tf.constant([0, 1])
    layout = lambda *parts: text_inputs.dataset_text_layout(  # noqa: E731
        tf.data.Dataset.from_tensor_slices(parts[0] if len(parts) == 1 else parts).batch(2))
    assert layout(texts) == ("x", "single")
    assert layout(texts, texts) == ("x", "pair")
    assert layout(texts, labels) == ("first", "single")
    assert layout(texts, labels, labels) == ("first", "single")
    assert text_inputs.dataset_text_layout(tf.data.Dataset.from_tensor_slices(((texts, texts), labels)).batch(2)) \
        == ("first", "pair")
    assert layout(labels) is None and layout(labels, texts) is None and layout({"t": texts}) is None
    assert layout(texts, texts, texts) == ("first", "single")  # (texts, labels, weights) of strings
    with pytest.raises(ValueError, match=r"call dataset.batch\(batch_size\) first"):
        text_inputs.dataset_text_layout(tf.data.Dataset.from_tensor_slices((texts, labels)))
    with pytest.raises(ValueError, match="must yield batches"):
        text_inputs.dataset_text_layout(tf.data.Dataset.from_tensor_slices((texts, texts)))
    unbatched_a = tf.data.Dataset.zip((tf.data.Dataset.from_tensor_slices(texts),
                                       tf.data.Dataset.from_tensor_slices(texts).batch(2)))
    with pytest.raises(ValueError, match="must yield batches"):  # the pair's first text decides
        text_inputs.dataset_text_layout(unbatched_a)


class _Lengths:
    """A stand-in preprocessor: the features of a text are its length (a pair: both lengths)."""

    def __init__(self):
        self.resources = 0

    def ensure_resources(self):
        self.resources += 1

    def __call__(self, texts):
        if isinstance(texts, tuple):
            return {"a": tf.strings.length(texts[0]), "b": tf.strings.length(texts[1])}
        return {"a": tf.strings.length(texts)}


def test_the_preprocessor_is_mapped_over_the_text_and_the_rest_passes_through():
    texts, pair_b, labels = tf.constant(["a", "bbb"]), tf.constant(["cc", ""]), tf.constant([7, 8])
    cases = [((texts,), [{"a": [1, 3]}]), ((texts, pair_b), [{"a": [1, 3], "b": [2, 0]}]),
             ((texts, labels), [({"a": [1, 3]}, [7, 8])]), ((texts, labels, labels), [({"a": [1, 3]}, [7, 8], [7, 8])]),
             (((texts, pair_b), labels), [({"a": [1, 3], "b": [2, 0]}, [7, 8])])]
    for parts, expected in cases:
        preprocessor = _Lengths()
        element = parts[0] if len(parts) == 1 else parts
        out = text_inputs.preprocess_dataset(tf.data.Dataset.from_tensor_slices(element).batch(2), preprocessor)
        got = [tf.nest.map_structure(lambda v: v.tolist(), b) for b in out.as_numpy_iterator()]
        assert got == [tuple(e) if isinstance(e, tuple) else e for e in expected], parts
        assert preprocessor.resources == 1
    plain = tf.data.Dataset.from_tensor_slices(labels).batch(2)
    assert text_inputs.preprocess_dataset(plain, _Lengths()) is plain


def test_in_memory_text_is_batched_with_its_labels_and_weights():
    texts = text_inputs.in_memory_texts([f"t{i}" for i in range(70)])
    batches = list(text_inputs.text_dataset(texts).as_numpy_iterator())
    assert [len(b) for b in batches] == [32, 32, 6] and batches[2][-1] == b"t69"
    (t, y, w), = list(text_inputs.text_dataset(texts, np.arange(70), np.ones(70) / 2, batch_size=70)
                      .as_numpy_iterator())
    assert t[5] == b"t5" and y[5] == 5 and w[5] == 0.5
    pair = text_inputs.in_memory_texts((["a", "b", "c"], ["d", "e", "f"]))
    ((a, b), y), _ = list(text_inputs.text_dataset(pair, np.arange(3), batch_size=2).as_numpy_iterator())
    assert a.tolist() == [b"a", b"b"] and b.tolist() == [b"d", b"e"] and y.tolist() == [0, 1]
    with pytest.raises(ValueError, match="sample_weight needs y"):
        text_inputs.text_dataset(texts, sample_weight=np.ones(70))
    one = list(text_inputs.text_dataset(text_inputs.in_memory_texts(["x"]), shuffle=True).as_numpy_iterator())
    assert one[0].tolist() == [b"x"]
    none = text_inputs.text_dataset(text_inputs.in_memory_texts(np.array([], dtype=object)), shuffle=True)
    assert list(none.as_numpy_iterator()) == []  # no texts: no batch (and no shuffle buffer of 0)


def test_validation_split_of_text_takes_the_last_examples():
    texts = text_inputs.in_memory_texts([f"t{i}" for i in range(10)])
    (train_x, train_y, train_w), (val_x, val_y, val_w) = text_inputs._split_for_validation(  # pylint: disable=protected-access
        texts, list(range(10)), [1.0] * 8 + [2.0] * 2, 0.25)
    assert _texts(train_x) == [f"t{i}" for i in range(7)] and _texts(val_x) == ["t7", "t8", "t9"]
    assert train_y.tolist() == list(range(7)) and val_y.tolist() == [7, 8, 9]
    assert val_w.tolist() == [1.0, 2.0, 2.0] and len(train_w) == 7
    pair = text_inputs.in_memory_texts(([f"a{i}" for i in range(4)], [f"b{i}" for i in range(4)]))
    (train_x, no_y, no_w), (val_x, _, _) = text_inputs._split_for_validation(pair, None, None, 0.5)  # pylint: disable=protected-access
    assert [_texts(p) for p in val_x] == [["a2", "a3"], ["b2", "b3"]] and no_y is None and no_w is None
    assert [_texts(p) for p in train_x] == [["a0", "a1"], ["b0", "b1"]]
    for split in (1e-17, 0.99):
        with pytest.raises(ValueError, match=rf"^validation_split={split} leaves no training or no validation "
                                             r"examples out of 10$"):
            text_inputs._split_for_validation(texts, None, None, split)  # pylint: disable=protected-access


class _KerasCalls:
    """Stands in for the Keras model under `TextInputs`: records what each entry point is given."""

    def __init__(self):
        self.calls = []

    def _record(self, name, **given):
        self.calls.append((name, given))
        return given

    def get_config(self):
        return {"name": "calls"}

    def fit(self, **given):
        return self._record("fit", **given)

    def evaluate(self, **given):
        return self._record("evaluate", **given)

    def predict(self, x, **given):
        return self._record("predict", x=x, **given)

    def train_on_batch(self, x, y=None, sample_weight=None, **given):
        return self._record("train_on_batch", x=x, y=y, sample_weight=sample_weight, **given)

    def test_on_batch(self, x, y=None, sample_weight=None, **given):
        return self._record("test_on_batch", x=x, y=y, sample_weight=sample_weight, **given)

    def predict_on_batch(self, x):
        return self._record("predict_on_batch", x=x)


class _TextModel(text_inputs.TextInputs, _KerasCalls):
    pass


def _batches(dataset):
    return [tf.nest.map_structure(lambda v: v.tolist(), b) for b in dataset.as_numpy_iterator()]


def test_the_keras_entry_points_get_preprocessed_batches_of_text():
    texts, labels = [f"t{'x' * i}" for i in range(10)], np.arange(10)
    model = _TextModel(preprocessor=_Lengths())
    given = model.fit(x=texts, y=labels, batch_size=4, validation_split=0.2, shuffle=False, epochs=2)
    assert (given["y"], given["sample_weight"], given["batch_size"], given["validation_split"], given["shuffle"],
            given["epochs"]) == (None, None, None, 0.0, False, 2)
    assert _batches(given["x"]) == [({"a": [1, 2, 3, 4]}, [0, 1, 2, 3]), ({"a": [5, 6, 7, 8]}, [4, 5, 6, 7])]
    assert _batches(given["validation_data"]) == [({"a": [9, 10]}, [8, 9])]

    given = model.fit(x=texts, y=labels, batch_size=10, shuffle=True, validation_data=(texts[:5], labels[:5]),
                      validation_batch_size=2)
    assert given["shuffle"] is False and "validation_batch_size" not in given  # shuffled in the dataset instead
    (features, order), = _batches(given["x"])
    assert sorted(order) == list(range(10)) and features["a"] == [o + 1 for o in order]
    assert [b[1] for b in _batches(given["validation_data"])] == [[0, 1], [2, 3], [4]]

    batched = tf.data.Dataset.from_tensor_slices((texts[:3], labels[:3])).batch(3)
    given = model.fit(x=batched, shuffle=True, validation_data=batched)
    assert given["shuffle"] is True and _batches(given["x"]) == _batches(given["validation_data"]) == \
        [({"a": [1, 2, 3]}, [0, 1, 2])]
    features = {"input_ids": np.ones([2, 3], np.int32)}
    given = model.fit(x=features, y=labels[:2], validation_data=(features, labels[:2]), validation_split=0.5)
    assert given["x"] is features and given["validation_split"] == 0.5 and given["validation_data"][0] is features

    given = model.evaluate(x=texts[:3], y=labels[:3], batch_size=2)
    assert _batches(given["x"]) == [({"a": [1, 2]}, [0, 1]), ({"a": [3]}, [2])] and given["batch_size"] is None
    given = model.evaluate(x=texts, _use_cached_eval_dataset=True)  # Keras' own call from fit: the data kept
    assert given["x"] is texts
    given = model.predict((texts[:2], texts[2:4]), batch_size=1)
    assert _batches(given["x"]) == [{"a": [1], "b": [3]}, {"a": [2], "b": [4]}] and given["batch_size"] is None
    assert tf.nest.map_structure(lambda v: v.numpy().tolist(), model.train_on_batch(texts[:2], labels[:2])["x"]) \
        == {"a": [1, 2]}
    assert model.test_on_batch(texts[:1])["x"]["a"].numpy().tolist() == [1]
    assert model.predict_on_batch(["abc"])["x"]["a"].numpy().tolist() == [3]
    assert model.predict_on_batch(features)["x"] is features

    feature_batches = tf.data.Dataset.from_tensor_slices(features).batch(1)
    given = model.fit(x=feature_batches)
    assert given["x"] is feature_batches and given["epochs"] == 1  # Keras' default epochs
    given = model.fit(x=texts, y=labels, batch_size=10)  # Keras' default: shuffled
    (features_seen, order), = _batches(given["x"])
    assert sorted(order) == list(range(10)) and order != list(range(10))

    plain = _TextModel()
    given = plain.fit(x=texts, y=labels, validation_split=0.2, shuffle=True)
    assert given["x"] is texts and given["validation_split"] == 0.2 and given["shuffle"] is True
    assert plain.predict_on_batch(texts)["x"] is texts and plain.predict(texts)["x"] is texts
    assert plain.fit(x=batched, validation_data=batched)["validation_data"] is batched


def test_the_preprocessor_is_part_of_the_config():
    model = _TextModel(preprocessor=AlbertTextPreprocessor(spm_model_file=SPM, max_seq_length=SEQ,
                                                           do_lower_case=False))
    config = model.get_config()
    assert config["name"] == "calls" and isinstance(config["preprocessor"], dict)
    again = _TextModel(preprocessor=config["preprocessor"])
    assert isinstance(again.preprocessor, AlbertTextPreprocessor)
    assert (again.preprocessor.max_seq_length, again.preprocessor.do_lower_case) == (SEQ, False)
    assert "preprocessor" not in _TextModel().get_config()
