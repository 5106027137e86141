"""Online masking (`--masked_lm_budget`): on the records of `create_pretraining_data`, its statistics equal those of
the offline masking (`pretraining_data.mask_instance`, and the masks stored in the records); whole words are never
split; masks are a function of (seed, record, pass) only, whatever the batching or input sharding; shapes are
static; and a pretraining run with it resumes bit-identically after SIGKILL and trains the same under
MirroredStrategy on two CPUs as on one device."""

import dataclasses
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import masking, records
from albert_tf.data import pretraining as pdata
from albert_tf.errors import UsageError
from tests.helpers import DATA_DIR, REPO, SPM, flag_args, subprocess_env, tiny_config, write_config

SEQ, SLOTS = 64, 10
PASSES = 24  # online masks per record in the statistics tests


# ----------------------------------------------------------------------------------------------------- helpers
@pytest.fixture(scope="module")
def sample_records(tmp_path_factory, spm_model_file):
    """586 records (max_seq_length 64, 10 slots) of data/corpus/sample_text.txt, dupe_factor 40."""
    path = str(tmp_path_factory.mktemp("masking") / "sample.tfrecord")
    config = pdata.PretrainingConfig(max_seq_length=SEQ, max_predictions_per_seq=SLOTS, dupe_factor=40,
                                     random_seed=7)
    pdata.create_pretraining_data(os.path.join(DATA_DIR, "corpus", "sample_text.txt"), [path],
                                  spm_model_file=spm_model_file, config=config, num_workers=1)
    return path


def _parse(path):
    serialized = next(iter(tf.data.TFRecordDataset(path).batch(100000)))
    parsed = tf.io.parse_example(serialized, records.pretraining_feature_spec(SEQ, SLOTS))
    return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in parsed.items()}


def _config(tokenizer, **overrides):
    return masking.MaskingConfig.from_tokenizer(tokenizer, overrides.pop("masked_lm_budget", 0.15), SLOTS,
                                                **overrides)


def _online(features, config, pass_index, file_index=0, record_index=None):
    n = features["input_ids"].shape[0]
    record_index = tf.range(n, dtype=tf.int64) if record_index is None else record_index
    out = _compiled(config)(features, tf.fill([n], tf.cast(file_index, tf.int64)), record_index,
                            tf.fill([n], tf.cast(pass_index, tf.int64)))
    return {k: v.numpy() for k, v in out.items()}


_COMPILED = {}


def _compiled(config):
    """`masking.mask_batch` for `config` as a tf.function (as in the pipeline), traced once per config."""
    if config not in _COMPILED:  # hashed by its settings (the vocabulary is the tokenizer's)
        _COMPILED[config] = tf.function(lambda f, a, b, c: masking.mask_batch(f, a, b, c, config),
                                        reduce_retracing=True)
    return _COMPILED[config]


def _layout(features):
    """Per record, written from the record format alone: (length, index of the first [SEP])."""
    mask, segment = np.asarray(features["input_mask"]), np.asarray(features["segment_ids"])
    return mask.sum(1), (mask * (1 - segment)).sum(1) - 1


def _words(features, wordpiece):
    """Per record, {position: word number} of the maskable positions, by the rule of create_pretraining_data:
    [CLS]/[SEP] excluded; a word starts at token_boundary 1 (or at the first candidate); SentencePiece pieces
    continue the previous word even across [SEP]; WordPiece pieces before their segment's first boundary are not
    maskable (their word's head was truncated away)."""
    lengths, seps = _layout(features)
    boundary, segment = np.asarray(features["token_boundary"]), np.asarray(features["segment_ids"])
    out = []
    for row, (length, sep) in enumerate(zip(lengths, seps)):
        words, word, started = {}, -1, set()
        for p in range(1, length - 1):
            if p == sep:
                continue
            if boundary[row, p]:
                started.add(segment[row, p])
            elif wordpiece and segment[row, p] not in started:
                continue
            if boundary[row, p] or word < 0:
                word += 1
            words[p] = word
        out.append(words)
    return out


def _statistics(features, masks, words, mask_id):
    """Masked count per mask, masked-run lengths in words (1, 2, 3, 4+), and the shares of [MASK] / same /
    other ids at masked positions, from `masks`: a list of (record, positions, final ids at them)."""
    originals = masking.original_ids(features).numpy()
    counts, runs, kinds = [], np.zeros(4), np.zeros(3)
    for row, positions, final in masks:
        counts.append(len(positions))
        masked_words = sorted({words[row][p] for p in positions})
        run = 0
        for i, w in enumerate(masked_words):
            run += 1
            if i + 1 == len(masked_words) or masked_words[i + 1] != w + 1:
                runs[min(run, 4) - 1] += 1
                run = 0
        same = final == originals[row, positions]
        kinds += [np.sum(final == mask_id), np.sum(same & (final != mask_id)), np.sum(~same & (final != mask_id))]
    return np.array(counts, float), runs / runs.sum(), kinds / kinds.sum()


def _online_masks(features, config, passes):
    out = []
    for p in range(passes):
        result = _online(features, config, p)
        for row in range(result["input_ids"].shape[0]):
            positions = result["masked_lm_positions"][row][result["masked_lm_weights"][row] > 0]
            out.append((row, positions, result["input_ids"][row, positions]))
    return out


def _offline_masks(features, tokenizer, draws):
    """`pretraining_data.mask_instance` (create_pretraining_data's masking) run `draws` times on each record's
    unmasked instance."""
    tables = pdata.TokenTables(tokenizer)
    config = pdata.PretrainingConfig(max_seq_length=SEQ, max_predictions_per_seq=SLOTS)
    cdf = pdata.ngram_cdf(config.ngram, config.favor_shorter_ngram)
    originals = masking.original_ids(features).numpy()
    boundary = np.asarray(features["token_boundary"]).astype(bool)
    lengths, seps = _layout(features)
    out = []
    for d in range(draws):
        for row, (length, sep) in enumerate(zip(lengths, seps)):
            la, lb = sep - 1, length - sep - 2
            text = np.r_[1:sep, sep + 1:length - 1]
            docs = pdata.ShardDocuments(tokens=originals[row, text], word_start=boundary[row, text], bounds=[],
                                        skipped=0, text_bytes=0)
            positions, outputs = pdata.mask_instance(docs, (0, la, la, la + lb, 0), config, tables,
                                                     random.Random(d * 100003 + row), cdf)
            positions = np.asarray(positions, int)
            outputs = np.asarray(outputs, int)
            out.append((row, positions, np.where(outputs == pdata.KEEP, originals[row, positions], outputs)))
    return out


def _stored_masks(features):
    weights = np.asarray(features["masked_lm_weights"]) > 0
    positions = np.asarray(features["masked_lm_positions"])
    ids = np.asarray(features["input_ids"])
    return [(r, positions[r][weights[r]], ids[r, positions[r][weights[r]]]) for r in range(len(ids))]


def _within(a, b, sigmas=4.0):
    """|mean a - mean b| within `sigmas` standard errors of the difference (a, b: samples)."""
    error = np.sqrt(a.var() / len(a) + b.var() / len(b)) + 1e-12
    return abs(a.mean() - b.mean()) <= sigmas * error, (a.mean(), b.mean(), error)


def _shares_within(p, q, n_p, n_q, sigmas=4.0):
    """Every share of p (from n_p draws) within `sigmas` binomial standard errors of q's (from n_q)."""
    error = np.sqrt(p * (1 - p) / n_p + q * (1 - q) / n_q) + 1e-12
    return bool(np.all(np.abs(p - q) <= sigmas * error)), np.round(p, 4), np.round(q, 4)


# ----------------------------------------------------------------------------------------------------- statistics
def test_original_ids_are_those_of_the_same_records_made_without_masks(sample_records, tmp_path, spm_model_file):
    """create_pretraining_data draws the masks after the instances, so with masked_lm_prob 0 and the same seed it
    writes the same records unmasked: restoring the stored masks gives exactly their input_ids."""
    unmasked = str(tmp_path / "unmasked.tfrecord")
    config = pdata.PretrainingConfig(max_seq_length=SEQ, max_predictions_per_seq=SLOTS, dupe_factor=40,
                                     random_seed=7, masked_lm_prob=0.0)
    pdata.create_pretraining_data(os.path.join(DATA_DIR, "corpus", "sample_text.txt"), [unmasked],
                                  spm_model_file=spm_model_file, config=config, num_workers=1)
    masked, plain = _parse(sample_records), _parse(unmasked)
    assert float(tf.reduce_sum(plain["masked_lm_weights"])) == 0
    assert not np.array_equal(masked["input_ids"], plain["input_ids"])
    np.testing.assert_array_equal(masking.original_ids(masked), plain["input_ids"])
    np.testing.assert_array_equal(masked["token_boundary"], plain["token_boundary"])


@pytest.mark.slow
def test_statistics_match_offline_masking(sample_records, tokenizer):
    """Online masks of the records, PASSES per record, against create_pretraining_data's own masking run PASSES
    times on the same instances and against the one mask stored in each record: masked counts, masked-run lengths
    and the 80/10/10 split agree within sampling error; the reversed n-gram distribution does not."""
    features = _parse(sample_records)
    words = _words(features, wordpiece=False)
    mask_id = tokenizer.token_id("[MASK]")
    online = _statistics(features, _online_masks(features, _config(tokenizer), PASSES), words, mask_id)
    offline = _statistics(features, _offline_masks(features, tokenizer, PASSES), words, mask_id)
    stored = _statistics(features, _stored_masks(features), words, mask_id)
    assert len(stored[0]) == 586

    ok, detail = _within(online[0], offline[0])
    assert ok, f"mean masked count online vs offline: {detail}"
    assert 9.0 < online[0].mean() <= SLOTS
    ok, detail = _within(online[0], stored[0])
    assert ok, f"mean masked count online vs stored: {detail}"
    runs_online, runs_offline = online[1], offline[1]
    n_runs = 586 * PASSES * 5  # about five runs per record: the binomial errors below are conservative
    assert _shares_within(runs_online, runs_offline, n_runs, n_runs)[0], (runs_online, runs_offline)
    assert _shares_within(runs_online, stored[1], n_runs, 586 * 5)[0], (runs_online, stored[1])
    n_masked = online[0].sum()
    assert _shares_within(online[2], offline[2], n_masked, offline[0].sum())[0], (online[2], offline[2])
    assert _shares_within(online[2], stored[2], n_masked, stored[0].sum())[0], (online[2], stored[2])
    np.testing.assert_allclose(online[2], [0.8, 0.1, 0.1], atol=0.012)
    for name, stats in (("online", online), ("offline", offline), ("stored", stored)):
        print(f"{name}: {len(stats[0])} masks, {stats[0].mean():.3f} predictions each; masked runs of 1/2/3/4+ "
              f"words {np.round(stats[1], 3)}; [MASK]/same/other {np.round(stats[2], 3)}")

    # the run-length comparison can fail: longer n-grams first give another distribution
    longer = _statistics(features, _online_masks(features, _config(tokenizer, favor_shorter_ngram=False), 4),
                         words, mask_id)
    assert not _shares_within(longer[1], runs_offline, 586 * 4 * 5, n_runs)[0]
    assert longer[1][0] < runs_offline[0] - 0.1


def test_random_replacements_cover_the_vocabulary(sample_records, tokenizer):
    features = _parse(sample_records)
    mask_id = tokenizer.token_id("[MASK]")
    originals = masking.original_ids(features).numpy()
    replaced = []
    for p in range(4):
        out = _online(features, _config(tokenizer), p)
        positions = out["masked_lm_positions"]
        final = np.take_along_axis(out["input_ids"], positions, 1)
        same = final == np.take_along_axis(originals, positions, 1)
        other = (out["masked_lm_weights"] > 0) & (final != mask_id) & ~same
        replaced.extend(final[other].tolist())
    replaced = np.array(replaced)
    assert len(replaced) > 1500
    assert replaced.min() < 1000 and replaced.max() > 29000  # uniform over the 30000 ids, not over the batch
    assert abs(replaced.mean() - 14999.5) < 4 * 8660 / np.sqrt(len(replaced))


def test_budget_is_the_fraction_of_tokens_capped_by_the_slots(sample_records, tokenizer):
    """With single-piece words and 1-grams every budget is filled exactly: min(slots, max(1, round(L * b)))
    predictions for a sequence of L tokens ([CLS] and [SEP]s included), Python's round (half to even)."""
    features = _parse(sample_records)
    lengths, _ = _layout(features)
    for budget in (0.15, 0.1, 0.5):
        out = _online(features, _config(tokenizer, masked_lm_budget=budget, ngram=1, do_whole_word_mask=False), 0)
        expected = [min(SLOTS, max(1, round(int(n) * budget))) for n in lengths]
        np.testing.assert_array_equal(out["masked_lm_weights"].sum(1), expected)
    assert any(round(int(n) * 0.1) != int(n * 0.1 + 0.5) for n in lengths)  # a tie rounded to even was met


# ----------------------------------------------------------------------------------------------------- whole words
def _partial_words(features, result, wordpiece):
    """Records where a word is masked in part, or a non-maskable position is masked."""
    bad = []
    for row, words in enumerate(_words(features, wordpiece)):
        positions = result["masked_lm_positions"][row][result["masked_lm_weights"][row] > 0]
        if any(p not in words for p in positions):
            bad.append(row)
            continue
        masked = {words[p] for p in positions}
        if any(words[p] in masked and p not in positions for p in words):
            bad.append(row)
    return bad


def test_whole_words_are_never_split(sample_records, tokenizer):
    features = _parse(sample_records)
    multi_piece = sum(1 for words in _words(features, False) for w in set(words.values())
                      if list(words.values()).count(w) > 1)
    assert multi_piece > 1000  # the records have many words of several pieces
    for p in range(3):
        assert _partial_words(features, _online(features, _config(tokenizer), p), wordpiece=False) == []
    stored = {k: np.asarray(v) for k, v in features.items()}
    assert _partial_words(features, stored, wordpiece=False) == []  # the checker agrees with the offline masks
    pieces = _online(features, _config(tokenizer, do_whole_word_mask=False), 0)
    assert len(_partial_words(features, pieces, wordpiece=False)) > 50  # and it can fail


def _orphan_record():
    """[CLS] A [SEP] B [SEP] where both segments start with two non-boundary pieces (a word cut by truncation)."""
    ids = np.zeros((1, SEQ), np.int32)
    boundary = np.zeros((1, SEQ), np.int32)
    length, sep = 20, 9
    ids[0, :length] = np.arange(100, 100 + length)
    boundary[0, [0, sep, length - 1]] = 1
    boundary[0, [3, 4, 6, 7, 8, 12, 13, 15, 17, 18]] = 1
    segment = ((np.arange(SEQ) > sep) & (np.arange(SEQ) < length)).astype(np.int32)[None]
    return {"input_ids": ids, "input_mask": (np.arange(SEQ) < length).astype(np.int32)[None],
            "segment_ids": segment, "token_boundary": boundary,
            "masked_lm_positions": np.zeros((1, SLOTS), np.int32), "masked_lm_ids": np.zeros((1, SLOTS), np.int32),
            "masked_lm_weights": np.zeros((1, SLOTS), np.float32), "next_sentence_labels": np.zeros([1], np.int32)}


def test_wordpiece_orphans_are_never_masked_sentencepiece_ones_join_a_word(tokenizer):
    """As create_pretraining_data: "##" pieces at the start of a segment are never masked (WordPiece); in
    SentencePiece records the first ones start a word (A) or continue A's last word across [SEP] (B)."""
    record = {k: tf.constant(v) for k, v in _orphan_record().items()}
    batch = {k: tf.concat([v] * 400, 0) for k, v in record.items()}
    wordpiece = dataclasses.replace(_config(tokenizer, masked_lm_budget=0.5), skip_orphans=True)
    sentencepiece = _config(tokenizer, masked_lm_budget=0.5)
    for config, is_wordpiece in ((wordpiece, True), (sentencepiece, False)):
        result = _online(batch, config, 0)
        assert _partial_words(batch, result, is_wordpiece) == []
        masked = result["masked_lm_positions"][result["masked_lm_weights"] > 0]
        hits = {p: int(np.sum(masked == p)) for p in (1, 2, 10, 11)}
        if is_wordpiece:
            assert hits == {1: 0, 2: 0, 10: 0, 11: 0}
        else:
            assert min(hits.values()) > 20
            b_orphans = result["masked_lm_positions"][:, :] == 10
            rows = np.flatnonzero(b_orphans.any(1))
            assert all(8 in result["masked_lm_positions"][r] for r in rows)  # with A's last word


def test_defaults_are_those_of_create_pretraining_data():
    """A config made without the n-gram, whole-word and seed settings masks as the offline tool's defaults do, with
    SentencePiece's rule for pieces at a segment's start; its repr leaves out the vocabulary."""
    online = masking.MaskingConfig(0.15, SLOTS, mask_id=4, vocab_ids=np.arange(30000, dtype=np.int32))
    offline = pdata.PretrainingConfig()
    assert (online.ngram, online.favor_shorter_ngram, online.do_whole_word_mask, online.seed) == (
        offline.ngram, offline.favor_shorter_ngram, offline.do_whole_word_mask, offline.random_seed)
    assert online.skip_orphans is False
    assert "vocab_ids" not in repr(online) and len(repr(online)) < 300


@pytest.mark.parametrize("overrides, message", [
    (dict(masked_lm_budget=0.0), "--masked_lm_budget must be in (0, 1]"),
    (dict(masked_lm_budget=1.0001), "--masked_lm_budget must be in (0, 1]"),
    (dict(ngram=0), "--ngram must be at least 1, got 0"),
    (dict(max_predictions_per_seq=0), "--max_predictions_per_seq must be at least 1, got 0"),
    (dict(vocab_ids=np.zeros([0], np.int32)), "online masking needs a vocabulary"),
])
def test_config_refuses_each_value_past_its_bound(tokenizer, overrides, message):
    """`MaskingConfig.validate` (run by `from_tokenizer`) at each edge: just past it refused naming the flag, the
    edge itself (budget 1.0 and 1e-6, ngram 1, one slot, one id) accepted."""
    made = dict(masked_lm_budget=0.15, max_predictions_per_seq=SLOTS, mask_id=4, vocab_ids=np.arange(9))
    with pytest.raises(UsageError, match=re.escape(message)):
        masking.MaskingConfig(**{**made, **overrides}).validate()
    if "vocab_ids" not in overrides:
        with pytest.raises(UsageError, match=re.escape(message)):
            masking.MaskingConfig.from_tokenizer(tokenizer, **{"masked_lm_budget": 0.15,
                                                               "max_predictions_per_seq": SLOTS, **overrides})
    for edge in (dict(masked_lm_budget=1.0), dict(masked_lm_budget=1e-6), dict(ngram=1),
                 dict(max_predictions_per_seq=1), dict(vocab_ids=np.arange(1))):
        masking.MaskingConfig(**{**made, **edge}).validate()


def test_as_many_slots_as_tokens_work_and_more_are_refused(tokenizer):
    """Every position of an 8-token record may be a prediction slot; a ninth slot cannot be filled and is refused."""
    seq = 8
    features = {"input_ids": tf.constant([[2, 10, 11, 3, 12, 13, 14, 3]]), "input_mask": tf.ones([1, seq], tf.int32),
                "segment_ids": tf.constant([[0, 0, 0, 0, 1, 1, 1, 1]]), "token_boundary": tf.ones([1, seq], tf.int32)}
    ones = tf.ones([1], tf.int64)
    for slots in (seq, seq + 1):
        batch = {**features, "masked_lm_positions": tf.zeros([1, slots], tf.int32),
                 "masked_lm_ids": tf.zeros([1, slots], tf.int32), "masked_lm_weights": tf.zeros([1, slots])}
        config = masking.MaskingConfig(1.0, slots, mask_id=4, vocab_ids=np.arange(20, dtype=np.int32))
        if slots > seq:
            with pytest.raises(ValueError, match=f"max_predictions_per_seq={slots} exceeds the sequence length {seq}"):
                masking.mask_batch(batch, ones, ones, ones, config)
        else:
            out = masking.mask_batch(batch, ones, ones, ones, config)
            assert out["masked_lm_positions"].numpy().tolist() == [[1, 2, 4, 5, 6, 0, 0, 0]]  # all 5 candidates


# ----------------------------------------------------------------------------------------------------- exactly
def _documented_bits(seed, file_index, record_index, pass_index, count):
    """The draws of one record as the module docstring defines them: one stateless uniform uint32 call keyed by
    ((seed << 32) + pass, 2**62 + (file << 40) + record)."""
    key = [((seed & 0x7FFFFFFF) << 32) + pass_index, (1 << 62) + (file_index << 40) + record_index]
    return tf.random.stateless_uniform([count], tf.constant(key, tf.int64), minval=None, maxval=None,
                                       dtype=tf.uint32).numpy()


def _greedy_mask(originals, length, words, bits, config):
    """One record's online mask, sequence by sequence in plain Python from the rules of the module docstring:
    (positions, labels, final ids at them)."""
    slots, seq = config.max_predictions_per_seq, len(originals)
    floats = (bits[:2 * seq + 2 * slots] >> 8).astype(np.float32) * np.float32(1.0 / (1 << 24))
    visit, n_draw = floats[:seq], floats[seq:2 * seq]
    mask_draw, keep_draw = floats[2 * seq:2 * seq + slots], floats[2 * seq + slots:]
    random_index = bits[-slots:].astype(np.int64) % len(config.vocab_ids)
    budget = min(slots, max(1, round(float(length) * config.masked_lm_budget)))
    positions = _greedy_positions(words, budget, visit, n_draw, config)
    labels = originals[positions]
    final = [config.mask_id if mask_draw[i] < 0.8 else label if keep_draw[i] < 0.5
             else config.vocab_ids[random_index[i]] for i, label in enumerate(labels)]
    return positions, labels, final


def _greedy_positions(words, budget, visit, n_draw, config):
    """The offline greedy selection in plain Python: words ({position: word}) visited in increasing `visit` key
    (ties: word order), the t-th visit's n-gram length drawn by `n_draw[t]` against the float32 cdf."""
    pieces = {}
    for position, word in words.items():
        pieces.setdefault(word, []).append(position)
    num_words = len(pieces)
    cdf = [np.float32(c) for c in pdata.ngram_cdf(config.ngram, config.favor_shorter_ngram)[:-1]]
    covered, taken = set(), 0
    for t, start in enumerate(sorted(range(num_words), key=lambda w: (visit[w], w))):
        if taken >= budget:
            break
        n = 1 + sum(n_draw[t] >= c for c in cdf)
        m = min(n, num_words - start)
        while m > 0 and sum(len(pieces[w]) for w in range(start, start + m)) > budget - taken:
            m -= 1
        if m == 0 or covered & set(range(start, start + m)):
            continue
        covered |= set(range(start, start + m))
        taken += sum(len(pieces[w]) for w in range(start, start + m))
    return sorted(p for w in covered for p in pieces[w])


def test_equal_visit_keys_go_in_word_order_and_a_draw_equal_to_the_cdf_takes_the_longer_ngram():
    """`choose_words` on drawn values the uniform draws almost never give: every visit key equal (words then go in
    order), and each n-gram draw exactly at a step of the float32 cdf (which picks the longer n-gram)."""
    seq = 24
    starts = np.zeros(seq, bool)
    starts[[1, 2, 4, 5, 6, 9, 10, 12, 15, 16, 17, 20]] = True
    candidate = np.zeros(seq, bool)
    candidate[1:22] = True
    words = {}
    for p in range(1, 22):
        words[p] = int(starts[1:p + 1].sum()) - 1
    config = masking.MaskingConfig(0.5, SLOTS, mask_id=4, vocab_ids=np.arange(9))
    cdf = [np.float32(c) for c in pdata.ngram_cdf(3)]
    scattered = np.float32([(7 * w) % seq / seq for w in range(seq)])
    for visit, n_draw, budget in ((np.zeros(seq, np.float32), np.full(seq, cdf[0], np.float32), 7),
                                  (scattered, np.full(seq, cdf[0], np.float32), 9),
                                  (scattered, np.full(seq, cdf[1], np.float32), 12),
                                  (np.repeat(np.float32([0.5, 0.25]), seq // 2), np.tile(cdf[:2], seq // 2), 10)):
        chosen = masking.choose_words(tf.constant(starts[None]), tf.constant(candidate[None]), tf.constant([budget]),
                                      tf.constant(visit[None]), tf.constant(n_draw[None]), config).numpy()[0]
        assert np.flatnonzero(chosen).tolist() == _greedy_positions(words, budget, visit, n_draw, config)


@pytest.mark.parametrize("overrides", [
    {}, {"favor_shorter_ngram": False, "masked_lm_budget": 0.3}, {"ngram": 1, "seed": 99},
    {"do_whole_word_mask": False, "ngram": 4}, {"skip_orphans": True, "masked_lm_budget": 0.07},
    {"do_whole_word_mask": False, "ngram": 6}, {"masked_lm_budget": 0.01}])
def test_masks_equal_the_documented_algorithm_run_record_by_record(sample_records, tokenizer, overrides):
    """Every output of `mask_batch` on 120 records equals the rules of the module docstring applied to one record
    at a time with its documented draws: candidates and words, budget, visit order, n-gram lengths, shortening
    and overlap, sorted padded positions and the 80/10/10 replacement."""
    rows = 120
    features = {k: v[:rows] for k, v in _parse(sample_records).items()}
    skip_orphans = overrides.pop("skip_orphans", False)
    config = dataclasses.replace(_config(tokenizer, **overrides), skip_orphans=skip_orphans)
    file_index, pass_index, first_record = 3, 5, 1000
    result = _online(features, config, pass_index, file_index=file_index,
                     record_index=tf.range(first_record, first_record + rows, dtype=tf.int64))
    originals = masking.original_ids(features).numpy()
    lengths, _ = _layout(features)
    if config.do_whole_word_mask:
        words = _words(features, wordpiece=skip_orphans)
    else:
        words = [{p: i for i, p in enumerate(sorted(w))} for w in _words(features, wordpiece=False)]
    count = 2 * SEQ + 3 * SLOTS
    for row in range(rows):
        bits = _documented_bits(config.seed, file_index, first_record + row, pass_index, count)
        positions, labels, final = _greedy_mask(originals[row], lengths[row], words[row], bits, config)
        used = len(positions)
        np.testing.assert_array_equal(result["masked_lm_positions"][row], positions + [0] * (SLOTS - used))
        np.testing.assert_array_equal(result["masked_lm_ids"][row], list(labels) + [0] * (SLOTS - used))
        np.testing.assert_array_equal(result["masked_lm_weights"][row], [1.0] * used + [0.0] * (SLOTS - used))
        expected_ids = originals[row].copy()
        expected_ids[positions] = final
        np.testing.assert_array_equal(result["input_ids"][row], expected_ids)


# ----------------------------------------------------------------------------------------------------- determinism
def _rows(result):
    return [tuple(np.concatenate([result["input_ids"][r], result["masked_lm_positions"][r],
                                  result["masked_lm_ids"][r], result["masked_lm_weights"][r].astype(np.int32)]))
            for r in range(result["input_ids"].shape[0])]


def test_a_records_mask_depends_on_seed_record_and_pass_only(sample_records, tokenizer):
    features = _parse(sample_records)
    config = _config(tokenizer)
    first = _rows(_online(features, config, 0))
    assert first == _rows(_online(features, config, 0))
    order = np.random.RandomState(0).permutation(586)[:100]
    shuffled = {k: tf.gather(v, order) for k, v in features.items()}
    assert _rows(_online(shuffled, config, 0, record_index=tf.constant(order, tf.int64))) == [first[i] for i in order]
    def differ(a, b):
        return np.mean([x != y for x, y in zip(a, b)])

    assert differ(first, _rows(_online(features, config, 1))) > 0.95
    assert differ(first, _rows(_online(features, config, 0, file_index=1))) > 0.95
    assert differ(first, _rows(_online(features, _config(tokenizer, seed=1), 0))) > 0.95


def _pipeline(path, config, batch_size=8, context=None, skip=0, online=True):
    return records.pretraining_dataset(path, SEQ, SLOTS, batch_size, is_training=True, seed=5, input_context=context,
                                       skip_batches=skip, masking=config if online else None)


def _numpy(batch):
    return {k: v.numpy() for k, v in batch.items()}


def test_pipelines_give_the_same_masks_and_order_as_offline(sample_records, tokenizer):
    config = _config(tokenizer)
    one = [_numpy(b) for b in _pipeline(sample_records, config).take(6)]
    two = [_numpy(b) for b in _pipeline(sample_records, config).take(6)]
    for a, b in zip(one, two):
        assert _rows(a) == _rows(b)
    resumed = [_numpy(b) for b in _pipeline(sample_records, config, skip=4).take(2)]
    assert [_rows(b) for b in resumed] == [_rows(b) for b in one[4:]]
    spec = _pipeline(sample_records, config).element_spec
    assert all(s.shape.is_fully_defined() for s in spec.values())
    assert spec == _pipeline(sample_records, config, online=False).element_spec
    # the same records in the same order as with the stored masks; only the masks differ
    stored = [_numpy(b) for b in _pipeline(sample_records, config, online=False).take(6)]
    for a, b in zip(one, stored):
        np.testing.assert_array_equal(masking.original_ids(a).numpy(), masking.original_ids(b).numpy())
        assert not np.array_equal(a["masked_lm_positions"], b["masked_lm_positions"])


def _split(path, directory):
    """The records of `path` in two files (300 and the rest); returns their paths."""
    serialized = [r.numpy() for r in tf.data.TFRecordDataset(path)]
    paths = [os.path.join(directory, f"part-{i}.tfrecord") for i in range(2)]
    for file_path, half in zip(paths, (serialized[:300], serialized[300:])):
        with tf.io.TFRecordWriter(file_path) as writer:
            for record in half:
                writer.write(record)
    return paths


def _identify(paths):
    """{content of a record (original ids, segments): (file index, record index)} for unique contents."""
    where, seen = {}, set()
    for f, path in enumerate(paths):
        features = _parse(path)
        originals = masking.original_ids(features).numpy()
        for r in range(len(originals)):
            key = originals[r].tobytes() + np.asarray(features["segment_ids"])[r].tobytes()
            if key in where or key in seen:
                seen.add(key)
                where.pop(key, None)
            else:
                where[key] = (f, r)
    return where


@pytest.mark.slow
@pytest.mark.parametrize("two_files", [True, False])
def test_sharded_pipelines_key_records_by_their_global_index(sample_records, tokenizer, tmp_path, two_files):
    """Two input pipelines (each its own file, or every other record of one file): every record comes with the
    mask of (its file among all the files, its index in the file, some early pass), as one pipeline would give."""
    config = _config(tokenizer)
    paths = _split(sample_records, str(tmp_path)) if two_files else [sample_records]
    where = _identify(paths)
    pattern = ",".join(paths)
    checked = 0
    for pipeline in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline,
                                             num_replicas_in_sync=2)
        for batch in _pipeline(pattern, config, context=context).take(8):
            batch = _numpy(batch)
            originals = masking.original_ids(batch).numpy()
            for r in range(len(originals)):
                key = originals[r].tobytes() + batch["segment_ids"][r].tobytes()
                if key not in where:
                    continue
                file_index, record_index = where[key]
                if two_files:
                    assert file_index == pipeline
                one = {k: v[r:r + 1] for k, v in batch.items()}
                candidates = [_rows(_online(one, config, p, file_index, tf.constant([record_index], tf.int64)))[0]
                              for p in range(8)]
                assert _rows(one)[0] in candidates
                checked += 1
    assert checked >= 30  # (many records repeat in other dupe rounds: those are skipped)


# ----------------------------------------------------------------------------------------------------- the task
def _params(records_fixture, output_dir, **overrides):
    from albert_tf.tasks.pretraining import PretrainingParams  # pylint: disable=import-outside-toplevel

    path, seq, preds = records_fixture
    values = dict(albert_config=tiny_config(), input_file=path, output_dir=str(output_dir), max_seq_length=seq,
                  max_predictions_per_seq=preds, train_batch_size=8, eval_batch_size=8, num_train_steps=4,
                  num_warmup_steps=0, learning_rate=5e-3, save_checkpoints_steps=2, keep_checkpoint_max=10,
                  iterations_per_loop=1, max_eval_steps=1, do_eval=False, log_every=0,
                  masked_lm_budget=0.15, spm_model_file=SPM)
    values.update(overrides)
    return PretrainingParams(**values)


def test_budget_without_a_tokenizer_or_out_of_range_is_refused_naming_the_flag(tmp_path, pretraining_records):
    from albert_tf.tasks.pretraining import run_pretraining  # pylint: disable=import-outside-toplevel

    out = tmp_path / "out"
    with pytest.raises(UsageError, match=r"--masked_lm_budget.*--spm_model_file.*--vocab_file"):
        run_pretraining(_params(pretraining_records, out, spm_model_file=None))
    for budget in (-0.1, 1.5):  # the setting's declared bounds, as the script's guard says them
        with pytest.raises(UsageError, match=rf"^--masked_lm_budget={budget}: must be in \[0, 1\]$"):
            run_pretraining(_params(pretraining_records, out, masked_lm_budget=budget))
    with pytest.raises(UsageError, match=r"^--ngram=0: must be at least 1$"):
        run_pretraining(_params(pretraining_records, out, ngram=0))
    assert not out.exists()  # refused before anything was written


def _checkpoint(prefix):
    """Every tensor of a checkpoint (weights, optimizer state, RNG states), by key."""
    reader = tf.train.load_checkpoint(str(prefix))
    return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map() if k != "_CHECKPOINTABLE_OBJECT_GRAPH"}


def _script_args(config_file, records_fixture, output_dir, **values):
    path, seq, preds = records_fixture
    base = dict(albert_config_file=config_file, input_file=path, output_dir=str(output_dir), max_seq_length=seq,
                max_predictions_per_seq=preds, train_batch_size=8, num_warmup_steps=0, learning_rate=5e-3,
                keep_checkpoint_max=10, iterations_per_loop=1, log_every=0, masked_lm_budget=0.15,
                spm_model_file=SPM)
    base.update(values)
    return flag_args(**base)


@pytest.mark.slow
def test_run_with_online_masking_killed_and_resumed_is_bit_identical(tmp_path, pretraining_records):
    """SIGKILLed after its first checkpoint and resumed, a 12-step run (dropout 0.1, a new mask on each of the
    six passes over the records) ends with every tensor equal to an uninterrupted run's; a run on the stored
    masks ends elsewhere."""
    from albert_tf.tasks.pretraining import run_pretraining  # pylint: disable=import-outside-toplevel

    total = 12
    config = tiny_config(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    settings = dict(num_train_steps=total, save_checkpoints_steps=2, albert_config=config)
    config_file = write_config(config, tmp_path / "albert_config.json")
    killed = tmp_path / "killed"
    with open(tmp_path / "killed.log", "w") as log:
        process = subprocess.Popen([sys.executable, os.path.join(REPO, "run_pretraining.py"),
                                    *_script_args(config_file, pretraining_records, killed, num_train_steps=total,
                                                  save_checkpoints_steps=2)],
                                   cwd=REPO, env=subprocess_env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 300
        while not tf.train.latest_checkpoint(str(killed)):
            assert process.poll() is None, (tmp_path / "killed.log").read_text()[-3000:]
            assert time.time() < deadline
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait()
    killed_at = int(tf.train.latest_checkpoint(str(killed)).rsplit("-", 1)[1])
    assert killed_at < total, "the run ended before it could be killed"

    assert run_pretraining(_params(pretraining_records, killed, **settings))["step"] == total
    assert run_pretraining(_params(pretraining_records, tmp_path / "straight", **settings))["step"] == total
    stored = run_pretraining(_params(pretraining_records, tmp_path / "stored", masked_lm_budget=0.0, **settings))
    assert stored["step"] == total
    final = {name: _checkpoint(tmp_path / name / f"ckpt-{total}") for name in ("killed", "straight", "stored")}
    assert set(final["killed"]) == set(final["straight"])
    for key, value in final["straight"].items():
        np.testing.assert_array_equal(final["killed"][key], value, err_msg=key)
    moved = [k for k, v in final["straight"].items() if k.startswith("model/") and v.dtype.kind == "f"
             and not np.array_equal(v, final["stored"][k])]
    assert moved, "online masks trained exactly like the stored ones"
    print(f"killed at step {killed_at} of {total}; resumed run bit-identical to the uninterrupted one")


TWO_CPUS = textwrap.dedent("""
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from albert_tf.scripts.run_pretraining import run
    run()
""")


@pytest.mark.slow
def test_mirrored_over_two_cpus_trains_as_one_device_with_the_same_online_masks(tmp_path, pretraining_records):
    """Two replicas of 4 records each get the masks one device gets for the same 8 records: after 2 steps the
    weights agree within 1e-5 (tolerance of the pretraining mirrored test), and differ from a run on the stored
    masks by far more."""
    from albert_tf.tasks.pretraining import run_pretraining  # pylint: disable=import-outside-toplevel

    settings = dict(num_train_steps=2, save_checkpoints_steps=2, learning_rate=1e-2)
    config_file = write_config(tiny_config(), tmp_path / "albert_config.json")
    result = subprocess.run([sys.executable, "-c", TWO_CPUS,
                             *_script_args(config_file, pretraining_records, tmp_path / "mirrored",
                                           strategy="mirrored", log_every=1, **settings)],
                            cwd=REPO, env=subprocess_env(), capture_output=True, text=True, timeout=600,
                            check=False)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert "device:CPU:1" in result.stderr
    run_pretraining(_params(pretraining_records, tmp_path / "single", **settings))
    run_pretraining(_params(pretraining_records, tmp_path / "stored", masked_lm_budget=0.0, **settings))
    # Every float tensor: the encoder's weights are named under the optimizer's variables in these checkpoints
    # (a filter on "model/" would keep the heads alone), and the optimizer's moments must agree too.
    weights = {name: {k: v for k, v in _checkpoint(tmp_path / name / "ckpt-2").items() if v.dtype.kind == "f"}
               for name in ("mirrored", "single", "stored")}
    assert len(weights["single"]) > 40 and set(weights["mirrored"]) == set(weights["single"])
    worst = max(np.abs(v - weights["single"][k]).max() for k, v in weights["mirrored"].items())
    apart = max(np.abs(v - weights["stored"][k]).max() for k, v in weights["single"].items())
    assert worst < 1e-5, worst
    assert apart > 1e-3, apart
    print(f"mirrored vs one device with online masks: max |difference| {worst:.2e} (stored masks: {apart:.2e})")
