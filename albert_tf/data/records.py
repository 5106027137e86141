"""TFRecord helpers every task reads through, and the pretraining records' spec and reader.

* `shuffled_passes`: an endless, seeded stream of a record file's records, each pass shuffled with its own seed
  (seed + pass), so every iterator yields the same order and a resumed run can skip what it has seen;
* `ordered_batches`: every example once, tagged with its position (`example_index`) and padded with index -1
  examples to a multiple of the global batch, so every replica of every step gets a full batch and the
  predictor (`albert_tf.train.ordered_prediction`) can put the outputs back in file order;
* `unreadable_file`: which of a list of record files is truncated or corrupted (to name it in an error).

Pretraining records:

The records are those of the original's `create_pretraining_data.py` (and of `albert_tf.pretraining_data`): one
`tf.train.Example` per instance with int64 `input_ids`, `input_mask`, `segment_ids`, `token_boundary`
([max_seq_length]), int64 `masked_lm_positions`, `masked_lm_ids` and float `masked_lm_weights`
([max_predictions_per_seq]) and int64 `next_sentence_labels` ([1], the sentence-order label).

`pretraining_dataset` yields batches as the training script wants them: int32 ids (TPUs have no int64), float32
weights, and `next_sentence_labels` of shape [batch] (the original's reader gives [batch, 1]). Before building the
pipeline it reads the first record of the input files and checks the feature lengths against the flags, because
`tf.io.parse_example` reports a mismatch only later, and only as an opaque shape error.
"""

import dataclasses
import json
import logging
import struct

import tensorflow as tf

from albert_tf import fileio
from albert_tf.data import tfrecord_writer
from albert_tf.errors import DataError

INT_FEATURES_SEQ = ("input_ids", "input_mask", "segment_ids", "token_boundary")
INT_FEATURES_PRED = ("masked_lm_positions", "masked_lm_ids")
# Files whose first record `pretraining_dataset` checks (all of them up to this many; the rest are assumed alike).
MAX_FILES_CHECKED = 256


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
    """The record files of a glob, a comma-separated list of globs, or a list of globs: `fileio.expand_globs`
    with one sorted list (`order="sorted"`: a file's index keys the shuffle and online masking).

    Raises:
      DataError: nothing matched ("no pretraining record files matched ..."), or a pattern names a directory.
    """
    return fileio.expand_globs(file_patterns, what=None, order="sorted", kind="pretraining record files")


def first_record(path):
    """The first record of a TFRecord file (bytes), or None if the file holds no record. Raises `DataError` when
    the file is not an uncompressed TFRecord file: a short or oversized frame, or a checksum that does not match
    (never asking the file for more bytes than it holds)."""
    size = tf.io.gfile.stat(path).length
    with tf.io.gfile.GFile(path, "rb") as f:
        header = f.read(12)
        if not header:
            return None
        if len(header) < 12:
            raise DataError(f"{path} is not a TFRecord file (truncated header)")
        (length,) = struct.unpack("<Q", header[:8])
        if struct.unpack("<I", header[8:])[0] != tfrecord_writer.masked_crc32c(header[:8]):
            raise DataError(f"{path} is not an uncompressed TFRecord file (its first length has a wrong checksum)")
        if length > size - 16:  # never ask GFile for more than the file holds (a huge read crashes it)
            raise DataError(f"{path} is not an uncompressed TFRecord file (its first record would be {length} "
                             f"bytes in a file of {size})")
        data, footer = f.read(length), f.read(4)
    if struct.unpack("<I", footer)[0] != tfrecord_writer.masked_crc32c(data):
        raise DataError(f"{path}: the first record's checksum does not match (a damaged file)")
    return data


def has_records(files):
    """Whether any of `files` holds a record (each file's first record read, until one is found)."""
    return any(first_record(path) is not None for path in files)


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
        data = first_record(path)
        if data is None:
            continue
        try:
            example = tf.train.Example.FromString(data)
        except Exception as err:  # pylint: disable=broad-except  (protobuf's DecodeError)
            raise DataError(f"{path} does not hold tf.train.Example records: {err}") from None
        features = example.features.feature
        for name, (length, flag, kind) in expected.items():
            if name not in features:
                raise DataError(f"{path}: records have no feature {name!r}; pretraining records need "
                                 f"{sorted(expected)}")
            feature = features[name]
            if feature.WhichOneof("kind") != kind:
                raise DataError(f"{path}: feature {name!r} is {feature.WhichOneof('kind')}, expected {kind}")
            found = len(getattr(feature, kind).value)
            if found != length:
                hint = f" ({flag}={length}; the file was written with {flag}={found}?)" if flag else ""
                raise DataError(f"{path}: feature {name!r} has length {found} but the reader expects {length}"
                                 f"{hint}")


def _decode_batch(serialized, max_seq_length, max_predictions_per_seq):
    parsed = tf.io.parse_example(serialized, pretraining_feature_spec(max_seq_length, max_predictions_per_seq))
    out = {}
    for name, value in parsed.items():
        out[name] = tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
    out["next_sentence_labels"] = tf.reshape(out["next_sentence_labels"], [-1])
    return out


def pretraining_dataset(file_patterns, max_seq_length, max_predictions_per_seq, batch_size, is_training, seed=None,
                        input_context=None, num_cpu_threads=4, skip_batches=0, masking=None):
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
      skip_batches: batches to skip at the start (a resumed run), before they are parsed.
      masking: optional `albert_tf.data.masking.MaskingConfig` (training with a seed only): the stored masks are
        ignored and new ones drawn on every pass, a pure function of (masking seed, file index among all the
        files, record index in its file, pass number). The record order is the same as without it.

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
    if masking is not None and (not is_training or seed is None):
        raise ValueError("online masking is for training with a seed (evaluation reads the stored masks)")
    if masking is not None:
        from albert_tf.data import masking as online  # pylint: disable=import-outside-toplevel

        if len(files) > online.MAX_FILES:
            raise DataError(f"online masking keys records by file index: at most {online.MAX_FILES} files, got "
                            f"{len(files)}")
    file_ids = list(range(len(files)))  # positions among all the files: online masking keys records by them
    autotune = tf.data.AUTOTUNE
    decode = lambda s: _decode_batch(s, max_seq_length, max_predictions_per_seq)  # noqa: E731
    # Each input pipeline reads its own files, or (fewer files than pipelines) every n-th record of all files.
    shard_records = False
    if input_context is not None and input_context.num_input_pipelines > 1:
        pipelines, index = input_context.num_input_pipelines, input_context.input_pipeline_id
        if len(files) >= pipelines:
            files, file_ids = files[index::pipelines], file_ids[index::pipelines]
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
    # extra iterators; resuming skips the batches already seen), so shuffles never depend on iterator count:
    # pass n over the files is a stateless shuffle keyed by (seed, n), and the record buffer is not reshuffled.
    # The record buffer's shuffle, like every seeded tf.data op, also mixes in TF's global seed, which the
    # runner sets to the same `random_seed`: to reproduce a run's batches outside it, set that seed too.
    if seed is None:
        dataset = tf.data.Dataset.from_tensor_slices(file_names).shuffle(len(files), reshuffle_each_iteration=True)
        dataset = dataset.repeat()
    else:
        def one_pass(n):
            key = tf.stack([tf.constant(seed, tf.int64), n])
            if masking is None:
                return tf.data.Dataset.from_tensor_slices(tf.random.experimental.stateless_shuffle(file_names, key))
            # The same permutation as shuffling the names (the shuffle depends on the key and length only).
            order = tf.random.experimental.stateless_shuffle(tf.range(len(files), dtype=tf.int64), key)
            return tf.data.Dataset.from_tensor_slices((tf.gather(file_names, order),
                                                       tf.gather(tf.constant(file_ids, tf.int64), order),
                                                       tf.fill(tf.shape(order), n)))

        dataset = tf.data.Dataset.counter().flat_map(one_pass)
    dataset = dataset.interleave(_tagged_records if masking is not None else tf.data.TFRecordDataset,
                                 cycle_length=max(1, min(num_cpu_threads, len(files))),
                                 num_parallel_calls=autotune, deterministic=deterministic)
    if shard_records:
        dataset = dataset.shard(pipelines, index)
    if seed is None:
        dataset = dataset.shuffle(1024, reshuffle_each_iteration=True)
    else:
        dataset = dataset.shuffle(1024, seed=seed, reshuffle_each_iteration=False)
    dataset = dataset.batch(batch_size, drop_remainder=True)
    if skip_batches:
        dataset = dataset.skip(skip_batches)
    if masking is None:
        dataset = dataset.map(decode, num_parallel_calls=num_cpu_threads, deterministic=deterministic)
    else:
        # Masking is the pipeline's heaviest step: as many parallel calls as the host's cores allow (the order
        # stays deterministic, and each record's mask is its own).
        dataset = dataset.map(lambda s, f, r, n: online.mask_batch(decode(s), f, r, n, masking),
                              num_parallel_calls=autotune, deterministic=True)
    return dataset.prefetch(autotune)


def _tagged_records(path, file_index, pass_index):
    """A file's records as (serialized, file index, record index in the file, pass number)."""
    return tf.data.Dataset.zip(tf.data.TFRecordDataset(path), tf.data.Dataset.from_tensors(file_index).repeat(),
                               tf.data.Dataset.counter(), tf.data.Dataset.from_tensors(pass_index).repeat())


def shuffled_passes(records, seed, shuffle_buffer):
    """Endless records: pass n over `records` shuffled in a buffer of `shuffle_buffer` with seed + n (the same
    for every iterator); without a seed, reshuffled on every pass."""
    if seed is None:
        return records.shuffle(shuffle_buffer, reshuffle_each_iteration=True).repeat()
    return tf.data.Dataset.counter().flat_map(
        lambda n: records.shuffle(shuffle_buffer, seed=seed + n, reshuffle_each_iteration=False))


def shard_for(records, input_context):
    """The share of `records` an input pipeline reads (every n-th record), or all of them."""
    if input_context is not None and input_context.num_input_pipelines > 1:
        return records.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return records


def ordered_batches(examples, num_examples, global_batch_size, input_context=None, dynamic_padding=False,
                    sequence_features=(), sort_window_batches=64):
    """Every example once, in batches whose outputs `albert_tf.train.ordered_prediction` puts back in order.

    Args:
      examples: a dataset of feature dicts (fixed shapes), in file order.
      num_examples: how many there are (the first `num_examples` are used).
      global_batch_size: examples per step over all replicas; the stream is padded with all-zero examples
        whose `example_index` is -1 to a multiple of it, so every step is full (TPUs need static shapes).
      input_context: a `tf.distribute.InputContext`: this pipeline takes every n-th example, in batches of the
        per-replica size.
      dynamic_padding: within windows of `sort_window_batches` batches, sort by length (the sum of
        `input_mask`) and cut `sequence_features` (padded at their end) to the batch's longest example.
      sequence_features: the [T] features that dynamic padding may cut.
    Returns:
      batches of the features plus int32 `example_index` [batch].
    """
    examples = tf.data.Dataset.zip(examples.take(num_examples), tf.data.Dataset.range(num_examples)).map(
        lambda features, i: {**features, "example_index": tf.cast(i, tf.int32)})
    extra = -num_examples % global_batch_size
    if extra:
        zeros = tf.nest.map_structure(lambda spec: tf.zeros(spec.shape, spec.dtype), examples.element_spec)
        zeros["example_index"] = tf.constant(-1, tf.int32)
        examples = examples.concatenate(tf.data.Dataset.from_tensors(zeros).repeat(extra))
    batch_size, pipelines = global_batch_size, 1
    if input_context is not None:
        examples = shard_for(examples, input_context)
        batch_size = input_context.get_per_replica_batch_size(global_batch_size)
        pipelines = input_context.num_input_pipelines
    num_batches = (num_examples + extra) // (batch_size * pipelines)
    known_length = tf.data.experimental.assert_cardinality(num_batches)
    if not dynamic_padding:
        return examples.batch(batch_size, drop_remainder=True).apply(known_length).prefetch(tf.data.AUTOTUNE)

    def sort_window(batch):
        order = tf.argsort(tf.reduce_sum(batch["input_mask"], axis=1), stable=True)
        return {name: tf.gather(value, order) for name, value in batch.items()}

    def trim(features):
        length = tf.maximum(tf.reduce_sum(features["input_mask"]), 1)
        return {name: value[:length] if name in sequence_features else value for name, value in features.items()}

    window = batch_size * max(int(sort_window_batches), 1)
    examples = examples.batch(window).map(sort_window).unbatch().map(trim)
    shapes = {name: [None] if name in sequence_features else spec.shape
              for name, spec in examples.element_spec.items()}
    return examples.padded_batch(batch_size, padded_shapes=shapes, drop_remainder=True).apply(known_length) \
        .prefetch(tf.data.AUTOTUNE)


def int64_feature(values):
    """A `tf.train.Feature` of int64s, for the feature caches the tasks write."""
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))


def bytes_feature(text):
    """A `tf.train.Feature` holding one UTF-8 string."""
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode("utf-8")]))


def unreadable_file(files):
    """The first of `files` whose records cannot all be read (truncated, corrupted), with TF's reason; or
    (None, None)."""
    for path in files:
        try:
            for _ in tf.data.TFRecordDataset(path).batch(4096):
                pass
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError, tf.errors.NotFoundError) as err:
            return path, err.message.split("\n")[0]
    return None, None


@dataclasses.dataclass
class CachedRecords:
    """A cached record file: its `path`, how many records it holds, the description written beside it
    (`meta`, with the `fingerprint` of what it was made from) and whether this call wrote it."""

    path: str
    num_records: int
    meta: dict
    written: bool


def read_meta(path):
    """The description `cached_records` wrote beside a record file, or None."""
    meta_path = path + ".json"
    if not (tf.io.gfile.exists(path) and tf.io.gfile.exists(meta_path)):
        return None
    try:
        with tf.io.gfile.GFile(meta_path, "r") as f:
            return json.load(f)
    except (ValueError, OSError):
        return None


class _CountingWriter:
    def __init__(self, writer):
        self._writer = writer
        self.count = 0

    def write(self, serialized):
        self._writer.write(serialized)
        self.count += 1


def cached_records(path, key_parts, write_records, what=None):
    """The record file `path`, reused when it was made from `key_parts`, else (re)written.

    The one cache scheme of every task: `<path>.json` beside the records holds the `fingerprint` (a hash of
    `key_parts`: format version, the input file's and tokenizer's sha256, the settings), the number of records
    and `key_parts` themselves. It is written after the records, which are themselves written atomically
    (`fileio.atomic_path`), so a killed run never leaves a cache that looks valid.

    Args:
      path: the record file.
      key_parts: a JSON-serialisable dict of everything the records depend on.
      write_records: callable(writer) writing serialized records with `writer.write`; it may return a dict of
        facts to keep in the description (e.g. conversion statistics).
      what: how to name the file in errors (a flag), default the path.
    Returns:
      a `CachedRecords`.
    """
    key = fileio.fingerprint(key_parts)
    meta = read_meta(path)
    if meta is not None and meta.get("fingerprint") == key:
        logging.info("Reusing %s (%d records)", path, meta["num_records"])
        return CachedRecords(path, meta["num_records"], meta, False)
    if meta is not None:
        logging.warning("%s was written from other data or settings; rebuilding it", path)
    if tf.io.gfile.exists(path + ".json"):
        tf.io.gfile.remove(path + ".json")
    with fileio.atomic_path(path, what) as tmp:  # makes the folder
        with tf.io.TFRecordWriter(tmp) as writer:
            counter = _CountingWriter(writer)
            extra = write_records(counter) or {}
    meta = {"fingerprint": key, "num_records": counter.count, "key": key_parts, **extra}
    fileio.write_json(path + ".json", meta)
    logging.info("Wrote %d records to %s", counter.count, path)
    return CachedRecords(path, counter.count, meta, True)


def tokenizer_fingerprint(tokenizer):
    """What task features depend on in a `FullTokenizer`, for the feature caches' keys (GLUE, SQuAD, RACE): its
    mode, the sha256 of its SentencePiece model (or WordPiece vocabulary) file, its casing and its LaTeX-quote
    rule."""
    path = tokenizer.spm_model_file or tokenizer.vocab_file
    return {"mode": "sentencepiece" if tokenizer.is_sentencepiece else "wordpiece",
            "file_sha256": fileio.file_sha256(path) if path else None, "do_lower_case": bool(tokenizer.do_lower_case),
            "map_latex_quotes": bool(tokenizer.map_latex_quotes)}
