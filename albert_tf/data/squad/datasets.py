"""SQuAD feature files as tf.data pipelines: `training_dataset` (endless, seeded shuffled batches, as the
original's input) and `prediction_dataset` (every window once, in order or sorted by length within windows of
batches and cut to the batch's longest)."""

import tensorflow as tf

from albert_tf.data import records
from albert_tf.data.squad.feature_file import feature_spec


def _decode(serialized, max_seq_length, is_training):
    parsed = tf.io.parse_example(serialized, feature_spec(max_seq_length, is_training))
    return {name: tf.cast(value, tf.int32) if name != "unique_ids" else value for name, value in parsed.items()}


def training_dataset(feature_file, max_seq_length, batch_size, seed=12345, input_context=None, shuffle_buffer=100,
                     skip_batches=0):
    """Endless shuffled training batches (dicts of int32 [batch, ...] tensors) from a training feature file.

    As the original's input: records repeated and shuffled in a buffer of 100, batches of `batch_size` with the
    remainder dropped. Every iterator yields the same batches (`records.shuffled_passes`), so a resumed run can
    skip the batches already seen (`skip_batches`).
    """
    records_ds = records.shard_for(tf.data.TFRecordDataset(feature_file), input_context)
    dataset = records.shuffled_passes(records_ds, seed, shuffle_buffer).batch(batch_size, drop_remainder=True)
    if skip_batches:
        dataset = dataset.skip(skip_batches)
    return dataset.map(lambda s: _decode(s, max_seq_length, True), num_parallel_calls=tf.data.AUTOTUNE) \
        .prefetch(tf.data.AUTOTUNE)


SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids", "p_mask")


def _padded(batch, min_length):
    """A batch of windows cut to its longest (padded with zeros), padded on to at least `min_length` positions,
    with `p_mask` 1 on every padding position, as in the features."""
    pad = tf.maximum(min_length - tf.shape(batch["input_ids"])[1], 0)
    batch = {name: tf.pad(value, [[0, 0], [0, pad]]) if name in SEQUENCE_FEATURES else value
             for name, value in batch.items()}
    batch["p_mask"] = tf.where(batch["input_mask"] == 0, 1, batch["p_mask"])
    return batch


def prediction_dataset(feature_file, max_seq_length, global_batch_size, num_features, input_context=None,
                       dynamic_padding=False, min_length=1, window_batches=64):
    """Every window of a prediction feature file once (`records.ordered_batches`): the model inputs plus
    `example_index` (the window's position in the file; -1 for padding).

    With `dynamic_padding`, windows are sorted by length within groups of `window_batches` batches and each batch
    is cut to its longest window (`input_ids`, `input_mask`, `segment_ids`, `p_mask`), but to no fewer than
    `min_length` positions (the v2.0 head takes its `start_n_top`/`end_n_top` best positions); `example_index`
    restores file order (`albert_tf.train.ordered_prediction`).
    """
    windows = tf.data.TFRecordDataset(feature_file).map(lambda s: _decode(s[None], max_seq_length, False)).unbatch()
    batches = records.ordered_batches(windows, num_features, global_batch_size, input_context=input_context,
                                      dynamic_padding=dynamic_padding, sequence_features=SEQUENCE_FEATURES,
                                      sort_window_batches=window_batches)
    if not dynamic_padding:
        return batches
    return batches.map(lambda batch: _padded(batch, min(min_length, max_seq_length)))
