"""The original's classifier features and their record layout: `convert_example` (`[CLS] A [SEP] (B [SEP])`,
longest-first pair truncation, zero padding to max_seq_length, via `tokenization.encode_pair`), `example_proto` (the
original's int64 `input_ids`, `input_mask`, `segment_ids`, `label_ids` (float for regression) and
`is_real_example`), `record_spec` to parse them, and `features_from_texts` (the same features as arrays)."""

import numpy as np
import tensorflow as tf

from albert_tf.data import records
from albert_tf.text import tokenization

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")


def convert_example(example, processor, tokenizer, max_seq_length):
    """The original's classifier features of one example: a dict of `input_ids`, `input_mask`, `segment_ids`
    (lists of max_seq_length ints), `label_ids` (label index, or the float score) and `is_real_example` (1)."""
    input_ids, input_mask, segment_ids = tokenization.encode_pair(tokenizer, example.text_a, example.text_b or None,
                                                                 max_seq_length)
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
            "label_ids": processor.label_index(example.label), "is_real_example": 1}


def example_proto(features, regression):
    """The `tf.train.Example` of one example's features (`convert_example`), `label_ids` a float for regression."""
    feature = {name: records.int64_feature(features[name]) for name in FEATURE_NAMES}
    if regression:
        feature["label_ids"] = tf.train.Feature(float_list=tf.train.FloatList(value=[features["label_ids"]]))
    else:
        feature["label_ids"] = records.int64_feature([features["label_ids"]])
    feature["is_real_example"] = records.int64_feature([features["is_real_example"]])
    return tf.train.Example(features=tf.train.Features(feature=feature))


def record_spec(max_seq_length, regression):
    """The `tf.io.parse_example` spec of the classifier records."""
    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64) for name in FEATURE_NAMES}
    spec["label_ids"] = tf.io.FixedLenFeature([], tf.float32 if regression else tf.int64)
    spec["is_real_example"] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def features_from_texts(tokenizer, texts_a, texts_b=None, max_seq_length=128):
    """Numpy int32 arrays `input_ids`, `input_mask`, `segment_ids` [N, max_seq_length] for lists of texts (the
    same features as the records), e.g. for `tf.data.Dataset.from_tensor_slices` in a Keras workflow."""
    texts_b = texts_b if texts_b is not None else [None] * len(texts_a)
    if len(texts_b) != len(texts_a):
        raise ValueError(f"texts_a and texts_b differ in length: {len(texts_a)} vs {len(texts_b)}")
    rows = [tokenization.encode_pair(tokenizer, a, b or None, max_seq_length) for a, b in zip(texts_a, texts_b)]
    arrays = np.asarray(rows, np.int32).reshape(len(rows), 3, max_seq_length)
    return {name: arrays[:, i] for i, name in enumerate(FEATURE_NAMES)}
