"""Raw text in Keras' `fit`, `evaluate` and `predict`: the tokenizer runs in the `tf.data` pipeline.

`TextInputs` is a mixin put before a task model (`class TrainableClassifier(TextInputs, TrainStep,
AlbertClassifier)`). A model built with a `preprocessor` (an `albert_tf.text.preprocessor.AlbertTextPreprocessor`,
which gives `FullTokenizer`'s ids) takes text wherever Keras takes `x`:

* in memory: a list of strings, a numpy array of `str`/`bytes`/objects, or a string tensor (one text per
  example); for pairs, a tuple `(texts_a, texts_b)` of two such sequences, a numpy array [N, 2], or a list of
  `(text_a, text_b)` tuples (a list of two-text rows is always read as rows, even when it holds two of them);
* a `tf.data.Dataset` of batches: `texts`, `(texts, labels)`, `(texts, labels, sample_weights)`, and for pairs
  `(texts_a, texts_b)`, `((texts_a, texts_b), labels)`, ...

The text is wrapped into a `tf.data.Dataset` (in memory: sliced, shuffled as Keras shuffles arrays when
`shuffle=True`, batched by `batch_size`, 32 by default), the preprocessor is mapped over its batches
(`num_parallel_calls=AUTOTUNE`) and Keras' own `fit`/`evaluate`/`predict` run on the id features. The model's
`call` (and so the function `fit` differentiates) only ever sees `input_ids`/`input_mask`/`segment_ids`. Anything
that is not text (dicts of features, datasets of features) passes through unchanged.

The preprocessor is part of the model's config and its tokenizer file is stored in a `.keras` archive, so
`model.save(...)` + `keras.saving.load_model(...)` gives back a model that takes text.
"""

import keras
import numpy as np
import tensorflow as tf

DEFAULT_BATCH_SIZE = 32


def _is_string(value):
    return isinstance(value, (str, bytes))


def _is_text_array(value):
    """A numpy array or tensor of strings (any rank), or a non-empty list/tuple of strings."""
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "USO" and (value.dtype.kind != "O" or value.size == 0 or
                                              _is_string(value.flat[0]))
    if isinstance(value, (tf.Tensor, tf.RaggedTensor)):
        return value.dtype == tf.string
    return isinstance(value, (list, tuple)) and len(value) > 0 and all(_is_string(v) for v in value)


def _as_texts(value):
    """A [N] string tensor of one sequence of texts (a [N, 1] array loses its last axis)."""
    texts = tf.convert_to_tensor(np.asarray(value, dtype=object) if isinstance(value, (list, tuple)) else value,
                                 tf.string)
    if texts.shape.rank == 2 and texts.shape[-1] == 1:
        texts = tf.squeeze(texts, -1)
    if texts.shape.rank != 1:
        raise ValueError(f"texts must be one-dimensional (one text per example), got shape {texts.shape}")
    return texts


def _pair(texts_a, texts_b):
    if texts_a.shape[0] != texts_b.shape[0]:
        raise ValueError(f"a pair's two sequences of texts differ in length: {texts_a.shape[0]} first texts, "
                         f"{texts_b.shape[0]} second texts")
    return texts_a, texts_b


def in_memory_texts(x):
    """`x` as a [N] string tensor or a pair of them, or None when `x` is not text held in memory."""
    if x is None or isinstance(x, (dict, tf.data.Dataset)):
        return None
    if _is_string(x):
        return _as_texts([x])
    # A list of two-text rows before two sequences: [(a1, b1), (a2, b2)] is two pairs, as an [N, 2] array.
    if isinstance(x, list) and x and all(isinstance(item, (list, tuple)) and len(item) == 2 and
                                         all(_is_string(v) for v in item) for item in x):
        return _as_texts([item[0] for item in x]), _as_texts([item[1] for item in x])  # [(text_a, text_b), ...]
    if isinstance(x, (list, tuple)) and len(x) == 2 and all(_is_text_array(part) for part in x) \
            and not any(_is_string(part) for part in x):
        return _pair(_as_texts(x[0]), _as_texts(x[1]))  # (texts_a, texts_b)
    if _is_text_array(x):
        if getattr(x, "ndim", 1) == 2 and x.shape[-1] == 2:
            return _as_texts(x[:, 0]), _as_texts(x[:, 1])  # an [N, 2] array of pairs
        return _as_texts(x)
    return None


def _is_string_spec(spec):
    return isinstance(spec, (tf.TensorSpec, tf.RaggedTensorSpec)) and spec.dtype == tf.string


def _text_spec_kind(spec):
    """'single' or 'pair' when a dataset element (or its `x`) is text, else None."""
    if _is_string_spec(spec):
        return "single"
    if isinstance(spec, tuple) and len(spec) == 2 and all(_is_string_spec(s) for s in spec):
        return "pair"
    return None


def dataset_text_layout(dataset):
    """How a dataset's elements hold text: ('x', kind) when the element is the text itself, ('first', kind) when
    it is `(text, labels, ...)`, or None when it holds no text (kind: 'single' or 'pair')."""
    spec = dataset.element_spec
    kind = _text_spec_kind(spec)
    layout = ("x", kind) if kind else None
    if layout is None and isinstance(spec, tuple) and spec and _text_spec_kind(spec[0]):
        layout = ("first", _text_spec_kind(spec[0]))
    if layout is not None:
        text_spec = spec if layout[0] == "x" else spec[0]
        first = text_spec if layout[1] == "single" else text_spec[0]
        if first.shape.rank == 0:
            raise ValueError("a dataset of text must yield batches (a [batch] string tensor per element): "
                             "call dataset.batch(batch_size) first")
    return layout


def preprocess_dataset(dataset, preprocessor, layout=None):
    """`dataset` (batches of text, see `dataset_text_layout`) with `preprocessor` mapped over its text."""
    layout = layout or dataset_text_layout(dataset)
    if layout is None:
        return dataset
    preprocessor.ensure_resources()  # the tokenizer's tables are created eagerly and captured by the map

    def encode(texts):
        return preprocessor(tuple(texts) if layout[1] == "pair" else texts)

    if layout == ("x", "pair"):
        fn = lambda text_a, text_b: encode((text_a, text_b))  # noqa: E731 - tf.data unpacks the tuple
    elif layout[0] == "x":
        fn = encode
    else:
        fn = lambda texts, *rest: (encode(texts), *rest)  # noqa: E731
    return dataset.map(fn, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def text_dataset(texts, y=None, sample_weight=None, batch_size=None, shuffle=False):
    """Batches of in-memory text (from `in_memory_texts`) with its labels and sample weights, as Keras would slice
    arrays: a shuffle of all examples each epoch when `shuffle`, then batches of `batch_size` (32 by default)."""
    parts = [texts] + [v for v in (y, sample_weight) if v is not None]
    if sample_weight is not None and y is None:
        raise ValueError("sample_weight needs y")
    element = parts[0] if len(parts) == 1 else tuple(parts)
    dataset = tf.data.Dataset.from_tensor_slices(element)
    if shuffle:
        count = int((texts[0] if isinstance(texts, tuple) else texts).shape[0])
        dataset = dataset.shuffle(max(count, 1), reshuffle_each_iteration=True)
    return dataset.batch(batch_size or DEFAULT_BATCH_SIZE)


def _split_for_validation(texts, y, sample_weight, validation_split):
    """Keras' `validation_split` for in-memory text: the last fraction of the examples, before any shuffle."""
    count = int((texts[0] if isinstance(texts, tuple) else texts).shape[0])
    split_at = int(count * (1.0 - validation_split))
    if split_at in (0, count):
        raise ValueError(f"validation_split={validation_split} leaves no training or no validation examples "
                         f"out of {count}")

    def cut(value, part):
        if value is None:
            return None
        if isinstance(value, tuple):
            return tuple(cut(v, part) for v in value)
        return value[:split_at] if part == 0 else value[split_at:]

    y = None if y is None else np.asarray(y)
    sample_weight = None if sample_weight is None else np.asarray(sample_weight)
    return ((cut(texts, 0), cut(y, 0), cut(sample_weight, 0)),
            (cut(texts, 1), cut(y, 1), cut(sample_weight, 1)))


class TextInputs:
    """Mixin giving a task model a `preprocessor` through which `fit`, `evaluate` and `predict` (and the
    `*_on_batch` methods) take raw text (module docstring). `preprocessor=None` leaves the model as it was."""

    def __init__(self, *args, preprocessor=None, **kwargs):
        super().__init__(*args, **kwargs)
        if isinstance(preprocessor, dict):
            preprocessor = keras.saving.deserialize_keras_object(preprocessor)
        self.preprocessor = preprocessor

    def get_config(self):
        config = super().get_config()
        if self.preprocessor is not None:
            config["preprocessor"] = keras.saving.serialize_keras_object(self.preprocessor)
        return config

    # -- turning text into batches of features ---------------------------------------------------------------------

    def _text_data(self, x, y, sample_weight, batch_size, shuffle=False):
        """(x, y, sample_weight, batch_size) for Keras: a preprocessed dataset (and None, None, None) when x is
        text, else the arguments unchanged."""
        if self.preprocessor is None:
            return x, y, sample_weight, batch_size
        if isinstance(x, tf.data.Dataset):
            layout = dataset_text_layout(x)
            if layout is None:
                return x, y, sample_weight, batch_size
            return preprocess_dataset(x, self.preprocessor, layout), None, None, None
        texts = in_memory_texts(x)
        if texts is None:
            return x, y, sample_weight, batch_size
        dataset = text_dataset(texts, y, sample_weight, batch_size, shuffle)
        return preprocess_dataset(dataset, self.preprocessor), None, None, None

    def _text_batch(self, x):
        """The features of one in-memory batch of text (eagerly), or x itself when it is not text."""
        texts = in_memory_texts(x) if self.preprocessor is not None else None
        return x if texts is None else self.preprocessor(texts)

    # -- Keras' entry points ---------------------------------------------------------------------------------------

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None, validation_split=0.0,
            validation_data=None, shuffle=True, class_weight=None, sample_weight=None, **kwargs):
        if (self.preprocessor is not None and validation_split and validation_data is None
                and in_memory_texts(x) is not None):
            train, validation = _split_for_validation(in_memory_texts(x), y, sample_weight, validation_split)
            (x, y, sample_weight), validation_data, validation_split = train, validation, 0.0
        if self.preprocessor is not None and in_memory_texts(x) is not None:
            x, y, sample_weight, batch_size = self._text_data(x, y, sample_weight, batch_size, shuffle=shuffle)
            shuffle = False  # done above (Keras would warn that it ignores it on a dataset)
        else:
            x, y, sample_weight, batch_size = self._text_data(x, y, sample_weight, batch_size)
        if validation_data is not None and self.preprocessor is not None:
            if isinstance(validation_data, tf.data.Dataset):
                validation_data = preprocess_dataset(validation_data, self.preprocessor)
            else:
                val_x, val_y, val_weight = keras.utils.unpack_x_y_sample_weight(tuple(validation_data))
                if in_memory_texts(val_x) is not None:
                    val_batch = kwargs.get("validation_batch_size") or batch_size
                    validation_data, _, _, _ = self._text_data(val_x, val_y, val_weight, val_batch)
                    kwargs.pop("validation_batch_size", None)
        return super().fit(x=x, y=y, batch_size=batch_size, epochs=epochs, verbose=verbose, callbacks=callbacks,
                           validation_split=validation_split, validation_data=validation_data, shuffle=shuffle,
                           class_weight=class_weight, sample_weight=sample_weight, **kwargs)

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None, **kwargs):
        if not kwargs.get("_use_cached_eval_dataset"):
            x, y, sample_weight, batch_size = self._text_data(x, y, sample_weight, batch_size)
        return super().evaluate(x=x, y=y, batch_size=batch_size, verbose=verbose, sample_weight=sample_weight,
                                **kwargs)

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        x, _, _, batch_size = self._text_data(x, None, None, batch_size)
        return super().predict(x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks)

    def train_on_batch(self, x, y=None, sample_weight=None, **kwargs):
        return super().train_on_batch(self._text_batch(x), y, sample_weight=sample_weight, **kwargs)

    def test_on_batch(self, x, y=None, sample_weight=None, **kwargs):
        return super().test_on_batch(self._text_batch(x), y, sample_weight=sample_weight, **kwargs)

    def predict_on_batch(self, x):
        return super().predict_on_batch(self._text_batch(x))
