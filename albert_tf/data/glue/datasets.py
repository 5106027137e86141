"""The classifier records as tf.data pipelines: `train_dataset` (shuffled, repeated, seeded) and `eval_dataset` (one
ordered pass, each example carrying its `example_index`).

With `dynamic_padding` (the default) batches are padded to their longest example, not to max_seq_length: training
batches group examples of similar length with `bucketing` (`bucket_by_sequence_length`), else they are the shuffled
order's consecutive examples; evaluation sorts examples by length within windows of batches and the caller restores
the order with `example_index`. With `static_shapes` (TPUs) every batch is padded to max_seq_length and has exactly
batch_size examples; evaluation then appends padding examples (`is_real_example` = 0, `example_index` = -1) to fill
the last batch, as the original did.
"""

import tensorflow as tf

from albert_tf.data import records
from albert_tf.data.glue.features import FEATURE_NAMES, record_spec


def _parse(max_seq_length, regression):
    spec = record_spec(max_seq_length, regression)

    def parse(serialized):
        parsed = tf.io.parse_single_example(serialized, spec)
        return {name: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for name, v in parsed.items()}

    return parse


def _length(features):
    return tf.reduce_sum(features["input_mask"])


def length_buckets(max_seq_length):
    """Bucket boundaries for training batches: steps of 8 tokens up to 64, then growing by about a quarter."""
    boundaries, edge = [], 8
    while edge <= max_seq_length:
        boundaries.append(edge)
        edge = edge + 8 if edge < 64 else int(edge * 1.25) // 8 * 8
    return boundaries


def _trim(features):
    """Cuts the sequence features to the example's length (the padding is all at the end)."""
    length = tf.maximum(_length(features), 1)
    return {name: value[:length] if name in FEATURE_NAMES else value for name, value in features.items()}


def _padded_shapes(features):
    return {name: [None] if name in FEATURE_NAMES else [] for name in features}


def _split_labels(features):
    return {name: features[name] for name in FEATURE_NAMES}, features["label_ids"]


def train_dataset(record_path, max_seq_length, batch_size, regression, seed=None, dynamic_padding=True,
                  bucketing=True, static_shapes=False, input_context=None, shuffle_buffer=10000, skip_batches=0):
    """Training batches `(features, labels)`, shuffled and repeated forever.

    Every iterator yields the same batches for a given `seed` (`records.shuffled_passes`), so a resumed run can
    skip the batches it already trained on (`skip_batches`).

    Args:
      record_path: a classifier TFRecord file (`cached_features`).
      max_seq_length: the length the records were written with.
      batch_size: this pipeline's batch size (per replica under `tf.distribute`).
      regression: float labels (else int32 label indices).
      seed: shuffle seed; None: unseeded.
      dynamic_padding: pad each batch to its longest example (else to max_seq_length).
      bucketing: with dynamic padding, batch examples of similar length together (`bucket_by_sequence_length`,
        which changes which examples share a batch); without it, batches are the shuffled order's consecutive
        examples, as the original's.
      static_shapes: pad to max_seq_length (TPUs); overrides `dynamic_padding`.
      input_context: a `tf.distribute.InputContext`: this pipeline reads every n-th record.
      shuffle_buffer: records in the shuffle buffer.
      skip_batches: batches to skip at the start (a resumed run).
    """
    dataset = records.shuffled_passes(records.shard_for(tf.data.TFRecordDataset(record_path), input_context), seed,
                                      shuffle_buffer)
    dataset = dataset.map(_parse(max_seq_length, regression), num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=True)
    if static_shapes or not dynamic_padding:
        dataset = dataset.batch(batch_size, drop_remainder=True)
    elif not bucketing:
        dataset = dataset.map(_trim).padded_batch(batch_size, padded_shapes=_padded_shapes(dataset.element_spec),
                                                   drop_remainder=True)
    else:
        boundaries = length_buckets(max_seq_length)
        dataset = dataset.map(_trim).bucket_by_sequence_length(
            _length, bucket_boundaries=boundaries, bucket_batch_sizes=[batch_size] * (len(boundaries) + 1),
            padded_shapes=None, pad_to_bucket_boundary=False, drop_remainder=True)
    if skip_batches:
        dataset = dataset.skip(skip_batches)
    return dataset.map(_split_labels).prefetch(tf.data.AUTOTUNE)


def eval_dataset(record_path, max_seq_length, batch_size, regression, num_examples, dynamic_padding=True,
                 input_context=None, window_batches=64):
    """One pass of evaluation/prediction batches (`records.ordered_batches`): dicts of the features plus
    `label_ids`, `is_real_example` and `example_index` (position in the file; -1 for the padding examples that
    fill the last step).

    With `dynamic_padding`, examples are sorted by length within windows of batches and each batch is padded
    to its longest; `example_index` restores file order (`albert_tf.train.ordered_prediction`).
    """
    examples = tf.data.TFRecordDataset(record_path).map(_parse(max_seq_length, regression),
                                                        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return records.ordered_batches(examples, num_examples, batch_size, input_context=input_context,
                                   dynamic_padding=dynamic_padding, sequence_features=FEATURE_NAMES,
                                   sort_window_batches=window_batches)


def model_inputs(batch):
    """The model's inputs from an `eval_dataset` batch."""
    return {name: batch[name] for name in FEATURE_NAMES}
