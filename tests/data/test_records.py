"""The pretraining record spec and the tf.data reader, on records written by albert_tf.pretraining_data."""

import hashlib
import inspect
import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import pretraining as pdata
from albert_tf import fileio
from albert_tf.data import masking, records, tfrecord_writer
from albert_tf.errors import DataError
from albert_tf.text.tokenization import FullTokenizer
from tests.helpers import REPO as REPO_ROOT
from tests.helpers import parallel_stage_orders
from tests.helpers import SPM

SAMPLE = os.path.join(REPO_ROOT, "data", "corpus", "sample_text.txt")
SEQ, PRED = 64, 10


@pytest.fixture(scope="module")
def record_files(tmp_path_factory):
    """Two files of records (round-robin) from the BERT sample text, max_seq_length 64."""
    tmp = tmp_path_factory.mktemp("records")
    paths = [str(tmp / "part-0.tfrecord"), str(tmp / "part-1.tfrecord")]
    stats = pdata.create_pretraining_data(SAMPLE, paths, spm_model_file=SPM, config=pdata.PretrainingConfig(
        max_seq_length=SEQ, max_predictions_per_seq=PRED, dupe_factor=4))
    return paths, stats.instances


def plain_parse(paths):
    spec = records.pretraining_feature_spec(SEQ, PRED)
    out = []
    for raw in tf.data.TFRecordDataset(paths):
        out.append({k: v.numpy() for k, v in tf.io.parse_single_example(raw, spec).items()})
    return out


def test_feature_spec_matches_original_reader():
    spec = records.pretraining_feature_spec(128, 20)
    expected = {"input_ids": 128, "input_mask": 128, "segment_ids": 128, "token_boundary": 128,
                "masked_lm_positions": 20, "masked_lm_ids": 20, "masked_lm_weights": 20, "next_sentence_labels": 1}
    assert {k: v.shape[0] for k, v in spec.items()} == expected
    assert all(isinstance(v, tf.io.FixedLenFeature) for v in spec.values())
    assert spec["masked_lm_weights"].dtype == tf.float32
    # The original's input_fn reads min(num_cpu_threads, files) files at once, num_cpu_threads=4 by default.
    assert inspect.signature(records.pretraining_dataset).parameters["num_cpu_threads"].default == 4
    assert all(v.dtype == tf.int64 for k, v in spec.items() if k != "masked_lm_weights")


def test_eval_dataset_reads_everything_in_order(record_files):
    paths, count = record_files
    batch = 8
    dataset = records.pretraining_dataset(paths, SEQ, PRED, batch_size=batch, is_training=False)
    batches = list(dataset)
    assert len(batches) == count // batch  # one pass, remainder dropped
    first = batches[0]
    assert first["input_ids"].dtype == tf.int32 and first["masked_lm_weights"].dtype == tf.float32
    assert first["input_ids"].shape == (batch, SEQ) and first["token_boundary"].shape == (batch, SEQ)
    assert first["masked_lm_positions"].shape == (batch, PRED)
    assert first["next_sentence_labels"].shape == (batch,) and first["next_sentence_labels"].dtype == tf.int32
    expected = plain_parse(paths)
    got = {k: np.concatenate([b[k].numpy() for b in batches]) for k in first}
    for i in range(len(got["input_ids"])):
        for name, value in expected[i].items():
            np.testing.assert_array_equal(got[name][i], value.reshape(got[name][i].shape), err_msg=name)
    assert dataset.element_spec["input_ids"].shape == (batch, SEQ)  # static batch size (TPU)


def test_training_dataset_repeats_and_is_reproducible_with_seed(record_files):
    paths, count = record_files
    batch = 16
    steps = 2 * count // batch + 3  # more than one epoch: it repeats

    def take(seed, **options):
        dataset = records.pretraining_dataset(paths, SEQ, PRED, batch_size=batch, is_training=True, seed=seed,
                                              **options)
        return [b["input_ids"].numpy() for b in dataset.take(steps)]

    first, second, other = take(5), take(5), take(6)
    resumed = take(5, skip_batches=2)  # a resumed run skips the batches already seen, and only those
    assert all((a == b).all() for a, b in zip(first[2:], resumed))
    assert len(first) == steps and all(b.shape == (batch, SEQ) for b in first)
    seeded = records.pretraining_dataset(paths, SEQ, PRED, batch_size=batch, is_training=True, seed=5)
    assert seeded.element_spec["input_ids"].shape == (batch, SEQ)  # static: XLA and TPUs compile one shape
    assert parallel_stage_orders(seeded) and b"false" not in parallel_stage_orders(seeded)  # a seed fixes the order
    assert all((a == b).all() for a, b in zip(first, second))
    assert any((a != b).any() for a, b in zip(first, other))
    # Shuffled: the first batch is not simply the first records in file order.
    in_order = next(iter(records.pretraining_dataset(paths, SEQ, PRED, batch, is_training=False)))["input_ids"]
    assert (first[0] != in_order.numpy()).any()


def test_training_shuffles_records_and_only_a_seed_fixes_their_order(record_files):
    paths, count = record_files
    one = paths[:1]
    in_order = next(iter(records.pretraining_dataset(one, SEQ, PRED, 16, is_training=False)))["input_ids"].numpy()

    def first_batches(dataset):  # each call opens a new iterator
        return [b["input_ids"].numpy() for b in dataset.take(3)]

    seeded = records.pretraining_dataset(one, SEQ, PRED, 16, is_training=True, seed=3)
    a, b = first_batches(seeded), first_batches(seeded)
    assert all((x == y).all() for x, y in zip(a, b)) and (a[0] != in_order).any()
    unseeded = records.pretraining_dataset(one, SEQ, PRED, 16, is_training=True)
    c, d = first_batches(unseeded), first_batches(unseeded)
    assert (c[0] != in_order).any() and any((x != y).any() for x, y in zip(c, d))
    steps = count // 16 + 3  # past the end of the file: it repeats
    assert sum(1 for _ in unseeded.take(steps)) == steps


@pytest.mark.parametrize("use_both_files", [True, False])
def test_input_context_gives_disjoint_shares(record_files, use_both_files):
    paths, _ = record_files
    paths = paths if use_both_files else paths[:1]  # one file: sharded by record instead of by file
    seen = []
    for pipeline in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline,
                                             num_replicas_in_sync=2)
        dataset = records.pretraining_dataset(paths, SEQ, PRED, batch_size=1, is_training=False,
                                              input_context=context)
        seen.append({row.tobytes() for b in dataset for row in b["input_ids"].numpy()})
    assert seen[0] and seen[1] and not seen[0] & seen[1]
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=2)
    training = records.pretraining_dataset(paths, SEQ, PRED, batch_size=4, is_training=True, seed=1,
                                           input_context=context)
    assert all({row.tobytes() for row in b["input_ids"].numpy()} <= seen[1] for b in training.take(5))


def test_length_mismatch_is_a_clear_error(record_files):
    paths, _ = record_files
    with pytest.raises(ValueError, match=r"part-0.tfrecord: feature 'input_ids' has length 64 but the reader "
                                         r"expects 128 \(max_seq_length=128"):
        records.pretraining_dataset(paths, 128, PRED, batch_size=4, is_training=True)
    with pytest.raises(ValueError, match=r"'masked_lm_positions' has length 10 .*\(max_predictions_per_seq=20"):
        records.check_record_lengths(paths, SEQ, 20)
    records.check_record_lengths(paths, SEQ, PRED)  # the right lengths pass


def test_missing_files_and_foreign_files(tmp_path):
    with pytest.raises(ValueError, match="no pretraining record files match.*nothing"):
        records.pretraining_dataset(str(tmp_path / "nothing*"), SEQ, PRED, 4, is_training=False)
    text = tmp_path / "notes.tfrecord"
    text.write_text("this is plain text, not a TFRecord file\n" * 10)
    with pytest.raises(ValueError, match="notes.tfrecord"):
        records.pretraining_dataset(str(text), SEQ, PRED, 4, is_training=False)
    other = tmp_path / "other.tfrecord"
    with tf.io.TFRecordWriter(str(other)) as writer:
        example = tf.train.Example()
        example.features.feature["text"].bytes_list.value.append(b"hello")
        writer.write(example.SerializeToString())
    with pytest.raises(ValueError, match="other.tfrecord: records have no feature 'input_ids'"):
        records.check_record_lengths([str(other)], SEQ, PRED)


def test_patterns_globs_and_lists(record_files):
    paths, _ = record_files
    directory = os.path.dirname(paths[0])
    assert records.expand_file_patterns(os.path.join(directory, "part-*.tfrecord")) == sorted(paths)
    assert records.expand_file_patterns(",".join(reversed(paths))) == sorted(paths)
    assert records.expand_file_patterns([paths[1], paths[0], paths[0]]) == sorted(paths)


def test_first_record_checks_the_frame_checksums(tmp_path):
    path = str(tmp_path / "one.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(b"first record")
        writer.write(b"second")
    assert records.first_record(path) == b"first record"
    data = bytearray(open(path, "rb").read())
    for offset, message in ((14, "checksum does not match"), (9, "wrong checksum")):  # in the record; the length's crc
        damaged = bytearray(data)
        damaged[offset] ^= 0x01
        with open(path, "wb") as f:
            f.write(damaged)
        with pytest.raises(DataError, match=message) as raised:
            records.first_record(path)
        assert path in str(raised.value)
    open(path, "wb").close()
    assert records.first_record(path) is None


def test_first_record_refuses_a_short_header_and_a_length_past_the_end(tmp_path):
    path = tmp_path / "short.tfrecord"
    path.write_bytes(b"\x00" * 11)
    with pytest.raises(DataError, match="short.tfrecord is not a TFRecord file \\(truncated header\\)"):
        records.first_record(str(path))
    framed = tfrecord_writer.frame_records([b"first record"])  # 12 + 12 + 4 bytes
    path.write_bytes(framed[:-1])
    with pytest.raises(DataError, match=r"its first record would be 12 bytes in a file of 27"):
        records.first_record(str(path))


def test_has_records_reads_first_records_until_one_is_found(tmp_path):
    empty, full = tmp_path / "empty.tfrecord", tmp_path / "full.tfrecord"
    empty.write_bytes(b"")
    full.write_bytes(tfrecord_writer.frame_records([b"x"]))
    assert records.has_records([str(empty), str(full)]) is True
    assert records.has_records([str(empty)]) is False


def _example(seq, pred, **overrides):
    """A serialized pretraining record of the right lengths, less `overrides` (name -> list of values)."""
    values = {name: [0] * seq for name in records.INT_FEATURES_SEQ}
    values.update({name: [0] * pred for name in records.INT_FEATURES_PRED})
    values.update(masked_lm_weights=[1.0] * pred, next_sentence_labels=[0])
    values.update(overrides)
    example = tf.train.Example()
    for name, value in values.items():
        kind = example.features.feature[name]
        (kind.float_list if name == "masked_lm_weights" else kind.int64_list).value.extend(value)
    return example.SerializeToString()


@pytest.mark.parametrize("name, value, message", [
    ("masked_lm_weights", [1.0] * 3, r"'masked_lm_weights' has length 3 but the reader expects 10 "
                                     r"\(max_predictions_per_seq=10"),
    ("next_sentence_labels", [0, 1], r"'next_sentence_labels' has length 2 but the reader expects 1$"),
])
def test_each_features_length_is_checked(tmp_path, name, value, message):
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(tfrecord_writer.frame_records([_example(SEQ, PRED, **{name: value})]))
    with pytest.raises(DataError, match=message):
        records.check_record_lengths([str(path)], SEQ, PRED)
    path.write_bytes(tfrecord_writer.frame_records([_example(SEQ, PRED)]))
    records.check_record_lengths([str(path)], SEQ, PRED)  # the right lengths pass


def test_the_first_256_files_are_checked(tmp_path):
    for i in range(256):
        (tmp_path / f"part-{i:03d}.tfrecord").write_bytes(b"")  # empty files pass the check
    bad = tfrecord_writer.frame_records([_example(SEQ, PRED, next_sentence_labels=[0, 1])])
    (tmp_path / "part-256.tfrecord").write_bytes(bad)
    records.pretraining_dataset(str(tmp_path / "part-*.tfrecord"), SEQ, PRED, 4, is_training=False)
    (tmp_path / "part-255.tfrecord").write_bytes(bad)
    with pytest.raises(DataError, match="part-255.tfrecord: feature 'next_sentence_labels'"):
        records.pretraining_dataset(str(tmp_path / "part-*.tfrecord"), SEQ, PRED, 4, is_training=False)


def test_online_masking_is_for_seeded_training_on_at_most_its_files(record_files, monkeypatch, tmp_path):
    paths, _ = record_files
    config = masking.MaskingConfig.from_tokenizer(FullTokenizer(spm_model_file=SPM), 0.15, PRED)
    for is_training, seed in ((False, 1), (True, None)):
        with pytest.raises(ValueError, match="online masking is for training with a seed"):
            records.pretraining_dataset(paths, SEQ, PRED, 4, is_training=is_training, seed=seed, masking=config)
    assert 2**62 + (masking.MAX_FILES << 40) == 2**63  # the first file index whose keys overflow int64
    monkeypatch.setattr(masking, "MAX_FILES", 2)
    online = records.pretraining_dataset(paths, SEQ, PRED, 4, is_training=True, seed=1, masking=config)
    assert next(iter(online))["masked_lm_ids"].shape == (4, PRED)
    assert b"false" not in parallel_stage_orders(online)
    third = tmp_path / "part-2.tfrecord"
    third.write_bytes(open(paths[0], "rb").read())
    with pytest.raises(DataError, match=r"at most 2 files, got 3"):
        records.pretraining_dataset(paths + [str(third)], SEQ, PRED, 4, is_training=True, seed=1, masking=config)


def _windows(lengths, width=8):
    """A dataset of feature dicts whose `input_mask` has `lengths[i]` ones, `input_ids` 1..length then zeros."""
    ids = np.array([[k + 1 if k < n else 0 for k in range(width)] for n in lengths], np.int32)
    return tf.data.Dataset.from_tensor_slices({"input_ids": ids, "input_mask": (ids > 0).astype(np.int32),
                                               "label": np.arange(len(lengths), dtype=np.int32)})


def test_ordered_batches_pad_the_stream_to_full_batches_and_number_every_example():
    lengths = [3, 8, 1, 5, 2, 7, 4, 6, 2, 3]
    batches = records.ordered_batches(_windows(lengths + [5]), 10, 4)  # the eleventh is past num_examples
    assert batches.cardinality().numpy() == 3
    assert batches.element_spec["input_ids"].shape == (4, 8)  # every batch full: a static batch size
    batches = list(batches)
    index = np.concatenate([b["example_index"].numpy() for b in batches])
    assert index.tolist() == list(range(10)) + [-1, -1]
    labels = np.concatenate([b["label"].numpy() for b in batches])
    assert labels[:10].tolist() == list(range(10)) and labels[10:].tolist() == [0, 0]
    assert not np.concatenate([b["input_ids"].numpy() for b in batches])[10:].any()  # padding examples are zeros
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=2)
    share = list(records.ordered_batches(_windows(lengths), 10, 4, input_context=context))
    assert [b["example_index"].numpy().tolist() for b in share] == [[1, 3], [5, 7], [9, -1]]


def test_dynamic_ordered_batches_sort_within_windows_and_cut_to_the_longest():
    lengths = [3, 8, 1, 5, 2, 7, 4, 6, 2, 3]
    batches = list(records.ordered_batches(_windows(lengths), 10, 2, dynamic_padding=True,
                                           sequence_features=("input_ids", "input_mask"), sort_window_batches=2))
    got = [b["example_index"].numpy().tolist() for b in batches]
    # Windows of 4 examples, each sorted by length (stably), then cut into batches of 2.
    assert got == [[2, 0], [3, 1], [4, 6], [7, 5], [8, 9]]
    assert [b["input_ids"].shape[1] for b in batches] == [3, 8, 4, 7, 3]
    dynamic = records.ordered_batches(_windows(lengths), 10, 2, dynamic_padding=True,
                                      sequence_features=("input_ids", "input_mask"), sort_window_batches=2)
    assert dynamic.element_spec["input_ids"].shape.as_list() == [2, None]
    for batch in batches:
        for row, i in zip(batch["input_ids"].numpy(), batch["example_index"].numpy()):
            assert row.tolist() == [k + 1 if k < lengths[i] else 0 for k in range(len(row))]
    # A window of one batch sorts within the batch; a batch of one-piece examples is one position wide.
    single = list(records.ordered_batches(_windows([4, 1, 1, 1]), 4, 2, dynamic_padding=True,
                                          sequence_features=("input_ids", "input_mask"), sort_window_batches=1))
    assert [b["example_index"].numpy().tolist() for b in single] == [[1, 0], [2, 3]]
    assert [b["input_ids"].shape[1] for b in single] == [4, 1]


def test_shuffled_passes_reshuffle_each_pass_alike_for_every_iterator():
    passes = records.shuffled_passes(tf.data.Dataset.range(50), seed=7, shuffle_buffer=50)
    first = [int(x) for x in passes.take(100)]
    assert first == [int(x) for x in passes.take(100)]  # a second iterator: the same stream
    assert sorted(first[:50]) == sorted(first[50:]) == list(range(50)) and first[:50] != first[50:]
    other = [int(x) for x in records.shuffled_passes(tf.data.Dataset.range(50), 8, 50).take(50)]
    assert other != first[:50]
    unseeded = records.shuffled_passes(tf.data.Dataset.range(50), None, 50)
    a, b = [int(x) for x in unseeded.take(100)], [int(x) for x in unseeded.take(100)]
    assert sorted(a[50:]) == list(range(50)) and a != b


def test_shard_for_gives_each_pipeline_every_nth_record():
    records_ds = tf.data.Dataset.range(7)
    assert list(records.shard_for(records_ds, None).as_numpy_iterator()) == list(range(7))
    one = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=1)
    assert list(records.shard_for(records_ds, one).as_numpy_iterator()) == list(range(7))
    second = tf.distribute.InputContext(num_input_pipelines=3, input_pipeline_id=1, num_replicas_in_sync=3)
    assert list(records.shard_for(records_ds, second).as_numpy_iterator()) == [1, 4]


def test_cached_records_are_written_once_reused_and_rebuilt_when_their_key_changes(tmp_path, caplog):
    path = str(tmp_path / "cache" / "train.tf_record")
    calls = []

    def write(values, extra=None):
        def write_records(writer):
            calls.append(values)
            for value in values:
                writer.write(records.bytes_feature(value).SerializeToString())
            return extra
        return write_records

    with caplog.at_level(logging.INFO):
        built = records.cached_records(path, {"version": 1}, write(["a", "b", "c"], {"conversion": {"kept": 3}}))
    assert "rebuilding" not in caplog.text and f"Wrote 3 records to {path}" in caplog.text
    assert (built.path, built.num_records, built.written) == (path, 3, True)
    assert sorted(os.listdir(tmp_path / "cache")) == ["train.tf_record", "train.tf_record.json"]
    assert records.read_meta(path) == built.meta == {"fingerprint": built.meta["fingerprint"], "num_records": 3,
                                                     "key": {"version": 1}, "conversion": {"kept": 3}}
    with caplog.at_level(logging.INFO):
        reused = records.cached_records(path, {"version": 1}, write(["x"]))
    assert (reused.num_records, reused.written, reused.meta) == (3, False, built.meta) and len(calls) == 1
    assert "Reusing " + path + " (3 records)" in caplog.text
    with caplog.at_level(logging.WARNING):
        rebuilt = records.cached_records(path, {"version": 2}, write(["x"]))
    assert "was written from other data or settings; rebuilding it" in caplog.text
    assert (rebuilt.num_records, rebuilt.written) == (1, True) and records.read_meta(path)["key"] == {"version": 2}
    assert [tf.train.Feature.FromString(r.numpy()).bytes_list.value[0] for r in tf.data.TFRecordDataset(path)] == \
        [b"x"]
    os.remove(path + ".json")  # records without their description (a killed run) are not trusted
    assert records.read_meta(path) is None
    assert records.cached_records(path, {"version": 2}, write(["y", "z"])).num_records == 2
    with open(path + ".json", "w", encoding="utf-8") as f:
        f.write("{not json")
    assert records.read_meta(path) is None and records.cached_records(path, {"version": 2}, write(["y"])).written


def test_a_rebuild_killed_before_its_description_leaves_no_cache_for_either_key(tmp_path, monkeypatch):
    path = str(tmp_path / "train.tf_record")

    def one_record(writer):
        writer.write(b"record")

    records.cached_records(path, {"version": 1}, one_record)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(fileio, "write_json", killed)
    with pytest.raises(KeyboardInterrupt):
        records.cached_records(path, {"version": 2}, one_record)  # the records replaced, the description not
    monkeypatch.undo()
    assert records.read_meta(path) is None
    assert records.cached_records(path, {"version": 1}, one_record).written  # not the version 2 records reused


def test_unreadable_file_names_the_first_damaged_file_with_tensorflows_reason(tmp_path):
    good, bad = tmp_path / "good.tfrecord", tmp_path / "bad.tfrecord"
    good.write_bytes(tfrecord_writer.frame_records([b"a", b"b"]))
    bad.write_bytes(tfrecord_writer.frame_records([b"a", b"bbbb"])[:-3])
    assert records.unreadable_file([str(good)]) == (None, None)
    path, reason = records.unreadable_file([str(good), str(bad), str(bad)])
    assert path == str(bad) and reason and "\n" not in reason


def test_int64_features_hold_python_ints():
    assert list(records.int64_feature(np.array([3, -1], np.int64)).int64_list.value) == [3, -1]
    assert list(records.bytes_feature("é").bytes_list.value) == ["é".encode("utf-8")]


def test_the_tokenizer_fingerprint_names_what_features_depend_on():
    with open(SPM, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    lower = records.tokenizer_fingerprint(FullTokenizer(spm_model_file=SPM))
    assert lower == {"mode": "sentencepiece", "file_sha256": sha, "do_lower_case": True, "map_latex_quotes": False}
    assert records.tokenizer_fingerprint(FullTokenizer(spm_model_file=SPM, map_latex_quotes=True)) == \
        {**lower, "map_latex_quotes": True}
    assert records.tokenizer_fingerprint(FullTokenizer(spm_model_file=SPM, do_lower_case=False)) == \
        {**lower, "do_lower_case": False}
