"""One shard start to finish (albert_tf/data/pretraining/build.py): the seeded shuffle buffer that orders a shard's
records, the counts a shard adds to the run's `Stats` (against the text counted here), and the claim that the
encoding batch does not change the output."""

import random

import pytest

from albert_tf.data import pretraining as pdata
from albert_tf.data.pretraining import build, shards
from albert_tf.text import tokenization
from tests.helpers import SPM

# Two documents (a blank line between): 2 and 3 sentences; and a one-piece document, too short to keep.
TEXT = ("The cat sat on the warm mat today.\nIt purred loudly at the birds outside.\n\n"
        "Rain fell over the quiet town all night.\nThe river rose by morning.\nNobody went to work.\n\n"
        "yes\n")


def test_the_shuffle_buffer_holds_its_capacity_then_evicts_a_random_record():
    buffer = build._ShuffleBuffer(8, random.Random(3))  # pylint: disable=protected-access
    out = [buffer.push(i) for i in range(40)]
    assert out[:8] == [None] * 8 and None not in out[8:]  # full at 8 records, then one out per record in
    assert all(evicted < k for k, evicted in enumerate(out) if k >= 8)  # only records already pushed
    drained = buffer.drain()
    assert buffer.items == [] and sorted(out[8:] + drained) == list(range(40))  # every record once
    assert out[8:] != sorted(out[8:])  # evicted from random positions, not first in first out
    assert len({e % 8 for e in out[8:16]}) > 3
    again = build._ShuffleBuffer(8, random.Random(3))  # pylint: disable=protected-access
    for i in range(40):
        again.push(i)
    held = list(again.items)
    assert again.drain() == drained and drained != held and sorted(drained) == sorted(held)  # drained shuffled


@pytest.fixture(name="shard")
def _shard(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text(TEXT, encoding="utf-8")
    (shard,) = pdata.plan_shards([str(path)], 1.0)
    return shard


@pytest.fixture(name="tables", scope="module")
def _tables():
    return pdata.TokenTables(tokenization.FullTokenizer(spm_model_file=SPM))


def test_a_shard_adds_its_text_documents_sentences_and_tokens(shard, tables):
    stats = pdata.Stats()
    records = list(build.shard_records(shard, pdata.PretrainingConfig(dupe_factor=2, max_seq_length=32), tables,
                                       stats))
    tokenizer = tokenization.FullTokenizer(spm_model_file=SPM)
    kept = [line for doc in TEXT.split("\n\n")[:2] for line in doc.splitlines()]
    assert stats.shards == 1 and stats.text_bytes == len(TEXT.encode("utf-8"))
    assert (stats.documents, stats.skipped_documents, stats.sentences) == (2, 1, 5)
    assert stats.tokens == sum(len(tokenizer.tokenize(line)) for line in kept)
    assert stats.instances == len(records) > 0
    assert len(stats.ngram_drawn) == len(stats.ngram_accepted) == 3 and sum(stats.ngram_accepted) > 0


def test_shards_into_one_stats_add_up(shard, tables):
    """A run's `Stats` gathers its shards: each count twice over for the same shard twice (the n-gram tallies
    start at zero, however many n there are)."""
    config = pdata.PretrainingConfig(dupe_factor=2, max_seq_length=32)
    once, twice = pdata.Stats(), pdata.Stats()
    first = list(build.shard_records(shard, config, tables, once))
    for _ in range(2):
        assert list(build.shard_records(shard, config, tables, twice)) == first  # seeded: the same records
    for field in ("shards", "text_bytes", "documents", "skipped_documents", "sentences", "tokens", "instances",
                  "masked_positions"):
        assert getattr(twice, field) == 2 * getattr(once, field), field
    assert twice.ngram_drawn == [2 * n for n in once.ngram_drawn]
    assert twice.ngram_accepted == [2 * n for n in once.ngram_accepted]


def test_the_encoding_batch_does_not_change_the_records(shard, tables, monkeypatch):
    config = pdata.PretrainingConfig(dupe_factor=3, max_seq_length=32)
    default = list(build.shard_records(shard, config, tables))
    monkeypatch.setattr(build, "_ENCODE_BATCH", 2)
    assert list(build.shard_records(shard, config, tables)) == default


def test_a_shard_reads_its_byte_range_into_documents_of_two_tokens_or_more(tmp_path, tables):
    """Documents end at blank lines and at the shard's end (a line of no pieces, a zero-width space, ends
    nothing); one of a single token is skipped (its token stays in the flat array), one of two is kept; the shard's
    bytes are its range of the file, not the file."""
    head, text = "Skipped text before the shard.\n\n", "The cat.\n\u200b\nsat\n\nyes\n\n\na b"
    path = tmp_path / "range.txt"
    path.write_text(head + text, encoding="utf-8")
    start, size = len(head.encode("utf-8")), len((head + text).encode("utf-8"))
    read = shards.read_shard_documents(shards.InputShard(0, 0, 0, str(path), start, size), tables)
    tokenizer = tokenization.FullTokenizer(spm_model_file=SPM)
    ids = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)) for line in ("The cat.", "sat", "yes", "a b")]
    assert [len(i) for i in ids[2:]] == [1, 2] and not tokenizer.tokenize("\u200b")
    assert read.tokens.tolist() == sum(ids, [])
    n1, n2 = len(ids[0]), len(ids[0]) + len(ids[1])
    assert read.bounds == [[0, n1, n2], [n2 + 1, n2 + 3]] and read.skipped == 1
    assert read.text_bytes == size - start and read.document_tokens(1).tolist() == ids[3]
    assert read.word_start.tolist() == tables.word_start[read.tokens].tolist()
    with pytest.raises(pdata.PretrainingDataError, match="shard_size_mb must be positive, got 0"):
        shards.shard_bytes_of(0)
    assert shards.shard_bytes_of(1e-9) == 1 and shards.shard_bytes_of(0.5) == 500_000
