"""The record layout of a SQuAD feature file: one `tf.train.Example` per window with the original's feature names
(`train_feature_file` / `predict_feature_file`) plus everything post-processing needs, so no pickle side file is
used; `feature_to_example` writes a window, `example_to_feature` and `read_feature_file` read windows back, and
`feature_spec` parses the model inputs."""

import collections

import tensorflow as tf

from albert_tf.data import records
from albert_tf.data.squad.windows import InputFeatures


def feature_to_example(feature, is_training):
    """The `tf.train.Example` of one window: the original's names (`unique_ids`, `input_ids`, `input_mask`,
    `segment_ids`, `p_mask`, and for training `start_positions`, `end_positions`, `is_impossible`) plus what
    post-processing needs (`example_index`, `doc_span_index`, `doc_offset`, `paragraph_len`,
    `tok_start_to_orig_index`, `tok_end_to_orig_index`, `token_is_max_context` over the window's context pieces)."""
    fields = collections.OrderedDict()
    fields["unique_ids"] = records.int64_feature([feature.unique_id])
    fields["input_ids"] = records.int64_feature(feature.input_ids)
    fields["input_mask"] = records.int64_feature(feature.input_mask)
    fields["segment_ids"] = records.int64_feature(feature.segment_ids)
    fields["p_mask"] = records.int64_feature(feature.p_mask)
    if is_training:
        fields["start_positions"] = records.int64_feature([feature.start_position])
        fields["end_positions"] = records.int64_feature([feature.end_position])
        fields["is_impossible"] = records.int64_feature([int(bool(feature.is_impossible))])
    fields["example_index"] = records.int64_feature([feature.example_index])
    fields["doc_span_index"] = records.int64_feature([feature.doc_span_index])
    fields["doc_offset"] = records.int64_feature([feature.doc_offset])
    fields["paragraph_len"] = records.int64_feature([feature.paragraph_len])
    fields["tok_start_to_orig_index"] = records.int64_feature(feature.tok_start_to_orig_index)
    fields["tok_end_to_orig_index"] = records.int64_feature(feature.tok_end_to_orig_index)
    num = len(feature.tok_start_to_orig_index)
    fields["token_is_max_context"] = records.int64_feature(
        [int(feature.token_is_max_context.get(feature.doc_offset + k, False)) for k in range(num)])
    return tf.train.Example(features=tf.train.Features(feature=fields))


def example_to_feature(serialized):
    """`InputFeatures` from a record written by `feature_to_example`."""
    fields = tf.train.Example.FromString(serialized).features.feature

    def ints(name):
        return list(fields[name].int64_list.value) if name in fields else None

    def one(name):
        values = ints(name)
        return values[0] if values else None

    doc_offset = one("doc_offset")
    max_context = ints("token_is_max_context") or []
    is_impossible = one("is_impossible")
    return InputFeatures(
        unique_id=one("unique_ids"), example_index=one("example_index"), doc_span_index=one("doc_span_index"),
        tok_start_to_orig_index=ints("tok_start_to_orig_index"), tok_end_to_orig_index=ints("tok_end_to_orig_index"),
        token_is_max_context={doc_offset + k: bool(v) for k, v in enumerate(max_context)},
        input_ids=ints("input_ids"), input_mask=ints("input_mask"), segment_ids=ints("segment_ids"),
        p_mask=ints("p_mask"), paragraph_len=one("paragraph_len"), doc_offset=doc_offset,
        start_position=one("start_positions"), end_position=one("end_positions"),
        is_impossible=bool(is_impossible) if is_impossible is not None else False)


def read_feature_file(path):
    """All `InputFeatures` of a feature file, in order."""
    return [example_to_feature(record.numpy()) for record in tf.data.TFRecordDataset(path)]


def feature_spec(max_seq_length, is_training):
    """`tf.io.parse_example` spec of the model inputs in a feature file."""
    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
            for name in ("input_ids", "input_mask", "segment_ids", "p_mask")}
    spec["unique_ids"] = tf.io.FixedLenFeature([], tf.int64)
    if is_training:
        for name in ("start_positions", "end_positions", "is_impossible"):
            spec[name] = tf.io.FixedLenFeature([], tf.int64)
    return spec
