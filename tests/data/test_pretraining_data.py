"""Pretraining data creation: behaviour on the shipped corpus, round trip, reproducibility and errors."""

import collections
import dataclasses
import glob
import hashlib
import io
import itertools
import logging
import math
import multiprocessing
import os
import random
import re
import signal
import struct
import tempfile
import time
import types

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import fileio, guard
from albert_tf.data import pretraining as pdata
from albert_tf.data import tfrecord_writer
from albert_tf.data.pretraining import instances, pipeline, shards, writers
from albert_tf.errors import UsageError
from albert_tf.settings import flag_specs
from albert_tf.text import tokenization
from tests.data.original_algorithm import OriginalAlgorithm
from tests.helpers import FIXTURES_DIR
from tests.text.original_tokenization import (TRICKY_LINES, original_ids, original_preprocess_text,
                                              sst2_lines_with_latex_quotes)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS_DIR = os.path.join(REPO_ROOT, "data", "corpus")
SPM = os.path.join(REPO_ROOT, "data", "30k-clean.model")
CLS, SEP, MASK = 2, 3, 4


def corpus_files():
    files = sorted(glob.glob(os.path.join(CORPUS_DIR, "*.txt")))
    assert len(files) >= 5, "data/corpus should hold several books (tools/make_shipped_corpus.py)"
    return files


def parse_all(paths, max_seq_length, slots):
    """All records of `paths` as numpy arrays, parsed with a plain spec like the original reader's."""
    spec = {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "token_boundary": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([slots], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([slots], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([slots], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }
    dataset = tf.data.TFRecordDataset(paths).batch(1 << 20).map(lambda s: tf.io.parse_example(s, spec))
    return {k: v.numpy() for k, v in next(iter(dataset)).items()}


def _bytes(path):
    with open(path, "rb") as f:
        return f.read()


def run(tmp_path, name="out.tfrecord", inputs=None, outputs=1, **kwargs):
    config_args = {k: kwargs.pop(k) for k in list(kwargs)
                   if k in {f.name for f in dataclasses.fields(pdata.PretrainingConfig)}}
    config_args.setdefault("dupe_factor", 1)
    config_args.setdefault("max_seq_length", 128)
    paths = [str(tmp_path / (f"{i}-{name}" if outputs > 1 else name)) for i in range(outputs)]
    kwargs.setdefault("spm_model_file", SPM)
    stats = pdata.create_pretraining_data(inputs or corpus_files(), paths,
                                          config=pdata.PretrainingConfig(**config_args), **kwargs)
    return paths, stats


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """The whole shipped corpus at max_seq_length 128, dupe_factor 2: about 2,000 instances."""
    tmp = tmp_path_factory.mktemp("generated")
    paths, stats = run(tmp, dupe_factor=2, max_seq_length=128, max_predictions_per_seq=20)
    return parse_all(paths, 128, 20), stats


@pytest.fixture(scope="module")
def sp_tokenizer():
    return tokenization.FullTokenizer(spm_model_file=SPM)


def lengths_of(records):
    return records["input_mask"].sum(axis=1)


def unmasked_ids(records):
    ids = records["input_ids"].copy()
    for n in range(len(ids)):
        k = int(records["masked_lm_weights"][n].sum())
        ids[n, records["masked_lm_positions"][n, :k]] = records["masked_lm_ids"][n, :k]
    return ids


# ------------------------------------------------------------------------------------------------------------------
# Statistical properties on the shipped corpus


def test_masked_fraction_and_budget(generated):
    records, stats = generated
    lengths = lengths_of(records)
    counts = records["masked_lm_weights"].sum(axis=1).astype(int)
    budget = np.minimum(20, np.maximum(1, np.array([int(round(n * 0.15)) for n in lengths])))
    assert len(lengths) > 1500 and stats.instances == len(lengths)
    assert (counts <= budget).all()
    assert (counts == budget).mean() > 0.95  # the budget is nearly always filled
    fraction = counts.sum() / lengths.sum()
    assert 0.13 < fraction < 0.155, fraction
    assert stats.masked_positions == counts.sum()


def test_ngram_lengths_follow_one_over_n(generated):
    _, stats = generated
    drawn = np.array(stats.ngram_drawn, dtype=float)
    assert drawn.sum() > 10000
    np.testing.assert_allclose(drawn / drawn.sum(), [6 / 11, 3 / 11, 2 / 11], atol=0.015)
    accepted = np.array(stats.ngram_accepted, dtype=float) / sum(stats.ngram_accepted)
    # Budget trimming and overlaps favour short n-grams a little, but the 1/n shape stays.
    assert accepted[0] > accepted[1] > accepted[2] > 0.08
    assert abs(accepted[1] / accepted[0] - 0.5) < 0.12


def test_ngram_lengths_reversed_without_favor_shorter(tmp_path):
    _, stats = run(tmp_path, inputs=corpus_files()[:2], favor_shorter_ngram=False)
    drawn = np.array(stats.ngram_drawn, dtype=float)
    np.testing.assert_allclose(drawn / drawn.sum(), [2 / 11, 3 / 11, 6 / 11], atol=0.03)


def test_eighty_ten_ten(generated):
    records, _ = generated
    weights = records["masked_lm_weights"] > 0
    rows, slots = np.nonzero(weights)
    placed = records["input_ids"][rows, records["masked_lm_positions"][rows, slots]]
    labels = records["masked_lm_ids"][rows, slots]
    assert len(labels) > 25000
    mask_share = (placed == MASK).mean()
    keep_share = ((placed == labels) & (placed != MASK)).mean()
    random_share = ((placed != labels) & (placed != MASK)).mean()
    assert abs(mask_share - 0.8) < 0.015, mask_share
    assert abs(keep_share - 0.1) < 0.012, keep_share
    assert abs(random_share - 0.1) < 0.012, random_share


def test_sentence_order_labels_balanced(generated):
    records, stats = generated
    share = records["next_sentence_labels"].mean()
    # 50% swaps, plus the single-sentence chunks whose B comes from another document (label 1 as well).
    assert 0.47 < share < 0.60, share
    assert stats.sentence_order_positive == records["next_sentence_labels"].sum()


def test_special_tokens_never_masked(generated):
    records, _ = generated
    ids = unmasked_ids(records)
    lengths = lengths_of(records)
    for n in range(len(ids)):
        k = int(records["masked_lm_weights"][n].sum())
        positions = records["masked_lm_positions"][n, :k]
        seps = np.flatnonzero(ids[n, :lengths[n]] == SEP)
        assert ids[n, 0] == CLS and len(seps) == 2 and seps[1] == lengths[n] - 1
        assert not set(positions.tolist()) & {0, *seps.tolist()}
        assert not set(records["masked_lm_ids"][n, :k].tolist()) & {CLS, SEP}


def test_whole_word_spans_respect_token_boundaries(generated):
    records, _ = generated
    lengths = lengths_of(records)
    ids = unmasked_ids(records)
    checked = 0
    for n in range(len(ids)):
        k = int(records["masked_lm_weights"][n].sum())
        masked = set(records["masked_lm_positions"][n, :k].tolist())
        candidates = [p for p in range(1, lengths[n]) if ids[n, p] not in (CLS, SEP)]
        for prev, cur in zip(candidates, candidates[1:]):
            if records["token_boundary"][n, cur] == 0:  # continues the previous word
                assert (prev in masked) == (cur in masked), (n, prev, cur)
                checked += 1
    assert checked > 1000


def test_token_boundary_marks_word_starts(generated, sp_tokenizer):
    records, _ = generated
    ids = unmasked_ids(records)
    lengths = lengths_of(records)
    for n in range(0, len(ids), 7):
        for p in range(lengths[n]):
            piece = sp_tokenizer.sp_model.id_to_piece(int(ids[n, p]))
            expected = 1 if ids[n, p] in (CLS, SEP) else int(pdata.sentencepiece_word_start(piece))
            assert records["token_boundary"][n, p] == expected


def test_padding_and_segments(generated):
    records, _ = generated
    lengths = lengths_of(records)
    ids = unmasked_ids(records)
    for n in range(len(lengths)):
        length = lengths[n]
        assert (records["input_mask"][n, :length] == 1).all()
        for name in ("input_ids", "input_mask", "segment_ids", "token_boundary"):
            assert (records[name][n, length:] == 0).all(), name
        first_sep = int(np.flatnonzero(ids[n] == SEP)[0])
        assert (records["segment_ids"][n, :first_sep + 1] == 0).all()
        assert (records["segment_ids"][n, first_sep + 1:length] == 1).all()
        assert first_sep >= 2 and length - first_sep >= 3  # both segments hold a token
        k = int(records["masked_lm_weights"][n].sum())
        assert (records["masked_lm_weights"][n, :k] == 1).all()
        assert (np.diff(records["masked_lm_positions"][n, :k]) > 0).all()  # sorted, distinct
        for name in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
            assert (records[name][n, k:] == 0).all(), name
    assert lengths.max() == 128 and (lengths < 100).mean() > 0.03  # full rows and short_seq_prob rows


def test_statistics_match_original_algorithm(tmp_path):
    """Instances agree with the test reference re-implementation of the original algorithm (pure Python, global shuffle,
    unseeded n-gram draws) on the same input: with short_seq_prob=0 the instance count is fixed by the documents
    and must be equal; lengths, labels and mask counts agree statistically."""
    files = []
    for path in corpus_files()[:3]:
        # A trailing blank line: the original does not end a document at the end of a file, this project does.
        copy = tmp_path / os.path.basename(path)
        with open(path, encoding="utf-8") as f:
            copy.write_text(f.read() + "\n\n", encoding="utf-8")
        files.append(str(copy))
    baseline = OriginalAlgorithm(SPM, 128, dupe_factor=2, short_seq_prob=0.0).run(
        files, str(tmp_path / "base.tfrecord"))
    _, ours = run(tmp_path, inputs=files, dupe_factor=2, short_seq_prob=0.0)
    n_base, n_ours = baseline["instances"], ours.instances
    assert n_ours == n_base
    assert abs(ours.instance_tokens / n_ours - baseline["tokens"] / n_base) < 1.0
    assert abs(ours.sentence_order_positive / n_ours - baseline["label1"] / n_base) < 0.06
    assert abs(ours.masked_positions / n_ours - baseline["masked"] / n_base) < 0.2


# ------------------------------------------------------------------------------------------------------------------
# Round trip and determinism


def document_texts(path, tokenizer):
    """Each document of an input file as the text the tokenizer saw, sentences joined by one space."""
    docs, current = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = tokenizer.preprocess(line)
            if not line:
                if current:
                    docs.append(" ".join(current))
                current = []
            else:
                current.append(line)
    if current:
        docs.append(" ".join(current))
    return docs


def test_round_trip_decodes_to_text_segments(tmp_path, sp_tokenizer):
    inputs = [os.path.join(CORPUS_DIR, "sample_text.txt"), os.path.join(CORPUS_DIR, "gutenberg-austen-emma.txt")]
    paths, stats = run(tmp_path, inputs=inputs, max_seq_length=96, max_predictions_per_seq=14, outputs=2)
    spec = {name: tf.io.FixedLenFeature([96], tf.int64)
            for name in ("input_ids", "input_mask", "segment_ids", "token_boundary")}
    spec.update({name: tf.io.FixedLenFeature([14], tf.int64) for name in ("masked_lm_positions", "masked_lm_ids")})
    spec["masked_lm_weights"] = tf.io.FixedLenFeature([14], tf.float32)
    spec["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)
    docs = [doc for path in inputs for doc in document_texts(path, sp_tokenizer)]
    sp_model = sp_tokenizer.sp_model
    checked = in_order = 0
    for path in paths:
        for raw in tf.data.TFRecordDataset(path):
            ex = {k: v.numpy() for k, v in tf.io.parse_single_example(raw, spec).items()}
            ids = ex["input_ids"].copy()
            k = int(ex["masked_lm_weights"].sum())
            ids[ex["masked_lm_positions"][:k]] = ex["masked_lm_ids"][:k]
            length = int(ex["input_mask"].sum())
            seg = ex["segment_ids"][:length]
            a = ids[1:int(np.argmax(seg)) - 1].tolist()
            b = ids[int(np.argmax(seg)):length - 1].tolist()
            if 1 in a or 1 in b:  # <unk> pieces do not decode to their text
                continue
            text_a, text_b = sp_model.decode(a), sp_model.decode(b)
            homes_a = [i for i, d in enumerate(docs) if text_a in d]
            homes_b = [i for i, d in enumerate(docs) if text_b in d]
            assert homes_a and homes_b, (text_a, text_b)
            if ex["next_sentence_labels"][0] == 0:  # B follows A in the same document
                assert any(docs[i].find(text_a) < docs[i].find(text_b) for i in set(homes_a) & set(homes_b))
                in_order += 1
            checked += 1
    assert checked > 0.8 * stats.instances and in_order > 0.3 * checked


def test_byte_identical_across_worker_counts(tmp_path):
    inputs = corpus_files()[:4]
    one, _ = run(tmp_path, "w1.tfrecord", inputs=inputs, outputs=2, num_workers=1, shard_size_mb=0.03)
    two, stats = run(tmp_path, "w2.tfrecord", inputs=inputs, outputs=2, num_workers=2, shard_size_mb=0.03)
    assert stats.shards > 8
    assert [_bytes(p) for p in two] == [_bytes(p) for p in one]
    # Without the global shuffle: records written in this process as they come (no worker function), by forked
    # workers, and by spawned ones (no fork: each builds its tokenizer), the same bytes and the same counts.
    plain, plain_stats = run(tmp_path, "p1.tfrecord", inputs=inputs, outputs=2, num_workers=1, shard_size_mb=0.03,
                             global_shuffle=False)
    forked, forked_stats = run(tmp_path, "p2.tfrecord", inputs=inputs, outputs=2, num_workers=2,
                               shard_size_mb=0.03, global_shuffle=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
        spawned, spawned_stats = run(tmp_path, "p3.tfrecord", inputs=inputs, outputs=2, num_workers=2,
                                     shard_size_mb=0.03, global_shuffle=False)
    for paths in (forked, spawned):
        assert [_bytes(p) for p in paths] == [_bytes(p) for p in plain]
    counts = [dataclasses.replace(s, elapsed_seconds=0) for s in (plain_stats, forked_stats, spawned_stats, stats)]
    # and the counts are those of the shards' records made one by one, each shard counted alone then added up
    config = pdata.PretrainingConfig(dupe_factor=1, max_seq_length=128)
    tables = pdata.TokenTables(tokenization.FullTokenizer(spm_model_file=SPM))
    added = pdata.Stats(files=len(inputs), ngram_drawn=[0] * config.ngram, ngram_accepted=[0] * config.ngram)
    for shard in shards.plan_shards(inputs, 0.03):
        alone = pdata.Stats(ngram_drawn=[0] * config.ngram, ngram_accepted=[0] * config.ngram)
        assert len(list(pdata.shard_records(shard, config, tables, alone))) == alone.instances
        added.merge(alone)
    assert added.instances > 100 and sum(added.ngram_drawn) > 0 and added.shards == stats.shards
    assert counts == [added] * 4
    again, _ = run(tmp_path, "again.tfrecord", inputs=inputs, outputs=2, shard_size_mb=0.03)
    other, _ = run(tmp_path, "seed.tfrecord", inputs=inputs, outputs=2, shard_size_mb=0.03, random_seed=7)
    with open(one[0], "rb") as f1, open(again[0], "rb") as f2, open(other[0], "rb") as f3:
        first = f1.read()
        assert first == f2.read() and first != f3.read()


def test_global_shuffle_spreads_every_shard_over_the_output(tmp_path):
    """With the global shuffle (the default) consecutive records come from shards as in a random order; without
    it the output holds the shards one after the other. The records themselves are the same, and the shuffled
    order is the documented one: the shards' draws permuted by numpy's generator seeded with
    `derive_seed(random_seed, STREAM_INTERLEAVE)`, so the same seed gives the same bytes on every machine."""
    inputs = corpus_files()[:4]
    shuffled, stats = run(tmp_path, "shuffled.tfrecord", inputs=inputs, shard_size_mb=0.03)
    in_order, _ = run(tmp_path, "in_order.tfrecord", inputs=inputs, shard_size_mb=0.03, global_shuffle=False)
    tables = pdata.TokenTables(tokenization.FullTokenizer(spm_model_file=SPM))
    config = pdata.PretrainingConfig(dupe_factor=1, max_seq_length=128)
    shard_of = {}
    for shard in pdata.plan_shards(inputs, 0.03):
        for record in pdata.shard_records(shard, config, tables):
            shard_of[record] = shard.index
    records = {name: [r.numpy() for r in tf.data.TFRecordDataset(path)]
               for name, path in (("shuffled", shuffled[0]), ("in_order", in_order[0]))}
    assert collections.Counter(records["shuffled"]) == collections.Counter(records["in_order"])
    assert len(records["shuffled"]) == stats.instances == len(shard_of)

    def switches(recs):
        labels = [shard_of[r] for r in recs]
        return sum(a != b for a, b in zip(labels, labels[1:]))

    assert switches(records["in_order"]) == stats.shards - 1
    shares = np.bincount([shard_of[r] for r in records["shuffled"]]) / len(records["shuffled"])
    expected = (1 - (shares ** 2).sum()) * (len(records["shuffled"]) - 1)  # a random order's switches
    assert switches(records["shuffled"]) > 0.9 * expected

    by_shard = collections.defaultdict(list)
    for record in records["in_order"]:
        by_shard[shard_of[record]].append(record)
    shard_ids = sorted(by_shard)
    draws = np.repeat(np.arange(len(shard_ids)), [len(by_shard[i]) for i in shard_ids])
    seed = instances.derive_seed(pdata.PretrainingConfig().random_seed, instances.STREAM_INTERLEAVE)
    queues = [iter(by_shard[i]) for i in shard_ids]
    assert records["shuffled"] == [next(queues[k]) for k in np.random.default_rng(seed).permutation(draws)]


def test_randbelow_draws_what_randint_draws():
    """The fast draw consumes the generator exactly as `randint(0, n - 1)` does (the output bytes rely on it)."""
    ours, theirs = random.Random(3), random.Random(3)
    for n in [1, 2, 3, 5, 8, 127, 128, 129, 1000, 30000, 2 ** 31 + 7] * 50:
        assert pdata.randbelow(ours, n) == theirs.randint(0, n - 1)
    assert ours.getstate() == theirs.getstate()


def test_derived_seeds_are_blake2b_of_signed_little_endian_words():
    """Every stream's seed is the documented hash, so records made on another machine or by Beam are the same."""
    for parts in [(0,), (1, 2, 3), (12345, -1, 2 ** 40, 7), (-(2 ** 63), 2 ** 63 - 1)]:
        digest = hashlib.blake2b(struct.pack(f"<{len(parts)}q", *parts), digest_size=8).digest()
        assert instances.derive_seed(*parts) == struct.unpack("<Q", digest)[0]
    assert instances.derive_seed(1, 2) != instances.derive_seed(2, 1)
    tags = [instances.STREAM_DOCUMENT, instances.STREAM_ORDER, instances.STREAM_BUFFER,
            instances.STREAM_GLOBAL_SHUFFLE, instances.STREAM_INTERLEAVE]
    assert len(set(tags)) == len(tags)  # one tag per stream: no two streams share their seeds


def test_local_outputs_need_no_tensorflow(tmp_path):
    """Writing local records never imports TensorFlow (seconds and ~600 MB per process); the records are
    TensorFlow's own format (read back by `parse_all`)."""
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel

    out = tmp_path / "no_tf.tfrecord"
    code = ("import sys\n"
            "from albert_tf.data import pretraining as pdata\n"
            f"pdata.create_pretraining_data([{os.path.join(CORPUS_DIR, 'sample_text.txt')!r}], [{str(out)!r}], "
            f"spm_model_file={SPM!r}, num_workers=2, shard_size_mb=0.001, "
            "config=pdata.PretrainingConfig(max_seq_length=64, dupe_factor=2))\n"
            "print('tensorflow' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True,
                            check=False, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"
    assert len(parse_all([str(out)], 64, 20)["input_ids"]) > 10


def test_remote_writer_appends_worker_frames(tmp_path):
    """Remote outputs go through `tf.io` (here TF's in-memory filesystem); a worker's framed file is appended
    record by record."""
    part = tmp_path / "worker.tfrecord"
    part.write_bytes(tfrecord_writer.frame_records([b"b" * 70, b"", b"c"]))
    writer = writers._record_writer("ram://remote-writer/out.tfrecord")  # pylint: disable=protected-access
    writer.write(b"a")
    writer.append_file(str(part))
    writer.write_frame(tfrecord_writer.frame_records([b"d"]))
    writer.close()
    with pytest.raises(tf.errors.FailedPreconditionError, match="closed"):  # closed for real: a gs:// object is
        writer.write(b"e")  # complete only then
    assert [r.numpy() for r in tf.data.TFRecordDataset("ram://remote-writer/out.tfrecord")] == [
        b"a", b"b" * 70, b"", b"c", b"d"]


def test_shards_keep_documents_whole(tmp_path):
    path = os.path.join(CORPUS_DIR, "gutenberg-austen-emma.txt")
    shards = pdata.plan_shards([path], shard_size_mb=0.01)
    assert len(shards) > 5
    with open(path, "rb") as f:
        data = f.read()
    assert shards[0].start == 0 and shards[-1].end == len(data)
    for prev, cur in zip(shards, shards[1:]):
        assert prev.end == cur.start and data[cur.start - 2:cur.start] == b"\n\n"
    tables = pdata.TokenTables(tokenization.FullTokenizer(spm_model_file=SPM))
    whole = pdata.read_shard_documents(pdata.InputShard(0, 0, 0, path, 0, len(data)), tables)
    parts = [pdata.read_shard_documents(s, tables) for s in shards]
    assert sum(len(p.bounds) for p in parts) == len(whole.bounds)
    joined = np.concatenate([p.document_tokens(i) for p in parts for i in range(len(p.bounds))])
    assert (joined == np.concatenate([whole.document_tokens(i) for i in range(len(whole.bounds))])).all()


def test_outputs_in_directory_shards(tmp_path):
    paths = pdata.output_shard_paths(str(tmp_path / "records"), 3)
    assert [os.path.basename(p) for p in paths] == [
        "pretraining-00000-of-00003.tfrecord", "pretraining-00001-of-00003.tfrecord",
        "pretraining-00002-of-00003.tfrecord"]
    stats = pdata.create_pretraining_data(os.path.join(CORPUS_DIR, "sample_text.txt"), paths, spm_model_file=SPM,
                                          config=pdata.PretrainingConfig(max_seq_length=64, dupe_factor=3,
                                                                         max_predictions_per_seq=10))
    counts = [sum(1 for _ in tf.data.TFRecordDataset(p)) for p in paths]
    assert sum(counts) == stats.instances and max(counts) - min(counts) <= 1  # round-robin
    assert sorted(os.listdir(tmp_path / "records")) == sorted(os.path.basename(p) for p in paths)
    assert pdata.output_shard_paths("out", 1) == [os.path.join("out", "pretraining-00000-of-00001.tfrecord")]
    with pytest.raises(pdata.PretrainingDataError, match="num_output_shards must be at least 1, got 0"):
        pdata.output_shard_paths("out", 0)


def test_remote_outputs_appear_on_commit_replacing_old_ones_and_vanish_on_abort():
    """Outputs on a remote filesystem (TF's in-memory one here) are staged and renamed through `tf.io` as local
    ones are through `os`: nothing under the final name until commit, an old file replaced, no leftovers."""
    base = "ram://atomic-remote-writers"
    paths = [f"{base}/out/a.tfrecord", f"{base}/out/b.tfrecord"]
    tf.io.gfile.makedirs(f"{base}/out")
    with tf.io.TFRecordWriter(paths[0]) as old:
        old.write(b"old")

    def read(path):
        return [r.numpy() for r in tf.data.TFRecordDataset(path)]

    with writers.AtomicRecordWriters(paths) as out:
        for record in (b"1", b"2", b"3"):
            out.write(record)
        assert read(paths[0]) == [b"old"] and not tf.io.gfile.exists(paths[1])
    assert read(paths[0]) == [b"1", b"3"] and read(paths[1]) == [b"2"]
    with writers.AtomicRecordWriters([f"{base}/new/deeper/d.tfrecord"]) as out:  # its folders made on the way
        out.write(b"4")
    assert tf.io.gfile.isdir(f"{base}/new/deeper") and read(f"{base}/new/deeper/d.tfrecord") == [b"4"]
    tf.io.gfile.rmtree(f"{base}/new")
    aborted = writers.AtomicRecordWriters([f"{base}/out/c.tfrecord"])
    aborted.write(b"x")
    aborted.abort()
    left = [os.path.join(root, name) for root, _, names in tf.io.gfile.walk(base) for name in names]
    assert sorted(left) == sorted(paths)


def test_records_frames_and_workers_files_go_round_robin_from_where_the_last_write_left_off(tmp_path):
    """`write`, `write_frame` and `append_framed` share one rotation over the outputs and one count per output."""
    worker = tmp_path / "worker.tfrecord"
    worker.write_bytes(tfrecord_writer.frame_records([b"w1", b"w2", b"w3", b"w4", b"w5"]))
    paths = [str(tmp_path / f"out-{i}.tfrecord") for i in range(3)]
    with writers.AtomicRecordWriters(paths) as out:
        out.write(b"r1")
        for record in (b"f1", b"f2", b"f3"):
            out.write_frame(tfrecord_writer.frame_records([record]))
        out.append_framed(str(worker), 5)
        out.write(b"r2")
        assert out.counts == [4, 3, 3]
    assert [[r.numpy() for r in tf.data.TFRecordDataset(p)] for p in paths] == [
        [b"r1", b"f3", b"w3", b"r2"], [b"f1", b"w1", b"w4"], [b"f2", b"w2", b"w5"]]
    pair = [str(tmp_path / f"pair-{i}.tfrecord") for i in range(2)]
    with writers.AtomicRecordWriters(pair) as out:
        out.append_framed(str(worker), 5)
    assert [[r.numpy() for r in tf.data.TFRecordDataset(p)] for p in pair] == [[b"w1", b"w3", b"w5"], [b"w2", b"w4"]]
    single = str(tmp_path / "single.tfrecord")
    with writers.AtomicRecordWriters([single]) as out:
        out.write_frame(tfrecord_writer.frame_records([b"f"]))
        out.append_framed(str(worker), 5)
        assert out.counts == [6]
    assert [r.numpy() for r in tf.data.TFRecordDataset(single)] == [b"f", b"w1", b"w2", b"w3", b"w4", b"w5"]


def test_writers_clear_stale_partials_and_undo_a_start_that_fails(tmp_path, monkeypatch):
    out = tmp_path / "out"
    (out / fileio.STAGING_NAME).mkdir(parents=True)
    stale = out / fileio.STAGING_NAME / ".a.tfrecord.partial-999999999-abcdefgh"  # a pid no process has
    stale.write_bytes(b"x")
    with writers.AtomicRecordWriters([str(out / "a.tfrecord")]) as records:
        records.write(b"1")
    assert not stale.exists() and (out / "a.tfrecord").exists()
    with pytest.raises(fileio.OutputError, match=f"^cannot write --output_file {re.escape(str(tmp_path))}: it is a "
                                                 "directory$"):
        writers.AtomicRecordWriters([str(tmp_path)], what="--output_file")
    blocker = out / "a.tfrecord"
    with pytest.raises(fileio.OutputError, match=f"^cannot write output {re.escape(str(blocker / 'x' / 'b'))}: "
                                                 f"{re.escape(str(blocker))} is not a directory$"):
        writers.AtomicRecordWriters([str(blocker / "x" / "b")])
    # The second output cannot be opened: the first one's temporary and the folders made for both are removed.
    opened, real = [], writers._record_writer  # pylint: disable=protected-access

    def second_fails(path):
        opened.append(path)
        if len(opened) == 2:
            raise OSError(28, "No space left on device")
        return real(path)

    monkeypatch.setattr(writers, "_record_writer", second_fails)
    with pytest.raises(fileio.OutputError, match=r"^cannot write output .*b\.tfrecord: .*No space left"):
        writers.AtomicRecordWriters([str(tmp_path / "new1" / "a.tfrecord"), str(tmp_path / "new2" / "b.tfrecord")])
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_outputs_named_twice_are_refused_and_a_remote_write_error_names_its_output(tmp_path):
    same = [str(tmp_path / "a.tfrecord"), str(tmp_path / "sub" / ".." / "a.tfrecord")]
    with pytest.raises(pdata.PretrainingDataError, match="output files repeat a name"):
        writers.AtomicRecordWriters(same)
    out = writers.AtomicRecordWriters([str(tmp_path / "b.tfrecord")])
    with pytest.raises(fileio.OutputError, match=r"^cannot write output gs://bucket/b\.tfrecord: .*denied"):
        with out.writing("gs://bucket/b.tfrecord"):  # TensorFlow's errors, as a remote write raises them
            raise tf.errors.PermissionDeniedError(None, None, "access denied")
    out.abort()


def test_a_commit_that_fails_closes_every_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    """A file that cannot be closed (a full disk at the last flush), or published: the error names that output,
    the other files are closed all the same, and no temporary is left."""
    paths = [str(tmp_path / f"out-{i}.tfrecord") for i in range(3)]
    out = writers.AtomicRecordWriters(paths)
    for record in (b"1", b"2", b"3"):
        out.write(record)
    files = list(out._writers)  # pylint: disable=protected-access

    def full(*_):
        raise OSError(28, "No space left on device")

    files[0].close = full
    with pytest.raises(fileio.OutputError, match=f"^cannot write output {re.escape(paths[0])}: .*No space left"):
        out.commit()
    assert all(f._file.closed for f in files[1:])  # pylint: disable=protected-access
    assert os.listdir(tmp_path) == []
    out = writers.AtomicRecordWriters(paths)
    out.write(b"1")
    monkeypatch.setattr(writers, "_rename", full)
    with pytest.raises(fileio.OutputError, match=f"^cannot write output {re.escape(paths[0])}: .*No space left"):
        out.commit()
    assert os.listdir(tmp_path) == []


def test_a_temporary_that_cannot_be_removed_is_named_in_a_warning(tmp_path, monkeypatch, caplog):
    out = writers.AtomicRecordWriters([str(tmp_path / "a.tfrecord")])
    out.write(b"x")

    def refuse(path):
        raise PermissionError(f"cannot remove {path}")

    monkeypatch.setattr(writers, "_remove", refuse)
    with caplog.at_level(logging.WARNING):
        out.abort()
    assert f"could not remove temporary file {out.temp_paths[0]}" in caplog.text


# ------------------------------------------------------------------------------------------------------------------
# Options


def test_random_next_sentence_mode(tmp_path):
    paths, stats = run(tmp_path, inputs=corpus_files()[:2], random_next_sentence=True)
    share = stats.sentence_order_positive / stats.instances
    assert 0.47 < share < 0.65, share


def test_without_whole_word_masking_pieces_mask_alone(tmp_path):
    paths, _ = run(tmp_path, inputs=corpus_files()[:3], do_whole_word_mask=False, dupe_factor=2)
    records = parse_all(paths, 128, 20)
    lengths = lengths_of(records)
    split = 0
    for n in range(len(lengths)):
        k = int(records["masked_lm_weights"][n].sum())
        masked = set(records["masked_lm_positions"][n, :k].tolist())
        for p in range(2, lengths[n] - 1):
            if records["token_boundary"][n, p] == 0 and records["token_boundary"][n, p - 1] == 1:
                split += (p in masked) != (p - 1 in masked)
    assert split > 50  # part of a word masked without the rest


def test_no_masking_when_prob_zero(tmp_path):
    paths, stats = run(tmp_path, inputs=[os.path.join(CORPUS_DIR, "sample_text.txt")], masked_lm_prob=0.0,
                       max_seq_length=64)
    records = parse_all(paths, 64, 20)
    assert stats.masked_positions == 0 and records["masked_lm_weights"].sum() == 0


def test_permutation_doubles_prediction_slots(tmp_path):
    paths, _ = run(tmp_path, inputs=corpus_files()[:1], do_permutation=True, max_predictions_per_seq=12,
                   max_seq_length=64)
    records = parse_all(paths, 64, 24)
    counts = records["masked_lm_weights"].sum(axis=1)
    assert counts.max() > 12 and (counts <= 24).all()


def test_permutation_moves_tokens_among_selected_positions():
    tables = pdata.TokenTables(tokenization.FullTokenizer(spm_model_file=SPM))
    tables.vocab_ids = np.array([tables.mask_id])  # random replacements become [MASK]: only permutations remain
    tables.vocab_size = 1
    tokens = np.arange(100, 300, dtype=np.int32)
    docs = pdata.ShardDocuments(tokens=tokens, word_start=np.ones(200, bool), bounds=[[0, 100, 200]], skipped=0,
                                text_bytes=0)
    config = pdata.PretrainingConfig(max_seq_length=128, do_permutation=True)
    cdf = pdata.ngram_cdf(3)
    moved = 0
    for seed in range(20):
        instance = (0, 60, 100, 162, 0)
        positions, outputs = pdata.mask_instance(docs, instance, config, tables, random.Random(seed), cdf)
        original = {p: int(tokens[p - 1] if p <= 60 else tokens[100 + p - 62]) for p in positions}
        permuted = [p for p, o in zip(positions, outputs) if o not in (tables.mask_id, pdata.KEEP)]
        assert len(positions) - len(permuted) <= 19 and 0 < len(permuted) <= 19
        assert sorted(o for p, o in zip(positions, outputs) if p in permuted) == sorted(original[p] for p in permuted)
        moved += sum(o != original[p] for p, o in zip(positions, outputs) if p in permuted)
    assert moved > 100  # shuffled, not put back where they were


def test_wordpiece_mode(tmp_path):
    words = collections.Counter()
    basic = pytest.importorskip("albert_tf.text.wordpiece").BasicTokenizer(do_lower_case=True)
    with open(os.path.join(CORPUS_DIR, "sample_text.txt"), encoding="utf-8") as f:
        for line in f:
            words.update(basic.tokenize(line))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    for word in sorted(words):
        if len(word) > 6:  # long words only as prefix + "##" suffix: continuation pieces to test
            vocab += [word[:4], "##" + word[4:]]
        else:
            vocab.append(word)
    vocab = list(dict.fromkeys(vocab))
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    out = str(tmp_path / "wp.tfrecord")
    stats = pdata.create_pretraining_data(os.path.join(CORPUS_DIR, "sample_text.txt"), [out],
                                          vocab_file=str(vocab_file),
                                          config=pdata.PretrainingConfig(max_seq_length=64, dupe_factor=5,
                                                                         max_predictions_per_seq=10))
    records = parse_all([out], 64, 10)
    ids = unmasked_ids(records)
    inv = {i: t for i, t in enumerate(vocab)}
    lengths = lengths_of(records)
    continuation = 0
    for n in range(stats.instances):
        k = int(records["masked_lm_weights"][n].sum())
        masked = set(records["masked_lm_positions"][n, :k].tolist())
        for p in range(1, lengths[n]):
            token = inv[int(ids[n, p])]
            expected = 1 if token in ("[CLS]", "[SEP]") else int(not token.startswith("##"))
            assert records["token_boundary"][n, p] == expected
            if token.startswith("##") and inv[int(ids[n, p - 1])] not in ("[CLS]", "[SEP]"):
                assert (p in masked) == (p - 1 in masked)
                continuation += 1
    assert continuation > 100


# ------------------------------------------------------------------------------------------------------------------
# Pieces


def test_normalize_lines_matches_preprocess_text():
    """The records' normalisation is the tokenizer's `preprocess_text`, line by line, and the original's rule (its
    create_pretraining_data runs preprocess_text on each line): on the sample text and the tricky lines."""
    with open(os.path.join(FIXTURES_DIR, "text_sample.txt"), encoding="utf-8") as f:
        sample = f.read().split("\n")
    lines = sample + list(TRICKY_LINES) + [line.upper() for line in TRICKY_LINES]
    text = "\n".join(lines)
    for lower in (True, False):
        normalized = pdata.normalize_lines(text, lower)
        assert len(normalized) == len(lines)
        for line, got in zip(lines, normalized):
            assert got == tokenization.preprocess_text(line, lower=lower) == original_preprocess_text(
                line, lower=lower), (line, lower)
    assert "``quoted'' and ''x'' ` '" in pdata.normalize_lines(text, False)  # quotes kept, as the original keeps them
    assert pdata.normalize_lines("naïve\n\nCafé", True) == ["naive", "", "cafe"]


def test_sst2_lines_with_latex_quotes_get_the_originals_ids(sp_tokenizer):
    """The original's create_pretraining_data: preprocess_text(line, lower=do_lower_case), then encode_pieces."""
    lines = sst2_lines_with_latex_quotes()
    ids, lengths = pdata.TokenTables(sp_tokenizer).lines_to_ids("\n".join(lines))
    expected = [original_ids(sp_tokenizer.sp_model, original_preprocess_text(line, lower=True)) for line in lines]
    assert lengths == [len(e) for e in expected]
    assert ids.tolist() == [i for e in expected for i in e]


def test_lines_to_ids_equal_tokenizer(sp_tokenizer):
    tables = pdata.TokenTables(sp_tokenizer)
    text = "Walter Elliot, born March 1, 1760, married 1,000,000, yes.\n\nNaïve café ＡＢＣ 3,5, ok\n  \n_them_ <x>\n"
    ids, lengths = tables.lines_to_ids(text)
    expected, expected_lengths = [], []
    for line in text.split("\n"):
        if not sp_tokenizer.preprocess(line):
            expected_lengths.append(-1)
            continue
        pieces = sp_tokenizer.tokenize(line)
        expected += sp_tokenizer.convert_tokens_to_ids(pieces)
        expected_lengths.append(len(pieces))
    assert ids.tolist() == expected and lengths == expected_lengths


def test_wordpiece_lines_to_ids_equal_tokenizer_and_blank_lines_break(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\n##s\nsat\n", encoding="utf-8")
    tokenizer = tokenization.FullTokenizer(vocab_file=str(vocab), do_lower_case=True)
    tables = pdata.TokenTables(tokenizer)
    ids, lengths = tables.lines_to_ids("The cats sat\n\n   \ncat")
    assert ids.dtype == np.int32 and ids.tolist() == [5, 6, 7, 8, 6]
    assert lengths == [4, -1, -1, 1]
    ids, lengths = tables.lines_to_ids("\n  ")
    assert ids.dtype == np.int32 and ids.tolist() == [] and lengths == [-1, -1]


def test_sentencepiece_word_start_rule():
    starts = {"\u2581the": True, "ing": False, "'s": True, ",": True, "1": True, "<unk>": True, "[CLS]": False,
              "\u2581": True, "abc": False, "Abc": False, "é": True, "-": True}
    for piece, expected in starts.items():
        assert pdata.sentencepiece_word_start(piece) is expected, piece


def test_truncation_takes_from_the_longer_side():
    truncate = instances._truncate_pair  # pylint: disable=protected-access
    rng = random.Random(0)
    for la, lb, limit in [(50, 10, 40), (10, 50, 40), (30, 30, 41), (30, 31, 41), (5, 5, 20)]:
        a0, a1, b0, b1 = truncate(100, 100 + la, 500, 500 + lb, limit, rng)
        assert 100 <= a0 <= a1 <= 100 + la and 500 <= b0 <= b1 <= 500 + lb
        new_a, new_b = a1 - a0, b1 - b0
        # The same lengths as the original's one-token-at-a-time loop.
        ra, rb = la, lb
        while ra + rb > limit:
            if ra > rb:
                ra -= 1
            else:
                rb -= 1
        assert (new_a, new_b) == (ra, rb)
    # Each removed token comes from the front or the back with probability 1/2.
    fronts = [truncate(0, 60, 100, 110, 40, rng)[0] for _ in range(2000)]  # A loses 30 tokens
    assert abs(np.mean(fronts) - 15) < 0.3 and 0 < min(fronts) and max(fronts) < 30
    fronts = [truncate(0, 10, 100, 160, 40, rng)[2] - 100 for _ in range(2000)]  # B loses 30 tokens
    assert abs(np.mean(fronts) - 15) < 0.3 and 0 < min(fronts) and max(fronts) < 30


def test_short_sequences_aim_at_a_uniform_length_from_2_to_max_num_tokens():
    """With `short_seq_prob`, the original draws the target length `randint(2, max_num_tokens)`: on documents of
    one-token sentences an instance is exactly its target long, so every length 2..10 comes up, equally often."""
    docs = types.SimpleNamespace(bounds=[list(range(0, 41)), list(range(100, 141))])
    config = pdata.PretrainingConfig(max_seq_length=13, max_predictions_per_seq=2, short_seq_prob=1.0)
    lengths = collections.Counter()
    for seed in range(3600):
        a0, a1, b0, b1, _ = instances.document_instances(docs, 0, config, random.Random(seed))[0]
        lengths[(a1 - a0) + (b1 - b0)] += 1
    assert sorted(lengths) == list(range(2, config.max_num_tokens + 1))
    assert all(abs(n - 400) < 5 * 19 for n in lengths.values())  # 400 each, sd 19
    for seed in range(50):  # chunks follow each other: every sentence of the document is read exactly once
        read = collections.Counter()
        for a0, a1, b0, b1, _ in instances.document_instances(docs, 0, config, random.Random(seed)):
            read.update(t for t in [*range(a0, a1), *range(b0, b1)] if t < 100)
        assert sorted(read) == list(range(40)) and set(read.values()) == {1}
    full = pdata.PretrainingConfig(max_seq_length=13, max_predictions_per_seq=2, short_seq_prob=0.0)
    first = [instances.document_instances(docs, 0, full, random.Random(seed))[0] for seed in range(50)]
    assert all((a1 - a0) + (b1 - b0) == 10 for a0, a1, b0, b1, _ in first)


def test_a_random_b_comes_from_another_document_and_aims_at_the_target_length():
    """Next-sentence mode: half the instances take B from a random other document (up to 10 draws, as the
    original), starting at a random sentence and running until A and B reach the target length."""
    docs = types.SimpleNamespace(bounds=[list(range(0, 41)), list(range(100, 1101))])
    config = pdata.PretrainingConfig(max_seq_length=13, max_predictions_per_seq=2, short_seq_prob=1.0,
                                     random_next_sentence=True)
    lengths, same_document, labels = collections.Counter(), 0, collections.Counter()
    for seed in range(3600):
        a0, a1, b0, b1, label = instances.document_instances(docs, 0, config, random.Random(seed))[0]
        labels[label] += 1
        if b0 >= 100:  # B from the other document: the target length, as for B from this one
            lengths[(a1 - a0) + (b1 - b0)] += 1
        elif label:
            same_document += 1
    assert abs(labels[1] - 1800) < 5 * 30 and same_document < 12  # all ten draws this one: 1800 / 2**10 expected
    for seed in range(50):  # the sentences of a chunk not used for A go back: every sentence is read
        read = set()
        for a0, a1, b0, b1, _ in instances.document_instances(docs, 0, config, random.Random(seed)):
            read.update(range(a0, a1))
            read.update(t for t in range(b0, b1) if t < 100)
        assert read == set(range(40))
    # At the other document's end B stops short: exactly what is left of it.
    docs = types.SimpleNamespace(bounds=[list(range(0, 41)), list(range(100, 113))])
    full = dataclasses.replace(config, short_seq_prob=0.0)
    ends = collections.Counter()
    for seed in range(400):
        for a0, a1, b0, b1, _ in instances.document_instances(docs, 0, full, random.Random(seed)):
            if b0 >= 100:
                assert b1 - b0 == min(full.max_num_tokens - (a1 - a0), 112 - b0), (a0, a1, b0, b1)
                ends[b1 == 112] += 1
    assert ends[True] > 100 and ends[False] > 100
    assert sorted(lengths) == list(range(2, config.max_num_tokens + 1))
    expected = labels[1] / len(lengths)
    assert all(abs(n - expected) < 5 * math.sqrt(expected) for n in lengths.values()), lengths

    class Draws(random.Random):
        """Draws 0 every time (document 0: this one), recording each draw's number of bits."""

        def getrandbits(self, k):
            self.widths.append(k)
            return 0

    rng = Draws(0)
    rng.widths = []
    docs = types.SimpleNamespace(bounds=[[0, 5], [10, 15]])
    a0, a1, b0, b1, label = instances.document_instances(docs, 0, pdata.PretrainingConfig(short_seq_prob=0.0), rng)[0]
    # Ten document draws (2 bits: one of two documents), then B's first sentence (1 bit), then no truncation.
    assert rng.widths == [2] * 10 + [1] and (a0, a1, b0, b1, label) == (0, 5, 0, 5, 1)


def test_encoder_matches_protobuf_serialization():
    rng = np.random.default_rng(0)
    features = {"input_ids": rng.integers(0, 1 << 40, (20, 9)), "mask": rng.integers(0, 2, (20, 9)),
                "weights": rng.random((20, 4)).astype(np.float32), "label": rng.integers(0, 300, (20, 1)),
                "empty": np.zeros((20, 0), np.int64)}
    features["input_ids"][0] = (1 << 63) - 1
    for n, record in enumerate(pdata.encode_examples(features)):
        assert record == _protobuf(features, n)


def test_instance_features_lay_out_cls_a_sep_b_sep_as_bert():
    """[CLS] A [SEP] B [SEP] then zeros: segment 0 through the first [SEP], 1 through the second; word starts at the
    text's own tokens and 1 at the special ones; masked positions in slot order, the original ids as labels, KEEP
    leaving the token in place; no instances, no rows."""
    docs = types.SimpleNamespace(tokens=np.arange(10, 20, dtype=np.int32),
                                 word_start=np.array([1, 0, 1, 1, 0, 1, 0, 1, 1, 0], dtype=bool))
    tables = types.SimpleNamespace(cls_id=2, sep_id=3)
    config = pdata.PretrainingConfig(max_seq_length=10, max_predictions_per_seq=3)
    instances = [(0, 3, 5, 7, 1), (6, 7, 8, 10, 0)]  # (a0, a1, b0, b1, label): tokens [a0, a1) and [b0, b1)
    masks = [([2, 5], [4, pdata.KEEP]), ([], [])]
    features = pdata.instance_features(docs, instances, masks, config, tables)
    np.testing.assert_array_equal(features["input_ids"], [[2, 10, 4, 12, 3, 15, 16, 3, 0, 0],
                                                           [2, 16, 3, 18, 19, 3, 0, 0, 0, 0]])
    np.testing.assert_array_equal(features["input_mask"], [[1] * 8 + [0] * 2, [1] * 6 + [0] * 4])
    np.testing.assert_array_equal(features["segment_ids"], [[0] * 5 + [1] * 3 + [0] * 2, [0] * 3 + [1] * 3 + [0] * 4])
    np.testing.assert_array_equal(features["token_boundary"], [[1, 1, 0, 1, 1, 1, 0, 1, 0, 0],
                                                               [1, 0, 1, 1, 0, 1, 0, 0, 0, 0]])
    np.testing.assert_array_equal(features["masked_lm_positions"], [[2, 5, 0], [0, 0, 0]])
    np.testing.assert_array_equal(features["masked_lm_ids"], [[11, 15, 0], [0, 0, 0]])
    np.testing.assert_array_equal(features["masked_lm_weights"], [[1, 1, 0], [0, 0, 0]])
    np.testing.assert_array_equal(features["next_sentence_labels"], [[1], [0]])
    assert {k: v.dtype for k, v in features.items()} == {
        "input_ids": np.int32, "input_mask": np.uint8, "segment_ids": np.uint8, "token_boundary": np.uint8,
        "masked_lm_positions": np.int32, "masked_lm_ids": np.int32, "masked_lm_weights": np.float32,
        "next_sentence_labels": np.int64}
    empty = types.SimpleNamespace(tokens=np.zeros(0, np.int32), word_start=np.zeros(0, bool))
    none = pdata.instance_features(empty, [], [], config, tables)
    assert {k: v.shape for k, v in none.items()} == {
        "input_ids": (0, 10), "input_mask": (0, 10), "segment_ids": (0, 10), "token_boundary": (0, 10),
        "masked_lm_positions": (0, 3), "masked_lm_ids": (0, 3), "masked_lm_weights": (0, 3),
        "next_sentence_labels": (0, 1)}


def _protobuf(features, n):
    """Row `n` of `features` as protobuf serializes a `tf.train.Example` of it (deterministic: keys sorted)."""
    example = tf.train.Example()
    for name, values in features.items():
        feature = example.features.feature[name]
        if values.dtype.kind == "f":
            feature.float_list.value.extend(values[n].tolist())
        else:
            feature.int64_list.value.extend(values[n].tolist())
    return example.SerializeToString(deterministic=True)


def test_encoder_matches_protobuf_at_every_varint_width_and_refuses_what_it_cannot_encode():
    """Values at each edge of a varint's byte count (up to 2**63 - 1), around 2**32 where the encoder widens its
    integers, in rows of one width and of mixed widths, int32 and uint8 arrays, a lone row of huge ids after
    small ones, and no rows; negative values, 1-D arrays and uneven row counts refused naming the feature."""
    edges = sorted({v for k in range(1, 10) for v in ((1 << (7 * k)) - 1, 1 << (7 * k)) if v < 1 << 63} |
                   {(1 << 32) - 1, 1 << 32, (1 << 16) - 1, 1 << 16, (1 << 63) - 1, 0, 1})
    column = np.array(edges, dtype=np.int64)[:, None]
    features = {"edge": column, "mixed": np.stack([column[:, 0], column[::-1, 0], np.zeros(len(edges), np.int64)], 1),
                "narrow": (column % 200).astype(np.int32), "tiny": (column % 3).astype(np.uint8),
                "float": np.linspace(-1, 1, len(edges), dtype=np.float32)[:, None]}
    for n, record in enumerate(pdata.encode_examples(features)):
        assert record == _protobuf(features, n), edges[n]
    for n, record in enumerate(pdata.encode_examples({"edge": column})):  # cached headers, another call
        assert record == _protobuf({"edge": column}, n)
    for top in edges:  # each edge the largest value of its array
        alone = {"x": np.array([[top, 0], [1, top]], dtype=np.int64)}
        assert pdata.encode_examples(alone) == [_protobuf(alone, 0), _protobuf(alone, 1)], top
    for length in (126, 127, 128, 129, 16383, 16384):  # lengths of packed values and messages at varint edges
        wide = {"x": np.zeros((1, length), np.int64), "w": np.zeros((1, length // 4), np.float32)}
        assert pdata.encode_examples(wide) == [_protobuf(wide, 0)], length
    assert pdata.encode_examples({"x": np.zeros((0, 3), np.int64)}) == []
    assert pdata.encode_examples({}) == []
    as_lists = {"x": [[1, 300], [2, 3]], "w": [[0.5], [1.5]]}  # nested lists are taken as arrays
    arrays = {name: np.array(values) for name, values in as_lists.items()}
    assert pdata.encode_examples(as_lists) == [_protobuf(arrays, 0), _protobuf(arrays, 1)]
    with pytest.raises(ValueError, match="negative values"):
        pdata.encode_examples({"x": np.array([[3, -1]])})
    with pytest.raises(ValueError, match=r"feature 'x' must be 2-D \[N, K\], got shape \(3,\)"):
        pdata.encode_examples({"x": np.arange(3)})
    with pytest.raises(ValueError, match="feature 'y' has 2 rows, expected 3"):
        pdata.encode_examples({"x": np.zeros((3, 1), np.int64), "y": np.zeros((2, 1), np.int64)})


def test_short_documents_skipped_and_counted(tmp_path):
    text = tmp_path / "short.txt"
    text.write_text("Hi\n\nThe first sentence is here.\nAnd a second one follows it.\n\nOk\n\n"
                    "Another document starts.\nIt has two lines.\n", encoding="utf-8")
    _, stats = run(tmp_path, inputs=[str(text)], max_seq_length=32, max_predictions_per_seq=5)
    assert stats.skipped_documents == 2 and stats.documents == 2 and stats.instances >= 2


def test_a_document_needs_two_tokens_wherever_it_is_in_the_shard(tmp_path, sp_tokenizer):
    """Documents of one token are skipped and counted, two tokens (on one line or two) are kept: in the middle of
    a shard and as its last document, with or without a newline at the end of the file."""
    pieces = {line: len(sp_tokenizer.tokenize(line)) for line in ("Yes", "the cat", "No")}
    assert pieces == {"Yes": 1, "the cat": 2, "No": 1}
    text = tmp_path / "edges.txt"
    for (ending, kept, skipped), newline in itertools.product((("No", [2, 2, 2], 2), ("the cat", [2, 2, 2, 2], 1)),
                                                            ("", "\n")):
        text.write_text("Yes\n\nthe cat\n\nYes\nNo\n\nthe cat\n\n" + ending + newline, encoding="utf-8")
        shard, = pdata.plan_shards([str(text)], 1.0)
        docs = shards.read_shard_documents(shard, pdata.TokenTables(sp_tokenizer))
        assert [b[-1] - b[0] for b in docs.bounds] == kept and docs.skipped == skipped


# ------------------------------------------------------------------------------------------------------------------
# Errors: clear messages, nothing left behind


def assert_nothing_written(directory):
    assert os.listdir(directory) == [], os.listdir(directory)


@pytest.fixture()
def out_dir(tmp_path):
    directory = tmp_path / "out"
    directory.mkdir()
    return directory


def test_error_no_input_files_matched(out_dir):
    with pytest.raises(pdata.PretrainingDataError, match="no input files matched.*nothing-here"):
        pdata.create_pretraining_data(str(out_dir / "nothing-here*.txt"), [str(out_dir / "x.tfrecord")],
                                      spm_model_file=SPM)
    assert_nothing_written(out_dir)


@pytest.mark.parametrize("content, message", [
    (b"", "is empty"),
    (b"  \n\n \t\n", "no text"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4, "looks binary"),
])
def test_error_bad_input_file(tmp_path, out_dir, content, message):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    with pytest.raises(pdata.PretrainingDataError, match=f"bad.txt.*{message}"):
        pdata.create_pretraining_data(str(bad), [str(out_dir / "x.tfrecord")], spm_model_file=SPM)
    assert_nothing_written(out_dir)


def test_a_report_every_2048_records_by_default_and_the_configs_warnings_logged(tmp_path, caplog):
    seen = []
    with caplog.at_level(logging.WARNING):
        _, stats = run(tmp_path, inputs=corpus_files()[:2], progress=seen.append, dupe_factor=10,
                       max_predictions_per_seq=40, global_shuffle=False)
    assert stats.instances > 2048 and 2048 in [p.instances for p in seen] and len(seen) == stats.shards + 1
    assert "max_predictions_per_seq=40 exceeds the largest masking budget" in caplog.text


def test_how_many_workers_a_run_starts(tmp_path, monkeypatch, caplog):
    """`num_workers` 0 or None: one per CPU; never more than the shards; one for remote inputs (with a warning);
    the pool only when there is more than one worker or the global shuffle has more than one shard to mix."""
    pools = []
    real = pipeline._run_pool

    def run_pool(run, writers, tables, tokenizer_args, config, num_workers, interleave):
        pools.append((len(run.shards), num_workers, interleave))
        return real(run, writers, tables, tokenizer_args, config, num_workers, interleave)

    monkeypatch.setattr(pipeline, "_run_pool", run_pool)
    cpus = [3]
    monkeypatch.setattr(os, "cpu_count", lambda: cpus[0])
    book = corpus_files()[:1]
    remote = "ram://worker-count/book.txt"
    with open(book[0], "rb") as source, tf.io.gfile.GFile(remote, "wb") as target:
        target.write(source.read())
    cases = [({"num_workers": None}, book, 0.01, (7, 3, True)), ({"num_workers": 0}, book, 0.01, (7, 3, True)),
             ({"num_workers": 8}, book, 0.01, (7, 7, True)), ({"num_workers": 2}, book, 1.0, None),
             ({"num_workers": 1, "global_shuffle": False}, book, 0.01, None),
             ({"num_workers": 2, "global_shuffle": False}, book, 0.01, (7, 2, False)),
             ({"num_workers": 2, "global_shuffle": False}, [remote], 0.01, None),
             ({"num_workers": 1, "global_shuffle": False}, [remote], 0.01, None),
             ({"global_shuffle": False}, book, 0.01, None), ({}, book, 0.01, (7, 1, True)),  # one by default
             ({}, corpus_files()[:2], 1.0, (2, 1, True))]  # two shards are mixed too
    for i, (arguments, inputs, shard_size_mb, pool) in enumerate(cases):
        pools.clear()
        caplog.clear()
        run(tmp_path, f"{i}.tfrecord", inputs=inputs, shard_size_mb=shard_size_mb, **arguments)
        assert pools == ([pool] if pool else []), (arguments, inputs)
        warned = "remote input files are read in a single process" in caplog.text
        assert warned == (inputs == [remote] and arguments.get("num_workers", 1) > 1), arguments
    cpus[0] = None  # os.cpu_count() cannot tell: one worker
    pools.clear()
    run(tmp_path, "unknown.tfrecord", inputs=book, shard_size_mb=0.01, num_workers=None, global_shuffle=False)
    assert pools == []


def test_outputs_given_as_one_comma_separated_string_and_an_output_that_is_an_input(tmp_path):
    book = corpus_files()[0]
    first, second = str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")
    stats = pdata.create_pretraining_data(book, f"{first},{second},", spm_model_file=SPM,
                                          config=pdata.PretrainingConfig(dupe_factor=1))
    assert stats.instances > 10 and sorted(os.listdir(tmp_path)) == ["a.tfrecord", "b.tfrecord"]
    with pytest.raises(pdata.PretrainingDataError, match="no output files given"):
        pdata.create_pretraining_data(book, ",", spm_model_file=SPM)
    with pytest.raises(UsageError) as raised:
        pdata.create_pretraining_data(book, [book], spm_model_file=SPM, input_what="--input_file",
                                      output_what="--output_file")
    assert str(raised.value).startswith(f"--output_file {book} would overwrite the input --input_file {book}")


def test_workers_are_forked_where_they_can_be_with_their_files_beside_the_outputs(tmp_path, monkeypatch, caplog):
    """Forked (they inherit the tokenizer; spawned only where there is no fork), and their temporary files in the
    first output's directory's staging folder (the outputs' disk), not the system's temporary folder; the run's
    time is measured."""
    contexts, folders = [], []
    get_context, mkdtemp = multiprocessing.get_context, tempfile.mkdtemp
    monkeypatch.setattr(multiprocessing, "get_context", lambda method=None: contexts.append(method) or get_context(
        method))
    monkeypatch.setattr(tempfile, "mkdtemp", lambda **kwargs: folders.append(kwargs.get("dir")) or mkdtemp(**kwargs))
    out = tmp_path / "records"
    stop = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stop)  # as a script's parent has them (whatever ran before here)
    started = time.monotonic()
    with caplog.at_level(logging.INFO):
        _, stats = run(out, inputs=corpus_files()[:1], outputs=2, num_workers=2, shard_size_mb=0.01)
    took = time.monotonic() - started
    assert not multiprocessing.active_children() and not pipeline._WORKER  # workers ended, their state dropped
    assert f"interleaving the records of {stats.shards} shards (global shuffle)" in caplog.text
    assert not stop & signal.pthread_sigmask(signal.SIG_BLOCK, [])  # Ctrl-C reaches the parent again
    assert contexts == ["fork"] and folders == [fileio.sidecar_dir(out)]
    assert 0 < stats.elapsed_seconds <= took
    assert sorted(os.listdir(out)) == ["0-out.tfrecord", "1-out.tfrecord"]


def test_remote_inputs_are_read_through_gfile_or_the_file_systems_installed(tmp_path, monkeypatch):
    """A remote input (TF's in-memory filesystem here) gives the records its local copy gives; a Beam worker's
    own file systems, once installed, open and size remote paths instead of TensorFlow."""
    with open(os.path.join(CORPUS_DIR, "sample_text.txt"), "rb") as f:
        data = f.read()
    remote = "ram://remote-inputs/sample_text.txt"
    with tf.io.gfile.GFile(remote, "wb") as f:
        f.write(data)
    local = tmp_path / "sample_text.txt"
    local.write_bytes(data)
    config = pdata.PretrainingConfig(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1)
    outputs = []
    for source in (str(local), remote):
        outputs.append(str(tmp_path / f"{len(outputs)}.tfrecord"))
        pdata.create_pretraining_data(source, outputs[-1:], spm_model_file=SPM, config=config)
    with open(outputs[0], "rb") as first, open(outputs[1], "rb") as second:
        assert first.read() == second.read()
    monkeypatch.setattr(shards, "_REMOTE_IO", {})
    opened = []

    def beam_open(path):
        opened.append(path)
        return io.BytesIO(data)

    shards.use_remote_io(beam_open, lambda path: len(data))
    assert shards.file_cuts("beamfs://bucket/sample_text.txt", 1000)[-1] == len(data)
    assert opened and set(opened) == {"beamfs://bucket/sample_text.txt"}
    assert shards.file_cuts(str(local), 1000) == shards.file_cuts("beamfs://bucket/sample_text.txt", 1000)


def _cuts_by_the_rule(data, shard_bytes):
    """The shard rule over a file's lines: from the line holding the byte `shard_bytes - 1` past the previous cut,
    cut after the first blank line that follows it; no cut at the very end."""
    ends = list(itertools.accumulate(len(line) for line in data.splitlines(keepends=True)))
    starts = [0] + ends[:-1]
    cuts = [0]
    while len(data) - cuts[-1] > shard_bytes:
        target = cuts[-1] + shard_bytes - 1
        holder = next(i for i, (a, b) in enumerate(zip(starts, ends)) if a <= target < b)
        blank = next((i for i in range(holder + 1, len(ends)) if not data[starts[i]:ends[i]].strip()), None)
        if blank is None or ends[blank] >= len(data):
            break
        cuts.append(ends[blank])
    return cuts + [len(data)]


def test_shards_are_cut_after_the_first_blank_line_past_each_target(tmp_path):
    rng = random.Random(5)
    path = tmp_path / "docs.txt"
    for trial in range(60):
        lines = [b"\n" if rng.random() < 0.3 else b"w" * rng.randint(1, 12) + b"\n" for _ in range(rng.randint(3, 40))]
        data = b"x\n" + b"".join(lines)
        path.write_bytes(data)
        for shard_bytes in (1, 2, 3, 5, 8, 13, 40):
            assert shards.file_cuts(str(path), shard_bytes) == _cuts_by_the_rule(data, shard_bytes), (trial, data)


def test_binary_input_is_told_by_its_first_64_kib(tmp_path):
    """A NUL byte, or more than 5% of control bytes, in the first 64 KiB; what comes after is read as text."""
    line = b"a sentence of plain text.\n"
    text = line * (65536 // len(line) + 10)
    late = tmp_path / "late.txt"
    late.write_bytes(text[:65536] + b"\x00" + text[65536:])
    shards.check_input_file(str(late))
    early = tmp_path / "early.txt"
    early.write_bytes(text[:65535] + b"\x00" + text[65535:])
    with pytest.raises(pdata.PretrainingDataError, match=r"early\.txt' looks binary \(it contains NUL bytes\)"):
        shards.check_input_file(str(early))
    controls = tmp_path / "controls.txt"  # 6 control bytes in 100: over 5%
    controls.write_bytes(b"\x01" * 6 + b"a" * 94)
    with pytest.raises(pdata.PretrainingDataError, match=r"looks binary \(6 control bytes in the first 100\)"):
        shards.check_input_file(str(controls))
    controls.write_bytes(b"\x01" * 5 + b"a" * 95)  # 5%: text
    shards.check_input_file(str(controls))
    controls.write_bytes(b"\x7f" * 3 + b"\x1f" * 3 + b"\t\r\n\x0b\x0c" * 10 + b"a" * 44)  # DEL counts; tab, CR... not
    with pytest.raises(pdata.PretrainingDataError, match=r"looks binary \(6 control bytes in the first 100\)"):
        shards.check_input_file(str(controls))


def test_error_only_short_documents(tmp_path, out_dir):
    short = tmp_path / "short.txt"
    short.write_text("Hi\n\nYo\n", encoding="utf-8")
    with pytest.raises(pdata.PretrainingDataError, match="no training instances.*2 shorter ones skipped"):
        pdata.create_pretraining_data(str(short), [str(out_dir / "x.tfrecord")], spm_model_file=SPM)
    assert_nothing_written(out_dir)


@pytest.mark.parametrize("config, message", [
    (dict(max_seq_length=4), "max_seq_length=4 is too small"),
    (dict(max_seq_length=64, max_predictions_per_seq=80), "max_predictions_per_seq=80 is larger than the masking"),
    (dict(masked_lm_prob=1.5), "masked_lm_prob"),
    (dict(dupe_factor=0), "dupe_factor"),
])
def test_error_bad_flags(out_dir, config, message):
    with pytest.raises(pdata.PretrainingDataError, match=message):
        pdata.create_pretraining_data(corpus_files()[0], [str(out_dir / "x.tfrecord")], spm_model_file=SPM,
                                      config=pdata.PretrainingConfig(**config))
    assert_nothing_written(out_dir)


def test_warning_when_predictions_exceed_budget():
    warnings = pdata.PretrainingConfig(max_seq_length=128, max_predictions_per_seq=20).validate()
    assert len(warnings) == 1 and "19" in warnings[0]
    assert pdata.PretrainingConfig(max_seq_length=512, max_predictions_per_seq=20).validate() == []


@pytest.mark.parametrize("field, refused, accepted, message", [
    ("max_seq_length", 4, 5, "max_seq_length=4 is too small"),
    ("masked_lm_prob", -0.01, 0.0, "masked_lm_prob must be in [0, 1], got -0.01"),
    ("masked_lm_prob", 1.01, 1.0, "masked_lm_prob must be in [0, 1], got 1.01"),
    ("short_seq_prob", -0.5, 0.0, "short_seq_prob must be in [0, 1], got -0.5"),
    ("short_seq_prob", 1.5, 1.0, "short_seq_prob must be in [0, 1], got 1.5"),
    ("ngram", 0, 1, "ngram must be at least 1, got 0"),
    ("dupe_factor", 0, 1, "dupe_factor must be at least 1, got 0"),
    ("max_predictions_per_seq", 0, 1, "max_predictions_per_seq must be at least 1, got 0"),
])
def test_config_refuses_each_value_just_past_its_bound_and_accepts_the_bound(field, refused, accepted, message):
    """`PretrainingConfig.validate` at each edge (the API path, where no flag bounds ran first); the one line names
    the field and the value."""
    small = dict(max_seq_length=8, max_predictions_per_seq=1)
    with pytest.raises(pdata.PretrainingDataError, match=re.escape(message)):
        pdata.PretrainingConfig(**{**small, field: refused}).validate()
    assert pdata.PretrainingConfig(**{**small, field: accepted}).validate() == []


def test_config_slots_fit_the_maskable_tokens_and_the_budget_is_rounded():
    """At most max_seq_length - 3 slots; the budget round(max_seq_length * masked_lm_prob), at least 1; slots
    doubled by the permutation objective."""
    assert pdata.PretrainingConfig(max_seq_length=10, max_predictions_per_seq=7).max_num_tokens == 7
    assert len(pdata.PretrainingConfig(max_seq_length=10, max_predictions_per_seq=7).validate()) == 1  # a warning
    too_many = r"max_predictions_per_seq=8 is larger .* at most 7 maskable tokens \(and masked_lm_prob=0.15 gives a " \
               r"budget of at most 2\)"
    with pytest.raises(pdata.PretrainingDataError, match=too_many):
        pdata.PretrainingConfig(max_seq_length=10, max_predictions_per_seq=8).validate()
    assert pdata.PretrainingConfig(max_seq_length=10, masked_lm_prob=0.25).max_budget == 2  # 2.5 to even
    assert pdata.PretrainingConfig(max_seq_length=10, masked_lm_prob=0.35).max_budget == 4  # 3.5 to even
    assert pdata.PretrainingConfig(max_seq_length=10, masked_lm_prob=0.01).max_budget == 1
    assert pdata.PretrainingConfig(max_predictions_per_seq=20).num_prediction_slots == 20
    assert pdata.PretrainingConfig(max_predictions_per_seq=20, do_permutation=True).num_prediction_slots == 40
    exact = pdata.PretrainingConfig(max_seq_length=100, max_predictions_per_seq=15, masked_lm_prob=0.15)
    assert exact.validate() == []
    over = dataclasses.replace(exact, max_predictions_per_seq=16).validate()
    assert len(over) == 1 and "max_predictions_per_seq=16 exceeds the largest masking budget" in over[0]
    assert "= 15" in over[0]
    assert dataclasses.replace(exact, max_predictions_per_seq=16, masked_lm_prob=0.0).validate() == []


@pytest.mark.parametrize("flag, refused, accepted, rule", [
    ("max_seq_length", 7, 8, "at least 8"), ("max_predictions_per_seq", -1, 0, "at least 0"),
    ("masked_lm_prob", 1.01, 1.0, "in [0, 1]"), ("short_seq_prob", -0.1, 0.0, "in [0, 1]"),
    ("ngram", 0, 1, "at least 1"), ("dupe_factor", 0, 1, "at least 1"),
])
def test_the_flags_declared_bounds_refuse_the_value_past_each(flag, refused, accepted, rule):
    """create_pretraining_data's flags as the guard checks them before anything runs: one line naming the flag and
    its rule at each declared edge."""
    specs = {name: spec for name, spec in flag_specs(pdata.PretrainingConfig).items() if name == flag}
    with pytest.raises(UsageError, match=f"^--{flag}={re.escape(str(refused))}: must be {re.escape(rule)}$"):
        guard.check_values(specs, {flag: refused})
    guard.check_values(specs, {flag: accepted})


def test_a_config_shared_by_every_shard_cannot_be_changed_by_one():
    config = pdata.PretrainingConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.dupe_factor = 1
    assert hash(config) == hash(pdata.PretrainingConfig())


def test_stats_merge_adds_counters_and_ngram_lists_of_any_length_but_not_the_time():
    first = pdata.Stats(files=1, instances=3, masked_positions=5, ngram_drawn=[4, 1], ngram_accepted=[2],
                        elapsed_seconds=2.0)
    second = pdata.Stats(files=2, instances=4, masked_positions=1, ngram_drawn=[1], ngram_accepted=[1, 1, 3],
                         elapsed_seconds=9.0)
    first.merge(second)
    assert (first.files, first.instances, first.masked_positions) == (3, 7, 6)
    assert first.ngram_drawn == [5, 1] and first.ngram_accepted == [3, 1, 3]
    assert first.elapsed_seconds == 2.0 and second.ngram_accepted == [1, 1, 3]


def test_stats_summary_gives_shares_means_and_rates():
    stats = pdata.Stats(files=2, shards=3, text_bytes=4_000_000, documents=9, skipped_documents=1, instances=8,
                        instance_tokens=100, sentence_order_positive=2, masked_positions=12, ngram_accepted=[3, 1],
                        elapsed_seconds=2.0)
    assert stats.summary().splitlines() == [
        "wrote 8 instances from 9 documents (1 skipped: fewer than 2 tokens), 2 files, 3 shards",
        "sentence-order label 1 (swapped/random B): 25.0%; mean tokens per instance 12.5",
        "mean masked positions per instance 1.50; masked n-gram sizes 1: 75.0%, 2: 25.0%",
        "2.0 s: 4 instances/s, 2.00 MB of text/s"]
    assert pdata.Stats().summary().splitlines()[1:3] == [
        "sentence-order label 1 (swapped/random B): 0.0%; mean tokens per instance 0.0",
        "mean masked positions per instance 0.00; masked n-gram sizes "]
    assert pdata.Stats().summary().splitlines()[0] == (
        "wrote 0 instances from 0 documents (0 skipped: fewer than 2 tokens), 0 files, 0 shards")
    assert pdata.Stats(ngram_accepted=[0, 0]).summary().splitlines()[2].endswith("sizes 1: 0.0%, 2: 0.0%")
    one = pdata.Stats(instances=1, instance_tokens=7, masked_positions=3).summary().splitlines()
    assert one[1].endswith("mean tokens per instance 7.0")
    assert one[2].startswith("mean masked positions per instance 3.00")


def test_error_bad_spm_model(tmp_path, out_dir):
    with pytest.raises(tokenization.TokenizerError, match="missing.model"):
        pdata.create_pretraining_data(corpus_files()[0], [str(out_dir / "x.tfrecord")],
                                      spm_model_file=str(tmp_path / "missing.model"))
    garbage = tmp_path / "garbage.model"
    garbage.write_bytes(b"this is not a sentencepiece model")
    with pytest.raises(tokenization.TokenizerError, match="garbage.model"):
        pdata.create_pretraining_data(corpus_files()[0], [str(out_dir / "x.tfrecord")],
                                      spm_model_file=str(garbage))
    assert_nothing_written(out_dir)


@pytest.mark.parametrize("workers", [1, 2])
def test_interrupted_run_leaves_no_partial_files(out_dir, workers):
    calls = []

    def interrupt(progress):
        calls.append(progress)
        if progress.instances > 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pdata.create_pretraining_data(corpus_files()[:3], [str(out_dir / "a.tfrecord"), str(out_dir / "b.tfrecord")],
                                      spm_model_file=SPM, num_workers=workers, progress=interrupt,
                                      progress_every=50, shard_size_mb=0.05,
                                      config=pdata.PretrainingConfig(max_seq_length=64, dupe_factor=1))
    assert calls
    assert_nothing_written(out_dir)


def test_overwrites_existing_output_atomically(tmp_path):
    target = tmp_path / "existing.tfrecord"
    target.write_bytes(b"old")
    run(tmp_path, "existing.tfrecord", inputs=[os.path.join(CORPUS_DIR, "sample_text.txt")], max_seq_length=64)
    assert target.read_bytes() != b"old"
    assert sorted(os.listdir(tmp_path)) == ["existing.tfrecord"]


@pytest.mark.parametrize("workers, shuffle", [(1, False), (1, True), (2, False)])
def test_progress_reports(tmp_path, workers, shuffle):
    """A report after every shard and whenever the records written pass a multiple of `progress_every`; its
    counts only grow and end at the run's: every shard, document, instance and byte of text."""
    seen, inputs = [], corpus_files()[:2]
    _, stats = run(tmp_path, inputs=inputs, progress=seen.append, progress_every=100, shard_size_mb=0.03,
                   num_workers=workers, global_shuffle=shuffle)
    assert stats.shards > 2 and stats.instances > 200
    last = seen[-1]
    assert last.shards_done == last.shards_total == stats.shards
    assert last.instances == stats.instances and last.documents == stats.documents
    assert last.text_bytes_done == last.text_bytes_total == sum(os.path.getsize(f) for f in inputs)
    for field in ("shards_done", "documents", "instances", "text_bytes_done", "elapsed_seconds"):
        values = [getattr(p, field) for p in seen]
        assert values == sorted(values), field
    assert 0 < seen[0].elapsed_seconds <= last.elapsed_seconds <= stats.elapsed_seconds
    assert len(seen) >= stats.shards + 1
    if workers == 1 and not shuffle:  # records counted one by one: one report per hundred, one per shard
        assert len(seen) == stats.shards + stats.instances // 100
        finished, documents_then = 0, 0
        for report in seen:
            if report.shards_done > finished:
                finished, documents_then = report.shards_done, report.documents
            else:  # within a shard: its documents count already
                assert report.documents > documents_then
    summary = stats.summary()
    assert f"wrote {stats.instances} instances" in summary and "sentence-order label 1" in summary


@pytest.mark.slow
def test_command_line(tmp_path):
    """The absl front end: the original's flags plus --output_dir/--num_output_shards/--num_workers; a clear error
    and exit status 1 for bad input. (Subprocesses: the script's flags would clash with other scripts' in-process.)"""
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel

    script = os.path.join(REPO_ROOT, "create_pretraining_data.py")
    common = [sys.executable, script, f"--spm_model_file={SPM}", "--max_seq_length=64", "--dupe_factor=2",
              "--max_predictions_per_seq=10", "--do_lower_case=true", "--do_whole_word_mask=true",
              "--random_next_sentence=false", "--ngram=3", "--random_seed=7", "--masked_lm_prob=0.15",
              "--short_seq_prob=0.1", "--favor_shorter_ngram=true"]
    good = subprocess.Popen(common + [f"--input_file={CORPUS_DIR}/sample_text.txt",
                                      f"--output_dir={tmp_path / 'records'}", "--num_output_shards=2",
                                      "--num_workers=1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    bad = subprocess.Popen(common + [f"--input_file={tmp_path}/missing-*.txt",
                                     f"--output_file={tmp_path / 'never.tfrecord'}"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    good_out, _ = good.communicate(timeout=300)
    bad_out, _ = bad.communicate(timeout=300)
    assert good.returncode == 0, good_out
    assert "wrote" in good_out and "sentence-order label 1" in good_out
    written = sorted(os.listdir(tmp_path / "records"))
    assert written == ["pretraining-00000-of-00002.tfrecord", "pretraining-00001-of-00002.tfrecord", "settings.json"]
    records = parse_all([str(tmp_path / "records" / name) for name in written[:2]], 64, 10)
    assert len(records["input_ids"]) > 20
    assert bad.returncode == 1 and "error: no input files matched" in bad_out, bad_out
    assert not os.path.exists(tmp_path / "never.tfrecord")


def test_record_writers_refuse_a_protected_input_before_opening_any_output(tmp_path):
    """The TFRecord writers rename their own temporaries, so they check every output against the inputs of the
    run in progress (`fileio.inputs_protected`) before the first is opened."""
    from albert_tf.errors import UsageError  # pylint: disable=import-outside-toplevel

    kept = tmp_path / "b.tfrecord"
    kept.write_text("the user's records")
    with fileio.inputs_protected([("--input_file", str(kept))]), \
            pytest.raises(UsageError, match=r"^--output_file .*b.tfrecord would overwrite the input --input_file"):
        writers.AtomicRecordWriters([str(tmp_path / "a.tfrecord"), str(kept)], what="--output_file")
    assert os.listdir(tmp_path) == ["b.tfrecord"] and kept.read_text() == "the user's records"


@pytest.mark.parametrize("a_starts, b_starts, orphans", [
    ([0, 0, 1, 1, 0, 1], [0, 1, 1], {1, 2, 8}),  # both segments begin with "##" pieces cut from their word
    ([1, 0, 1, 1, 0, 1], [0, 1, 1], {8}),  # only B's: it would join A's last word across [SEP]
    ([0, 1, 1, 0, 1, 1], [1, 1, 0], {1}),  # only A's
    ([1, 0, 1, 1, 0, 1], [1, 1, 0], set()),  # whole words on both sides
    ([0, 1, 1, 0, 1, 1], [1, 1, 1], {1}),  # only A's, B ending on a word start
])
def test_wordpiece_pieces_orphaned_by_truncation_are_never_masked(a_starts, b_starts, orphans):
    """With every word masked (probability 1, unigrams), exactly the pieces that lost their word's head stay unmasked,
    and only in WordPiece mode (a SentencePiece piece without a word start is a word's continuation by design)."""
    tables = pdata.TokenTables(tokenization.FullTokenizer(spm_model_file=SPM))
    tables.vocab_ids = np.array([tables.mask_id])
    tables.vocab_size = 1
    la, lb = len(a_starts), len(b_starts)
    docs = pdata.ShardDocuments(tokens=np.arange(100, 100 + la + lb, dtype=np.int32),
                                word_start=np.array(a_starts + b_starts, bool), bounds=[[0, la, la + lb]], skipped=0,
                                text_bytes=0)
    config = pdata.PretrainingConfig(max_seq_length=32, masked_lm_prob=1.0, max_predictions_per_seq=20, ngram=1)
    every = set(range(1, la + 1)) | set(range(la + 2, la + lb + 2))  # [CLS] A [SEP] B [SEP]
    for seed in range(5):
        tables.is_sentencepiece = False
        positions, _ = pdata.mask_instance(docs, (0, la, la, la + lb, 0), config, tables, random.Random(seed),
                                           pdata.ngram_cdf(1))
        assert set(positions) == every - orphans, seed
        tables.is_sentencepiece = True
        positions, _ = pdata.mask_instance(docs, (0, la, la, la + lb, 0), config, tables, random.Random(seed),
                                           pdata.ngram_cdf(1))
        assert set(positions) == every, seed


@pytest.mark.parametrize("prob, cap, budget", [
    (0.2, 20, 3),  # round((10 + 3) * 0.2) = round(2.6)
    (0.25, 20, 3),  # round(3.25)
    (0.01, 20, 1),  # round(0.13) = 0, at least 1
    (1.0, 4, 4),  # capped by max_predictions_per_seq
    (1.0, 20, 10),  # every candidate (13 rounds to more than there are)
])
@pytest.mark.parametrize("whole_word", [True, False])
def test_the_masking_budget_is_the_originals(prob, cap, budget, whole_word):
    """min(max_predictions_per_seq, max(1, round((candidates + 3) * masked_lm_prob))) positions, as the original's
    `num_to_predict` counts them over [CLS] A [SEP] B [SEP]; with unigrams of one-piece words the budget is met
    exactly, and with probability 1 every piece is masked."""
    tables = pdata.TokenTables(tokenization.FullTokenizer(spm_model_file=SPM))
    tables.vocab_ids = np.array([tables.mask_id])
    tables.vocab_size = 1
    docs = pdata.ShardDocuments(tokens=np.arange(100, 110, dtype=np.int32), word_start=np.ones(10, bool),
                                bounds=[[0, 5, 10]], skipped=0, text_bytes=0)
    config = pdata.PretrainingConfig(max_seq_length=32, masked_lm_prob=prob, max_predictions_per_seq=cap, ngram=1,
                                     do_whole_word_mask=whole_word)
    for seed in range(5):
        positions, _ = pdata.mask_instance(docs, (0, 5, 5, 10, 0), config, tables, random.Random(seed),
                                           pdata.ngram_cdf(1))
        assert len(positions) == budget
        assert set(positions) <= {1, 2, 3, 4, 5, 7, 8, 9, 10, 11}


def test_permutation_never_moves_pieces_orphaned_by_truncation():
    """WordPiece: the permuted positions are mapped back from candidates to the sequence like the masked ones."""
    tables = pdata.TokenTables(tokenization.FullTokenizer(spm_model_file=SPM))
    tables.vocab_ids = np.array([tables.mask_id])
    tables.vocab_size = 1
    tables.is_sentencepiece = False
    starts = [0, 0, 1, 1, 0, 1, 0, 1, 1]  # A: 6 pieces, the first two orphaned; B: 3, the first orphaned
    docs = pdata.ShardDocuments(tokens=np.arange(100, 109, dtype=np.int32), word_start=np.array(starts, bool),
                                bounds=[[0, 6, 9]], skipped=0, text_bytes=0)
    config = pdata.PretrainingConfig(max_seq_length=32, masked_lm_prob=0.25, max_predictions_per_seq=20, ngram=1,
                                     do_permutation=True)
    seen = set()
    for seed in range(40):
        positions, _ = pdata.mask_instance(docs, (0, 6, 6, 9, 0), config, tables, random.Random(seed),
                                           pdata.ngram_cdf(1))
        seen.update(positions)
    assert seen == {3, 4, 5, 6, 9, 10}  # every word's pieces, never the orphans at 1, 2 and 8


def test_only_pieces_of_the_digit_comma_rule_take_the_slow_path():
    """The pieces the original's "1,000," rule splits ("▁1,000," -> "▁1,000" ",") are the ones whose lines are
    re-encoded piece by piece; every other line is encoded in bulk."""
    tables = pdata.TokenTables(tokenization.FullTokenizer(spm_model_file=SPM))
    flagged = {piece for piece, idx in tables.tokenizer.vocab.items() if tables._comma_ids[idx]}  # pylint: disable=protected-access
    assert flagged and flagged == {p for p in tables.tokenizer.vocab if re.search(r"\d,$", p)}


def test_each_word_is_one_accepted_ngram_and_keep_is_no_vocabulary_id():
    """Every piece a word start, all masked as unigrams: 10 accepted n-grams of one word (no empty group before
    the first); the "keep the original" marker can never be a drawn replacement id."""
    tables = pdata.TokenTables(tokenization.FullTokenizer(spm_model_file=SPM))
    docs = pdata.ShardDocuments(tokens=np.arange(100, 110, dtype=np.int32), word_start=np.ones(10, bool),
                                bounds=[[0, 5, 10]], skipped=0, text_bytes=0)
    config = pdata.PretrainingConfig(max_seq_length=32, masked_lm_prob=1.0, max_predictions_per_seq=20, ngram=1)
    drawn, accepted = [0], [0]
    pdata.mask_instance(docs, (0, 5, 5, 10, 0), config, tables, random.Random(0), pdata.ngram_cdf(1), drawn, accepted)
    assert accepted == [10] and drawn == [10]
    assert pdata.KEEP < 0 and pdata.KEEP not in tables.vocab_ids


def test_a_workers_shard_file_is_removed_once_appended(tmp_path, monkeypatch):
    """Without the global shuffle the workers' temporary shard files are appended to the outputs as they finish,
    and each is deleted once appended: the extra disk is the shards not yet appended, not a second copy of the
    output. Seen at every append: no file already appended is still there."""
    appended, left_over = [], []
    append = writers.AtomicRecordWriters.append_framed

    def spy(self, path, count):
        left_over.extend(p for p in appended if os.path.exists(p))
        appended.append(path)
        return append(self, path, count)

    monkeypatch.setattr(writers.AtomicRecordWriters, "append_framed", spy)
    _, stats = run(tmp_path, inputs=corpus_files()[:4], shard_size_mb=0.03, num_workers=2, global_shuffle=False)
    assert len(appended) == stats.shards > 2
    assert left_over == []
