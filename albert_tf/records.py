"""Pretraining TFRecords: the feature spec and a tf.data reader.

The records are those of the original's `create_pretraining_data.py` (and of `albert_tf.pretraining_data`): one
`tf.train.Example` per instance with int64 `input_ids`, `input_mask`, `segment_ids`, `token_boundary`
([max_seq_length]), int64 `masked_lm_positions`, `masked_lm_ids` and float `masked_lm_weights`
([max_predictions_per_seq]) and int64 `next_sentence_labels` ([1], the sentence-order label).

`pretraining_dataset` yields batches as the training script wants them: int32 ids (TPUs have no int64), float32
weights, and `next_sentence_labels` of shape [batch] (the original's reader gives [batch, 1]). Before building the
pipeline it reads the first record of the input files and checks the feature lengths against the flags, because
`tf.io.parse_example` reports a mismatch only later, and only as an opaque shape error.
"""

import hashlib
import struct

import tensorflow as tf

INT_FEATURES_SEQ = ("input_ids", "input_mask", "segment_ids", "token_boundary")
INT_FEATURES_PRED = ("masked_lm_positions", "masked_lm_ids")
# Files whose first record `pretraining_dataset` checks (all of them up to this many; the rest are assumed alike).
MAX_FILES_CHECKED = 256


def file_sha256(path):
    """Hex sha256 of a file's bytes, read in 1 MiB blocks (GCS paths too): the fingerprint that keys feature
    caches to the data and tokenizer files they were made from."""
    digest = hashlib.sha256()
    with tf.io.gfile.GFile(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def pretraining_feature_spec(max_seq_length, max_predictions_per_seq):
    """The `tf.io.parse_example` spec of a pretraining record (the original reader's, fixed lengths).

    Returns:
      dict name -> `tf.io.FixedLenFeature`: int64 [max_seq_length] for `input_ids`, `input_mask`, `segment_ids`,
      `token_boundary`; int64 [max_predictions_per_seq] for `masked_lm_positions`, `masked_lm_ids`; float32
      [max_predictions_per_seq] for `masked_lm_weights`; int64 [1] for `next_sentence_labels`.
    """
    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64) for name in INT_FEATURES_SEQ}
    spec.update({name: tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64) for name in INT_FEATURES_PRED})
    spec["masked_lm_weights"] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32)
    spec["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)
    return spec


def expand_file_patterns(file_patterns):
    """Sorted, de-duplicated files matching a glob, a comma-separated list of globs, or a list of globs.

    Raises:
      ValueError: nothing matched; the message names the patterns.
    """
    if isinstance(file_patterns, (str, bytes)):
        file_patterns = file_patterns.decode() if isinstance(file_patterns, bytes) else file_patterns
        file_patterns = file_patterns.split(",")
    patterns = [p.strip() for p in file_patterns if p and p.strip()]
    files = []
    for pattern in patterns:
        files.extend(tf.io.gfile.glob(pattern))
    files = sorted(set(files))
    if not files:
        raise ValueError(f"no pretraining record files match {','.join(patterns) or '(no pattern)'!r}")
    return files


def _first_record(path):
    """The first record of a TFRecord file (bytes), or None if the file holds no record."""
    size = tf.io.gfile.stat(path).length
    with tf.io.gfile.GFile(path, "rb") as f:
        header = f.read(12)
        if not header:
            return None
        if len(header) < 12:
            raise ValueError(f"{path} is not a TFRecord file (truncated header)")
        (length,) = struct.unpack("<Q", header[:8])
        if length > size - 16:  # never ask GFile for more than the file holds (a huge read crashes it)
            raise ValueError(f"{path} is not an uncompressed TFRecord file (its first record would be {length} "
                             f"bytes in a file of {size})")
        return f.read(length)


def check_record_lengths(files, max_seq_length, max_predictions_per_seq):
    """Checks the first record of each file against the spec's features and lengths.

    Raises:
      ValueError: naming the file, the feature, its length and the expected length (and the flag that sets it),
        or saying that the file is not a TFRecord of `tf.train.Example`s. Empty files are accepted.
    """
    expected = {name: (max_seq_length, "max_seq_length", "int64_list") for name in INT_FEATURES_SEQ}
    expected.update({name: (max_predictions_per_seq, "max_predictions_per_seq", "int64_list")
                     for name in INT_FEATURES_PRED})
    expected["masked_lm_weights"] = (max_predictions_per_seq, "max_predictions_per_seq", "float_list")
    expected["next_sentence_labels"] = (1, None, "int64_list")
    for path in files:
        data = _first_record(path)
        if data is None:
            continue
        try:
            example = tf.train.Example.FromString(data)
        except Exception as err:  # pylint: disable=broad-except  (protobuf's DecodeError)
            raise ValueError(f"{path} does not hold tf.train.Example records: {err}") from None
        features = example.features.feature
        for name, (length, flag, kind) in expected.items():
            if name not in features:
                raise ValueError(f"{path}: records have no feature {name!r}; pretraining records need "
                                 f"{sorted(expected)}")
            feature = features[name]
            if feature.WhichOneof("kind") != kind:
                raise ValueError(f"{path}: feature {name!r} is {feature.WhichOneof('kind')}, expected {kind}")
            found = len(getattr(feature, kind).value)
            if found != length:
                hint = f" ({flag}={length}; the file was written with {flag}={found}?)" if flag else ""
                raise ValueError(f"{path}: feature {name!r} has length {found} but the reader expects {length}"
                                 f"{hint}")


def _decode_batch(serialized, max_seq_length, max_predictions_per_seq):
    parsed = tf.io.parse_example(serialized, pretraining_feature_spec(max_seq_length, max_predictions_per_seq))
    out = {}
    for name, value in parsed.items():
        out[name] = tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
    out["next_sentence_labels"] = tf.reshape(out["next_sentence_labels"], [-1])
    return out


def pretraining_dataset(file_patterns, max_seq_length, max_predictions_per_seq, batch_size, is_training, seed=None,
                        input_context=None, num_cpu_threads=4):
    """A `tf.data.Dataset` of pretraining batches.

    Args:
      file_patterns: a glob, comma-separated globs, or a list of globs of TFRecord files.
      max_seq_length, max_predictions_per_seq: the lengths the records were written with (checked, see
        `check_record_lengths`).
      batch_size: the batch size of this dataset. Under `tf.distribute` with `input_context`, pass the per-replica
        size (`input_context.get_per_replica_batch_size(global_batch_size)`).
      is_training: True: files are sharded by `input_context`, shuffled, read `num_cpu_threads` at a time
        (interleaved), records shuffled (buffer 1024) and repeated forever. False: files in order, records in order,
        one pass.
      seed: makes the training order reproducible: every iterator over the dataset yields the same batches (pass n
        over the files is shuffled with seed + n, the record buffer with seed, interleave is deterministic). None:
        reshuffled on every iteration, and interleave may reorder for speed.
      input_context: optional `tf.distribute.InputContext`; each input pipeline reads its own share of the files
        (or of the records, when there are fewer files than pipelines).
      num_cpu_threads: files read in parallel and parsing parallelism.

    Returns:
      Batches (always `drop_remainder=True`, as TPUs need static shapes) of dicts: int32 [batch, max_seq_length]
      `input_ids`, `input_mask`, `segment_ids`, `token_boundary`; int32 [batch, max_predictions_per_seq]
      `masked_lm_positions`, `masked_lm_ids`; float32 [batch, max_predictions_per_seq] `masked_lm_weights`; int32
      [batch] `next_sentence_labels` (1 when the segments are swapped / B is random).

    Raises:
      ValueError: no file matches, or the records' lengths differ from the arguments (naming file and feature).
    """
    files = expand_file_patterns(file_patterns)
    check_record_lengths(files[:MAX_FILES_CHECKED], max_seq_length, max_predictions_per_seq)
    autotune = tf.data.AUTOTUNE
    decode = lambda s: _decode_batch(s, max_seq_length, max_predictions_per_seq)  # noqa: E731
    # Each input pipeline reads its own files, or (fewer files than pipelines) every n-th record of all files.
    shard_records = False
    if input_context is not None and input_context.num_input_pipelines > 1:
        pipelines, index = input_context.num_input_pipelines, input_context.input_pipeline_id
        if len(files) >= pipelines:
            files = files[index::pipelines]
        else:
            shard_records = True
    if not is_training:
        dataset = tf.data.TFRecordDataset(files)
        if shard_records:
            dataset = dataset.shard(pipelines, index)
        dataset = dataset.batch(batch_size, drop_remainder=True)
        return dataset.map(decode, num_parallel_calls=num_cpu_threads).prefetch(autotune)

    deterministic = seed is not None
    file_names = tf.constant(files)
    # Every iterator over the returned dataset must yield the same batches (Keras and tf.distribute may open
    # extra iterators; resuming skips the batches already seen), so shuffles never depend on iterator count or
    # TF's global seed: pass n over the files is a stateless shuffle keyed by (seed, n), and the record buffer
    # is not reshuffled.
    if seed is None:
        dataset = tf.data.Dataset.from_tensor_slices(file_names).shuffle(len(files), reshuffle_each_iteration=True)
        dataset = dataset.repeat()
    else:
        def one_pass(n):
            key = tf.stack([tf.constant(seed, tf.int64), n])
            return tf.data.Dataset.from_tensor_slices(tf.random.experimental.stateless_shuffle(file_names, key))

        dataset = tf.data.Dataset.counter().flat_map(one_pass)
    dataset = dataset.interleave(tf.data.TFRecordDataset, cycle_length=max(1, min(num_cpu_threads, len(files))),
                                 num_parallel_calls=autotune, deterministic=deterministic)
    if shard_records:
        dataset = dataset.shard(pipelines, index)
    if seed is None:
        dataset = dataset.shuffle(1024, reshuffle_each_iteration=True)
    else:
        dataset = dataset.shuffle(1024, seed=seed, reshuffle_each_iteration=False)
    dataset = dataset.batch(batch_size, drop_remainder=True)
    dataset = dataset.map(decode, num_parallel_calls=num_cpu_threads, deterministic=deterministic)
    return dataset.prefetch(autotune)
