"""SQuAD reading, features (alignment, windows, p_mask, max context), caches and post-processing.

The alignment check maps every gold answer to pieces (as training does) and back to characters (as prediction does),
on the shipped sample always and on the full official v1.1 dev set when it is beside the checkout; the counts it is
checked against are the raw JSON's and the original's window rule's; it prints the report.
"""

import collections
import inspect
import json
import logging
import os
import random
import re
import zipfile

import numpy as np
import pytest

from albert_tf.data import records, squad
from albert_tf.data.squad import alignment, windows
from albert_tf.errors import UsageError
from albert_tf.evaluation import squad as squad_evaluation
from albert_tf.evaluation import squad_postprocessing as post
from albert_tf.text.tokenization import FullTokenizer, preprocess_text
from tests.helpers import REPO
from tests.helpers import SQUAD_V1 as SAMPLE_V1
from tests.helpers import SQUAD_V2 as SAMPLE_V2

SHARED_V1 = os.path.join(REPO, "..", "shared", "data", "squad", "dev-v1.1.json.zip")


def _write(path, value):
    with open(path, "w", encoding="utf-8") as f:
        f.write(value if isinstance(value, str) else json.dumps(value))
    return str(path)


def _squad(*paragraphs):
    """A SQuAD dict from (context, [(id, question, [(text, start)], is_impossible)]) tuples."""
    return {"version": "test", "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": [{"id": qid, "question": question, "is_impossible": impossible,
                                      "answers": [{"text": t, "answer_start": s} for t, s in answers]}
                                     for qid, question, answers, impossible in qas]}
        for context, qas in paragraphs]}]}


# ------------------------------------------------------------------------------------------------------------------
# Reading and bad input.

def test_read_the_shipped_samples():
    stats = squad.ReadStats()
    examples = squad.read_squad_examples(SAMPLE_V1, is_training=False, stats=stats)
    assert len(examples) == stats.questions == 583 and not stats.offset_mismatches
    assert all(len(e.answers) in (2, 3) and e.start_position is None for e in examples)
    stats = squad.ReadStats()
    examples = squad.read_squad_examples(SAMPLE_V2, is_training=True, stats=stats)
    assert (len(examples), stats.impossible) == (14, 6)
    impossible = [e for e in examples if e.is_impossible]
    assert all(e.start_position == -1 and e.orig_answer_text == "" for e in impossible)
    for e in examples:
        if not e.is_impossible:
            assert e.paragraph_text[e.start_position:e.end_position + 1] == e.orig_answer_text


def test_malformed_json_names_the_file_and_place(tmp_path):
    bad = _write(tmp_path / "bad.json", '{"data": [{"paragraphs": [}]}')
    with pytest.raises(squad.SquadDataError, match=r"bad\.json is not valid JSON: Expecting value at line 1 column 27"):
        squad.read_squad_examples(bad, is_training=False)
    not_squad = _write(tmp_path / "list.json", "[1, 2]")
    with pytest.raises(squad.SquadDataError, match=r"list\.json is not a SQuAD file"):
        squad.read_squad_examples(not_squad, is_training=False)
    data = _squad(("Some context.", [("q1", "What?", [("Some", 0)], False)]))
    del data["data"][0]["paragraphs"][0]["qas"][0]["question"]
    missing = _write(tmp_path / "missing.json", data)
    with pytest.raises(squad.SquadDataError, match=r"missing\.json: data\[0\]\.paragraphs\[0\]\.qas\[0\] \(id q1\): "
                                                   r"missing or invalid 'question'"):
        squad.read_squad_examples(missing, is_training=False)
    data = _squad(("Some context.", [("q1", "What?", [("Some", 0)], False), ("q1", "Again?", [("Some", 0)], False)]))
    with pytest.raises(squad.SquadDataError, match="repeated"):
        squad.read_squad_examples(_write(tmp_path / "dup.json", data), is_training=False)
    with pytest.raises(squad.SquadDataError, match="cannot read"):
        squad.read_squad_examples(str(tmp_path / "absent.json"), is_training=False)


def test_zip_files_are_read(tmp_path):
    path = tmp_path / "sample.json.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.write(SAMPLE_V2, "dev-v2.0-small.json")
    assert len(squad.read_squad_examples(str(path), is_training=False)) == 14
    bad = tmp_path / "bad.json.zip"
    with zipfile.ZipFile(bad, "w") as archive:
        archive.writestr("inner.json", "{not json")
    with pytest.raises(squad.SquadDataError, match=r"bad\.json\.zip:inner\.json is not valid JSON"):
        squad.read_squad_examples(str(bad), is_training=False)


def test_mismatched_answer_offset_is_warned_counted_and_nothing_else_lost(tmp_path, caplog):
    context = "The cat sat on the mat. The dog sat on the rug."
    data = _squad((context, [
        ("ok", "Who sat on the mat?", [("The cat", 0)], False),
        ("moved", "Who sat on the rug?", [("The dog", 3)], False),  # the text is at 24
        ("absent", "Who sat on the sofa?", [("The bird", 5)], False),  # the text is nowhere
        ("none", "Who flew?", [], True)]))
    path = _write(tmp_path / "offsets.json", data)
    stats = squad.ReadStats()
    with caplog.at_level(logging.WARNING):
        examples = squad.read_squad_examples(path, is_training=True, stats=stats)
    assert stats.offset_mismatches == ["moved", "absent"]
    assert stats.offsets_repaired == ["moved"] and stats.skipped == ["absent"]
    assert [e.qas_id for e in examples] == ["ok", "moved", "none"]
    moved = examples[1]
    assert moved.start_position == 24 and context[24:31] == moved.orig_answer_text
    messages = caplog.text
    assert "answer_start 3 does not point at the answer text 'The dog' (the context has ' cat sa' there)" in messages
    assert "answer moved from offset 3 to 24, where its text occurs" in messages
    assert [e.is_impossible for e in examples] == [False, False, True] and examples[2].start_position == -1
    assert "'The bird' does not occur in the context" in messages
    assert "2 answer offset(s) do not match their text" in messages
    # Reading for prediction keeps every question (the texts are what evaluation uses).
    stats = squad.ReadStats()
    assert len(squad.read_squad_examples(path, is_training=False, stats=stats)) == 4
    assert len(stats.offset_mismatches) == 2 and not stats.skipped


def test_a_moved_answer_goes_to_its_nearest_occurrence_the_first_on_a_tie(tmp_path, caplog):
    context = "The dog and the dog."  # "dog" at 4 and 16
    data = _squad((context, [("nearer_second", "Q1?", [("dog", 15)], False), ("tie", "Q2?", [("dog", 10)], False),
                             ("two_answers", "Q3?", [("dog", 16), ("The", 0)], False),
                             ("both_moved", "Q5?", [("dog", 1), ("and", 2)], False)]),
                 ("baaab", [("overlapping", "Q4?", [("aa", 3)], False)]))  # "aa" at 1 and 2
    stats = squad.ReadStats()
    with caplog.at_level(logging.WARNING):
        examples = squad.read_squad_examples(_write(tmp_path / "near.json", data), is_training=True, stats=stats)
    assert [(e.start_position, e.end_position) for e in examples] == [(16, 18), (4, 6), (16, 18), (4, 6), (2, 3)]
    assert stats.offsets_repaired == ["nearer_second", "tie", "both_moved", "overlapping"]
    assert stats.extra_answers == 2 and "answer_start 1 does not point at the answer text 'dog'" in caplog.text


def test_numeric_ids_become_strings_and_each_answer_is_checked(tmp_path):
    data = _squad(("The cat sat.", [(7, "Who sat?", [("The cat", 0)], False)]))
    assert squad.read_squad_examples(_write(tmp_path / "ids.json", data), is_training=True)[0].qas_id == "7"
    for field, value, kind in (("text", 3, "str"), ("answer_start", "0", "int")):
        bad = _squad(("The cat sat.", [("q", "Who sat?", [("The cat", 0)], False)]))
        bad["data"][0]["paragraphs"][0]["qas"][0]["answers"].append({"text": "cat", "answer_start": 4, field: value})
        with pytest.raises(squad.SquadDataError, match=rf"qas\[0\] \(id q\)\.answers\[1\]: missing or invalid "
                                                       rf"'{field}' \(expected {kind}\)"):
            squad.read_squad_examples(_write(tmp_path / "bad.json", bad), is_training=False)


def test_a_question_read_for_prediction_has_no_answer_position():
    example = squad.SquadExample("q", "Who sat?", "The cat sat.")
    assert example.start_position is None and example.end_position is None and not example.is_impossible


def test_long_question_is_cut_to_max_query_length_and_the_context_kept(tokenizer, caplog):
    context = " ".join(f"word{i}" for i in range(60))
    question = "what " * 80 + "is the answer?"
    example = squad.SquadExample("long", question, context)
    stats = squad.ConversionStats()
    with caplog.at_level(logging.WARNING):
        features = squad.convert_examples_to_features([example], tokenizer, 48, 16, 12, False, stats=stats)
    assert stats.truncated_questions == ["long"]
    assert "longer than max_query_length=12 pieces" in caplog.text
    assert all(f.doc_offset == 14 for f in features)  # [CLS] + 12 question pieces + [SEP]
    covered = set()
    for f in features:
        covered.update(f.tok_start_to_orig_index)
    pieces = tokenizer.tokenize(context)
    assert len(covered) == len(pieces)  # every context piece is in some window
    with pytest.raises(ValueError, match=r"max_seq_length \(64\) must be greater than max_query_length \(64\) \+ 3"):
        squad.convert_examples_to_features([example], tokenizer, 64, 16, 64, False)
    # A question of exactly max_query_length pieces is whole; the alignment is kept in the cache given.
    exact = squad.SquadExample("exact", "what is the answer?", context)
    length, stats, cache = len(tokenizer.tokenize(exact.question_text)), squad.ConversionStats(), {}
    features = squad.convert_examples_to_features([exact], tokenizer, 48, 16, length, False, stats=stats, log_every=0,
                                                  alignment_cache=cache)
    assert not stats.truncated_questions and features[0].doc_offset == length + 2
    assert list(cache) == [context] and isinstance(cache[context], squad.ContextAlignment)


def test_a_context_without_alignment_is_counted_not_raised(tokenizer, caplog):
    with pytest.raises(squad.AlignmentError, match="the context is empty"):
        squad.align_context("", [], True)
    with pytest.raises(squad.AlignmentError, match="the context is empty"):
        squad.align_context("", ["\u2581a"], True)
    with pytest.raises(squad.AlignmentError, match="the context has no pieces"):
        squad.align_context("abc", [], True)
    with pytest.raises(squad.AlignmentError, match="no character of the context matches its pieces"):
        squad.align_context("abc", ["xyz"], True)
    stats = squad.ConversionStats()
    empty = squad.SquadExample(qas_id="q1", question_text="what?", paragraph_text="")
    for is_training, outcome in ((False, 'it is answered ""'), (True, "skipped for training")):
        stats = squad.ConversionStats()
        with caplog.at_level(logging.WARNING):
            assert squad.convert_examples_to_features([empty], tokenizer, 64, 16, 8, is_training, stats=stats) == []
        assert stats.alignment_failures == ["q1"] and f"Question q1: the context is empty; {outcome}" in caplog.text


class _Mistokenizing:
    """The tokenizer given, except that each context in `pieces_of` is tokenized as another text."""

    def __init__(self, tokenizer, pieces_of):
        self._tokenizer, self._pieces_of = tokenizer, pieces_of

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)

    def tokenize(self, text):
        return self._tokenizer.tokenize(self._pieces_of.get(text, text))


def test_contexts_aligned_poorly_or_only_far_off_the_diagonal_are_counted(tokenizer, caplog):
    first = ("the quick brown fox jumps over the lazy dog while seven wizards quietly hex the jolly king and then "
             "they all go home to sleep")
    last = "zebra yak zebra yak ox"
    wide, poor = first + " " + last, "The cat sat on the mat."
    mistokenizing = _Mistokenizing(tokenizer, {wide: last + " " + first,  # aligned only 23 characters off
                                               poor: "completely different words appear in this string"})
    # A context of three characters: its first band is wider than the context, yet no full-width programme ran.
    examples = [squad.SquadExample("wide", "Who?", wide, "quick brown", 4, False),
                squad.SquadExample("poor", "Who?", poor, "cat", 4, False),
                squad.SquadExample("short", "Who?", "Ann", "Ann", 0, False)]
    for is_training, kept in ((True, {"wide", "short"}), (False, {"wide", "poor", "short"})):
        stats = squad.ConversionStats()
        with caplog.at_level(logging.WARNING):
            features = squad.convert_examples_to_features(examples, mistokenizing, 64, 32, 16, is_training,
                                                          stats=stats)
        assert stats.alignment_failures == ["poor"] and stats.wide_alignments == ["wide"]
        assert {examples[f.example_index].qas_id for f in features} == kept
    assert "1 question(s) whose context could not be aligned: poor" in caplog.text
    assert re.search(r"Question poor: only \d+ of 23 context characters align to the pieces", caplog.text)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        squad.convert_examples_to_features(examples[:1], tokenizer, 64, 32, 16, False)
    assert "could not be aligned" not in caplog.text and "1 examples -> " in caplog.text


def test_the_last_contexts_alignments_are_reused_the_least_recent_dropped(tokenizer, monkeypatch):
    aligned = []

    def counting(paragraph_text, *args):
        aligned.append(paragraph_text)
        return squad.align_context(paragraph_text, *args)

    monkeypatch.setattr(windows, "align_context", counting)
    monkeypatch.setattr(windows, "ALIGNMENT_CACHE_SIZE", 2)
    examples = [squad.SquadExample(c, "Who?", f"{c} sat on the mat.") for c in "ABACAB"]
    squad.convert_examples_to_features(examples, tokenizer, 64, 32, 16, False)
    assert [text[0] for text in aligned] == ["A", "B", "C", "B"]  # B was the least recently used when C came
    aligned.clear()
    cache = {}
    squad.convert_examples_to_features(examples, tokenizer, 64, 32, 16, False, alignment_cache=cache)
    assert [text[0] for text in aligned] == ["A", "B", "C"] and len(cache) == 3  # a cache given keeps everything


def test_wordpiece_tokenizer_is_refused_with_a_clear_message(tmp_path):
    vocab = _write(tmp_path / "vocab.txt", "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b"]) + "\n")
    wordpiece = FullTokenizer(vocab_file=vocab)
    with pytest.raises(ValueError, match="need a SentencePiece tokenizer.*WordPiece .* not supported"):
        squad.convert_examples_to_features([], wordpiece, 64, 16, 8, False)


# ------------------------------------------------------------------------------------------------------------------
# Alignment.

def _reference_programme(chars, target, max_dist):
    """The original's banded LCS, written plainly: a dense table (cells outside the band stay 0) and a dict of
    moves, up first, then left, then diagonal only when strictly better."""
    n, m = len(chars), len(target)
    f = np.zeros((n, m), dtype=np.int64)
    moves = {}
    for i in range(n):
        for j in range(max(0, i - max_dist), min(m, i + max_dist)):
            if i > 0:
                moves[(i, j)] = "up"
                f[i, j] = f[i - 1, j]
            if j > 0 and f[i, j - 1] > f[i, j]:
                moves[(i, j)] = "left"
                f[i, j] = f[i, j - 1]
            prev = f[i - 1, j - 1] if i > 0 and j > 0 else 0
            if chars[i] == target[j] and prev + 1 > f[i, j]:
                moves[(i, j)] = "diag"
                f[i, j] = prev + 1
    return f, moves


def _reference_trace(moves, n, m):
    """Raw character -> matched target position (None where unmatched), walking the moves back from the last cell."""
    orig_to_tok = [None] * n
    i, j = n - 1, m - 1
    while i >= 0 and j >= 0 and (i, j) in moves:
        if moves[(i, j)] == "diag":
            orig_to_tok[i] = j
            i, j = i - 1, j - 1
        elif moves[(i, j)] == "left":
            j -= 1
        else:
            i -= 1
    return orig_to_tok


def _reference_alignment(raw_text, target, do_lower_case):
    """The original's alignment with `_reference_programme`: band |n - m| + 5, doubled once below 80%."""
    n, m = len(raw_text), len(target)
    chars = [preprocess_text(c, lower=do_lower_case, remove_space=False) for c in raw_text]
    max_dist = abs(n - m) + 5
    for _ in range(2):
        f, moves = _reference_programme(chars, target, max_dist)
        if f[n - 1, m - 1] > 0.8 * n:
            break
        max_dist *= 2
    return _reference_trace(moves, n, m), int(f[n - 1, m - 1])


def test_banded_programme_equals_the_dense_one_on_random_strings():
    """The two-row programme against the dense table on 400 random pairs, bands narrower and wider than either
    string, the last cell inside and outside the band: the same score and the same matched characters."""
    rng = random.Random(3)
    outside = 0
    for _ in range(400):
        n, m, max_dist = rng.randint(1, 24), rng.randint(1, 24), rng.randint(1, 14)
        chars = [rng.choice("ab c") for _ in range(n)]
        target = "".join(rng.choice("abc d") for _ in range(m))
        f, moves = _reference_programme(chars, target, max_dist)
        score, rows = alignment._banded_lcs(chars, target, max_dist)
        assert score == f[n - 1, m - 1], (chars, target, max_dist)
        assert alignment._trace_back(rows, n, m)[0] == _reference_trace(moves, n, m), (chars, target, max_dist)
        outside += abs(n - m) >= max_dist
    assert outside > 50


TRICKY = [
    "Warsaw (Polish: Warszawa [varˈʂava]) is the capital of Poland; ½ of Ł\u00f3d\u017a's 1,000,000 people.",
    "  Leading spaces,\ttabs\nand newlines — with “quotes” and ``LaTeX'' quotes… and ﬁ ligatures ＡＢＣ.",
    "Kublai Khan (忽必烈) founded the Yuan dynasty in 1271; Café Müller is 3.5 km away (2½ miles).",
]


@pytest.mark.parametrize("text", TRICKY)
def test_alignment_reproduces_the_original_programme(tokenizer, text):
    pieces = tokenizer.tokenize(text)
    alignment = squad.align_context(text, pieces, True)
    target = "".join(p.replace("\u2581", " ") for p in pieces)
    reference, score = _reference_alignment(text, target, True)
    assert alignment.matched == score
    # Same per-character matches, hence the same piece <-> character maps.
    starts = [squad.convert_index(reference, c, is_start=True) for c in range(len(text))]
    assert list(alignment.start_token_of_char) == [
        [k for k, p in enumerate(pieces) for _ in p.replace("\u2581", " ")][s] for s in starts]
    # Each piece's characters, read back from the raw text, normalise to the piece (when the piece is whole).
    for piece, first, last in zip(pieces, alignment.tok_start_to_orig_index, alignment.tok_end_to_orig_index):
        assert 0 <= first <= last + 1 and last < len(text)


@pytest.mark.parametrize("length, shift, band, full_width, matched", [
    (100, 0, 5, False, 100),  # the first band
    (20, 4, 10, False, 16),  # exactly 80% in the first band: the original widens it
    (100, 7, 10, False, 93),  # the doubled band
    (35, 7, 10, False, 28),  # exactly 80% in the doubled band: kept, as the original keeps it
    (100, 12, 101, True, 88),  # only the full-width programme reaches 80%
    (55, 11, 56, True, 44),  # exactly 80% at full width
    (100, 30, None, False, 70),  # nothing does
])
def test_the_band_is_widened_as_the_original_widens_it_then_to_full_width(length, shift, band, full_width, matched):
    """Distinct characters whose pieces start with `shift` marks and lose as many at the end: every match lies
    `shift` off the diagonal, so the band that reaches 80% of the characters (more than 80% for the first band) is
    known, and with it what the alignment reports."""
    text = "".join(chr(0x4E00 + i) for i in range(length))
    pieces = ["#"] * shift + list(text[:length - shift])
    alignment = squad.align_context(text, pieces, True)
    assert (alignment.band_width, alignment.full_width, alignment.matched) == (band, full_width, matched)
    if band is not None:
        assert alignment.token_span(0, 0) == (shift, shift)
        assert alignment.char_span(shift, length - 1) == (0, length - shift - 1)


def test_a_context_aligned_no_better_at_full_width_keeps_the_original_programmes_alignment():
    """Under 80% in every band, and no more at full width: the alignment (which prediction still uses) is the one
    the original's banded programme traces, not the full-width table's equally long other one."""
    text, target = "leghgoeddnboelkima", "mpojjmkjfdpfoeodd"
    aligned = squad.align_context(text, list(target), True)
    reference, score = _reference_alignment(text, target, True)
    assert aligned.band_width is None and aligned.matched == score == 4
    full = alignment._trace_back(alignment._banded_lcs(list(text), target, len(text) + 1)[1], len(text),
                                 len(target))[0]
    assert full != reference  # the full-width table traces another alignment of the same length
    assert list(aligned.start_token_of_char) == [squad.convert_index(reference, c) for c in range(len(text))]


def test_unmatched_characters_take_a_start_and_an_end_from_their_neighbours():
    """A piece character with no raw character (X between b and c) starts at c and ends at b; a raw character with
    no piece character (X between b and c) starts in the piece after it and ends in the piece before it."""
    inserted = squad.align_context("abcd", ["ab", "X", "cd"], True)
    assert (inserted.tok_start_to_orig_index, inserted.tok_end_to_orig_index) == ([0, 2, 2], [1, 1, 3])
    dropped = squad.align_context("abXcd", ["ab", "cd"], True)
    assert list(dropped.start_token_of_char) == [0, 0, 1, 1, 1]
    assert list(dropped.end_token_of_char) == [0, 0, 0, 1, 1]
    assert dropped.token_span(2, 2) == (1, 0) and dropped.char_span(0, 1) == (0, 4)


def test_latex_quotes_align_character_for_character(tokenizer):
    """The original's preprocessing keeps `` and '' (a quote is its own normalised self), so an SST-2 style
    context holding them aligns every character and a quoted answer maps back to its exact text."""
    text = "the draw ( for `` big bad love '' ) is a solid performance by arliss howard ."
    pieces = tokenizer.tokenize(text)
    assert "``" in pieces and pieces.count("'") == 2
    alignment = squad.align_context(text, pieces, True)
    assert alignment.matched == len(text)
    start, end = text.index("``"), text.index("''") + 1
    first, last = alignment.char_span(*alignment.token_span(start, end))
    assert text[first:last + 1] == "`` big bad love ''"


def _nearest_rule(index, pos, m, is_start):
    """The docstring's rule from the nearest matched neighbours: a start after its left one (its right one when
    nothing lies between them, 0 with nothing on the left), an end before its right one (its left one when nothing
    lies between, m - 1 with nothing on the right); with nothing on one side and no room, the other side's."""
    if index[pos] is not None:
        return index[pos]
    left = next((index[p] for p in range(pos - 1, -1, -1) if index[p] is not None), None)
    right = next((index[p] for p in range(pos + 1, len(index)) if index[p] is not None), None)
    if left is None:
        return (0 if is_start else right - 1) if right >= 1 else right
    if right is None:
        room = m is not None and left < m - 1
        return (left + 1 if is_start else m - 1) if room else left
    if right > left + 1:
        return left + 1 if is_start else right - 1
    return right if is_start else left


def test_convert_index_follows_its_nearest_neighbour_rule_on_random_mappings():
    rng = random.Random(11)
    for _ in range(3000):
        n = rng.randint(1, 9)
        index = [None] * n
        value = rng.randint(0, 2)
        for p in sorted(rng.sample(range(n), rng.randint(1, n))):
            index[p] = value
            value += rng.randint(1, 3)
        m = rng.choice([None, value, value + rng.randint(0, 3)])
        pos = rng.randrange(n)
        for is_start in (True, False):
            assert squad.convert_index(index, pos, m, is_start) == _nearest_rule(index, pos, m, is_start), (
                index, pos, m, is_start)
        assert squad.convert_index(index, pos, m) == _nearest_rule(index, pos, m, True)
    with pytest.raises(ValueError, match="nothing is aligned"):
        squad.convert_index([None, None], 1)


def test_convert_index_matches_hand_worked_cases():
    index = [None, 0, None, None, 5, None]
    assert squad.convert_index(index, 1) == 0
    assert squad.convert_index(index, 2, is_start=True) == 1  # after the left match
    assert squad.convert_index(index, 3, is_start=False) == 4  # before the right match
    assert squad.convert_index(index, 0, is_start=True) == 0  # nothing on the left: 0 (right match is 0)
    assert squad.convert_index(index, 5, m=9, is_start=True) == 6
    assert squad.convert_index(index, 5, m=9, is_start=False) == 8
    assert squad.convert_index([None, 3], 0, is_start=True) == 0
    assert squad.convert_index([None, 3], 0, is_start=False) == 2


def _alignment_report(dataset, tokenizer, alignments=None):
    """Maps every gold answer to pieces and back; returns (counter of outcomes, examples of non-exact ones)."""
    outcomes, samples, cache = collections.Counter(), collections.defaultdict(list), {}
    alignments = {} if alignments is None else alignments
    for article in dataset["data"]:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            alignment = squad.align_context(context, tokenizer.tokenize(context), True, cache)
            alignments[context] = alignment
            for qa in paragraph["qas"]:
                for answer in qa["answers"]:
                    start = answer["answer_start"]
                    end = start + len(answer["text"]) - 1
                    first, last = alignment.char_span(*alignment.token_span(start, end))
                    got = context[first:last + 1].strip()
                    if got == answer["text"]:
                        kind = "exact"
                    elif first <= start and last >= end and answer["text"] in got:
                        kind = "piece wider than the answer"
                    else:
                        kind = "other"
                    outcomes[kind] += 1
                    if kind != "exact":
                        samples[kind].append((answer["text"], got))
    return outcomes, samples


def _original_window_count(context_pieces, query_pieces, max_seq_length, doc_stride, max_query_length):
    """The windows the original's `convert_examples_to_features` cuts a context into, by its loop: each window
    holds up to max_seq_length - (query, cut to max_query_length) - 3 pieces, the next one starting
    min(window, doc_stride) pieces later, until a window reaches the end."""
    room = max_seq_length - min(query_pieces, max_query_length) - 3
    start, count = 0, 0
    while start < context_pieces:
        count += 1
        if start + room >= context_pieces:
            break
        start += min(room, doc_stride)
    return max(count, 1)


def _check_dataset(dataset, path, tokenizer):
    """Independent checks of reading, aligning and windowing a SQuAD v1.1 file: the counts are the raw JSON's
    and the original's window rule's, and every gold answer is found again (exactly, or inside the smallest span
    of whole pieces holding it)."""
    questions = [qa for article in dataset["data"] for p in article["paragraphs"] for qa in p["qas"]]
    answers = sum(len(qa["answers"]) for qa in questions)
    alignments = {}
    outcomes, samples = _alignment_report(dataset, tokenizer, alignments)
    print(f"\n{os.path.basename(path)}: {dict(outcomes)}; not exact (first 20): "
          f"{samples['piece wider than the answer'][:20]}")
    assert sum(outcomes.values()) == answers and outcomes["other"] == 0
    assert outcomes["piece wider than the answer"] <= 0.01 * answers  # answers starting or ending inside a piece

    # Through the training windows (max_seq_length 384, doc_stride 128, max_query_length 64), as the original
    # builds them: the answer each question trains on, read back from its window.
    examples = squad.read_squad_examples(path, is_training=True)
    assert len(examples) == len(questions)
    stats = squad.ConversionStats()
    features = squad.convert_examples_to_features(examples, tokenizer, 384, 128, 64, True, stats=stats,
                                                  alignment_cache=alignments)
    windows = sum(_original_window_count(len(tokenizer.tokenize(e.paragraph_text)),
                                         len(tokenizer.tokenize(e.question_text)), 384, 128, 64) for e in examples)
    assert (stats.examples, stats.features, stats.alignment_failures) == (len(questions), windows, [])
    read_back = {}
    for f in features:
        if not f.is_impossible and f.example_index not in read_back:
            example = examples[f.example_index]
            first = f.tok_start_to_orig_index[f.start_position - f.doc_offset]
            last = f.tok_end_to_orig_index[f.end_position - f.doc_offset]
            read_back[f.example_index] = example.paragraph_text[first:last + 1].strip()
    assert len(read_back) == len(examples)
    exact = sum(read_back[i] == e.orig_answer_text for i, e in enumerate(examples))
    same_words = sum(squad_evaluation.exact_match(read_back[i], e.orig_answer_text) for i, e in enumerate(examples))
    print(f"training answers read back from their windows: {exact} of {len(examples)} exact, {same_words} equal "
          "after the official normalisation")
    assert all(e.orig_answer_text in read_back[i] for i, e in enumerate(examples))
    assert exact >= 0.99 * len(examples)


def test_gold_answers_map_back_exactly_on_the_shipped_sample(tokenizer):
    with open(SAMPLE_V1, encoding="utf-8") as f:
        dataset = json.load(f)
    _check_dataset(dataset, SAMPLE_V1, tokenizer)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(SHARED_V1), reason="the full SQuAD v1.1 dev set is not beside the checkout")
def test_gold_answers_map_back_exactly_on_the_full_v1_dev_set(tokenizer):
    with zipfile.ZipFile(SHARED_V1) as archive:
        dataset = json.loads(archive.read("dev-v1.1.json"))
    _check_dataset(dataset, SHARED_V1, tokenizer)


# ------------------------------------------------------------------------------------------------------------------
# Windows.

def test_max_context_owner_is_the_first_best_window_on_random_layouts():
    """Each piece's max-context window, on random window layouts (the original's sliding windows and arbitrary
    overlapping ones): the window with the highest min(left, right) + 0.01 x length, the first one on a tie (the
    original's strict `score > best_score`), against a brute force over the windows holding the piece."""
    rng = np.random.default_rng(5)
    layouts = [squad.doc_spans_for(int(rng.integers(1, 80)), int(rng.integers(2, 30)), int(rng.integers(1, 30)))
               for _ in range(300)]
    for _ in range(300):
        num_tokens = int(rng.integers(1, 60))
        starts = sorted(rng.integers(0, num_tokens, int(rng.integers(1, 6))).tolist())
        layouts.append([(s, int(rng.integers(1, num_tokens - s + 1))) for s in starts])
    ties = 0
    for spans in layouts:
        num_tokens = max(s + n for s, n in spans)
        owners = squad.max_context_owners(spans, num_tokens)
        for position in range(num_tokens):
            holding = [i for i, (s, n) in enumerate(spans) if s <= position < s + n]
            scores = [min(position - spans[i][0], spans[i][0] + spans[i][1] - 1 - position) + 0.01 * spans[i][1]
                      for i in holding]
            best = holding[scores.index(max(scores))] if holding else None  # list.index: the first
            ties += scores.count(max(scores)) > 1 if holding else 0
            assert owners[position] == best, (spans, position)
            assert [squad.is_max_context(spans, i, position) for i in range(len(spans))] == [
                i == best for i in range(len(spans))], (spans, position)
    assert ties > 100  # the layouts do hold ties, where first and last differ


def test_length_settings_leave_room_for_context_as_the_originals_check():
    squad.check_lengths(20, 16)  # [CLS] 16 question pieces [SEP] 1 context piece [SEP]; doc_stride 1
    with pytest.raises(UsageError, match=r"max_seq_length \(19\) must be greater than max_query_length \(16\) \+ 3"):
        squad.check_lengths(19, 16)
    with pytest.raises(UsageError, match=r"doc_stride must be at least 1, got 0"):
        squad.check_lengths(64, 16, doc_stride=0)


def test_windows_are_numbered_from_the_originals_first_id_and_none_is_impossible_for_prediction(tokenizer):
    example = squad.SquadExample("q", "Which token?", " ".join(f"token{i}" for i in range(40)))
    features = squad.convert_examples_to_features([example], tokenizer, 48, 16, 16, False)
    assert [f.unique_id for f in features] == list(range(1000000000, 1000000000 + len(features)))
    assert len(features) > 1 and not any(f.is_impossible for f in features)
    assert squad.doc_spans_for(0, 10, 4) == []  # a context of no pieces has no window, as the original's loop


def test_window_layout_p_mask_and_max_context(tokenizer):
    context = " ".join(f"token{i}" for i in range(40))
    question = "Which token comes after token7?"
    example = squad.SquadExample("q", question, context, orig_answer_text="token8",
                                 start_position=context.index("token8 "), is_impossible=False)
    features = squad.convert_examples_to_features([example], tokenizer, 64, 20, 16, True)
    query = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(question))
    pieces = tokenizer.tokenize(context)
    cls_id, sep_id = tokenizer.token_id("[CLS]"), tokenizer.token_id("[SEP]")
    spans = squad.doc_spans_for(len(pieces), 64 - len(query) - 3, 20)
    assert len(features) == len(spans) > 2
    assert [s for s, _ in spans] == list(range(0, 20 * len(spans), 20))
    owners = collections.Counter()
    for f, (start, length) in zip(features, spans):
        n = len(f.input_ids)
        assert n == len(f.input_mask) == len(f.segment_ids) == len(f.p_mask) == 64
        assert f.input_ids[:len(query) + 2] == [cls_id] + query + [sep_id]
        assert f.input_ids[f.doc_offset + length] == sep_id and f.paragraph_len == f.doc_offset + length + 1
        assert f.p_mask == [0] + [1] * (len(query) + 1) + [0] * length + [1] * (65 - f.paragraph_len)
        assert f.segment_ids == [0] * f.doc_offset + [1] * (length + 1) + [0] * (64 - f.paragraph_len)
        assert f.input_mask == [1] * f.paragraph_len + [0] * (64 - f.paragraph_len)
        assert sorted(f.token_is_max_context) == list(range(f.doc_offset, f.doc_offset + length))
        owners.update(start + p - f.doc_offset for p, best in f.token_is_max_context.items() if best)
    assert sorted(owners) == list(range(len(pieces))) and set(owners.values()) == {1}
    # Windows holding the whole answer point at it; the others point at [CLS].
    for f, (start, length) in zip(features, spans):
        if f.is_impossible:
            assert (f.start_position, f.end_position) == (0, 0)
            continue
        assert 0 <= f.start_position - f.doc_offset <= f.end_position - f.doc_offset < length
        first = f.tok_start_to_orig_index[f.start_position - f.doc_offset]
        last = f.tok_end_to_orig_index[f.end_position - f.doc_offset]
        assert context[first:last + 1].strip() == "token8"  # a piece's word-boundary mark covers the space
    assert 1 <= sum(not f.is_impossible for f in features) < len(features)


def test_a_window_holds_the_answer_only_when_it_holds_its_last_piece(tokenizer):
    context = " ".join(f"token{i}" for i in range(12))
    pieces = tokenizer.tokenize(context)
    word_ends = [i for i in range(len(pieces)) if i + 1 == len(pieces) or pieces[i + 1].startswith("\u2581")]
    last, question = word_ends[8], "Which?"  # "token8" ends at piece `last`
    example = squad.SquadExample("q", question, context, "token8", context.index("token8"), False)
    stats = squad.ConversionStats()
    # The first window holds pieces 0 .. last - 1: the answer less its last piece.
    max_seq_length = last + len(tokenizer.tokenize(question)) + 3
    features = squad.convert_examples_to_features([example], tokenizer, max_seq_length, 2, 16, True, stats=stats)
    assert features[0].is_impossible and (features[0].start_position, features[0].end_position) == (0, 0)
    assert not features[1].is_impossible
    assert (stats.negative, stats.positive) == (sum(f.is_impossible for f in features),
                                                sum(not f.is_impossible for f in features))


def test_v2_impossible_questions_point_at_cls(tokenizer):
    examples = squad.read_squad_examples(SAMPLE_V2, is_training=True)
    features = squad.convert_examples_to_features(examples, tokenizer, 128, 64, 32, True)
    for f in features:
        if examples[f.example_index].is_impossible:
            assert f.is_impossible and (f.start_position, f.end_position) == (0, 0)
        if not f.is_impossible:
            e = examples[f.example_index]
            first = f.tok_start_to_orig_index[f.start_position - f.doc_offset]
            last = f.tok_end_to_orig_index[f.end_position - f.doc_offset]
            assert e.paragraph_text[first:last + 1].strip() == e.orig_answer_text


# ------------------------------------------------------------------------------------------------------------------
# Caches.

def test_feature_cache_round_trip_reuse_and_rebuild(tokenizer, tmp_path, caplog):
    feature_file = str(tmp_path / "cache" / "predict.tf_record")
    built = squad.build_or_load_features(SAMPLE_V2, feature_file, tokenizer, 128, 64, 32, is_training=False)
    assert not built.from_cache and built.num_features == len(built.features) > 14
    assert sorted(os.listdir(tmp_path / "cache")) == ["predict.tf_record", "predict.tf_record.json"]
    cached = squad.build_or_load_features(SAMPLE_V2, feature_file, tokenizer, 128, 64, 32, is_training=False)
    assert cached.from_cache and cached.features == built.features
    with caplog.at_level(logging.WARNING):
        rebuilt = squad.build_or_load_features(SAMPLE_V2, feature_file, tokenizer, 128, 48, 32, is_training=False)
    assert not rebuilt.from_cache and "rebuilding" in caplog.text and rebuilt.num_features > built.num_features
    # A feature file without its meta file (an interrupted run) is rebuilt, not trusted.
    os.remove(feature_file + ".json")
    again = squad.build_or_load_features(SAMPLE_V2, feature_file, tokenizer, 128, 48, 32, is_training=False)
    assert not again.from_cache and again.features == rebuilt.features
    # The tokenizer is keyed as in every task's cache, so a cased one rebuilds.
    assert records.read_meta(feature_file)["key"]["tokenizer"] == records.tokenizer_fingerprint(tokenizer)
    cased = FullTokenizer(spm_model_file=tokenizer.spm_model_file, do_lower_case=False)
    assert not squad.build_or_load_features(SAMPLE_V2, feature_file, cased, 128, 48, 32, is_training=False).from_cache
    # Training files hold the labels, in the original's record layout.
    train_file = str(tmp_path / "train.tf_record")
    train = squad.build_or_load_features(SAMPLE_V2, train_file, tokenizer, 128, 64, 32, is_training=True)
    import tensorflow as tf

    batch = next(iter(squad.training_dataset(train_file, 128, 4)))
    assert set(batch) == {"unique_ids", "input_ids", "input_mask", "segment_ids", "p_mask", "start_positions",
                          "end_positions", "is_impossible"}
    assert batch["input_ids"].shape == (4, 128) and batch["input_ids"].dtype == tf.int32
    assert train.num_features == sum(1 for _ in tf.data.TFRecordDataset(train_file))


def test_training_features_follow_the_originals_shuffle_stream_and_are_keyed_by_its_seed(tokenizer, tmp_path):
    train_file = str(tmp_path / "train.tf_record")
    expected, _ = squad.read_examples(SAMPLE_V2, True, None)
    random.Random(12345).shuffle(expected)  # run_squad_v2.py's seed
    assert [e.qas_id for e in squad.read_examples(SAMPLE_V2, True)[0]] == [e.qas_id for e in expected]
    built = squad.build_or_load_features(SAMPLE_V2, train_file, tokenizer, 128, 64, 32, is_training=True)
    assert [e.qas_id for e in built.examples] == [e.qas_id for e in expected]
    assert built.features is None and not built.from_cache
    conversion = built.conversion
    assert conversion["examples"] == len(expected) and conversion["features"] == built.num_features
    assert conversion["positive"] + conversion["negative"] == built.num_features and conversion["negative"] > 0
    cached = squad.build_or_load_features(SAMPLE_V2, train_file, tokenizer, 128, 64, 32, is_training=True)
    assert cached.from_cache and cached.features is None and cached.conversion == conversion
    assert records.read_meta(train_file)["key"]["shuffle_seed"] == 12345
    reshuffled = squad.build_or_load_features(SAMPLE_V2, train_file, tokenizer, 128, 64, 32, is_training=True,
                                              shuffle_seed=7)
    assert not reshuffled.from_cache
    predict_file = str(tmp_path / "predict.tf_record")
    squad.build_or_load_features(SAMPLE_V2, predict_file, tokenizer, 128, 64, 32, is_training=False)
    assert records.read_meta(predict_file)["key"]["shuffle_seed"] is None


def test_training_windows_round_trip_through_their_records_with_their_labels(tokenizer):
    examples, _ = squad.read_examples(SAMPLE_V2, True, None)
    features = []
    squad.convert_examples_to_features(examples, tokenizer, 128, 64, 32, True, output_fn=features.append)
    back = [squad.example_to_feature(squad.feature_to_example(f, True).SerializeToString()) for f in features]
    assert back == features and {f.is_impossible for f in features} == {True, False}


def test_a_resumed_training_stream_skips_the_batches_already_seen(tokenizer, tmp_path):
    train_file = str(tmp_path / "train.tf_record")
    squad.build_or_load_features(SAMPLE_V2, train_file, tokenizer, 128, 64, 32, is_training=True)

    def batches(count, **options):
        dataset = squad.training_dataset(train_file, 128, 2, **options).take(count)
        return [batch["unique_ids"].numpy().tolist() for batch in dataset]

    first = batches(3)
    assert first[0] != first[1] and batches(2, skip_batches=1) == first[1:]
    # The original's input_fn shuffles in a buffer of 100 records.
    assert inspect.signature(squad.training_dataset).parameters["shuffle_buffer"].default == 100


def test_a_wordpiece_tokenizer_is_refused_before_a_feature_file_is_written(tmp_path):
    vocab = _write(tmp_path / "vocab.txt", "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b"]) + "\n")
    feature_file = str(tmp_path / "cache" / "train.tf_record")
    with pytest.raises(ValueError, match="need a SentencePiece tokenizer"):
        squad.build_or_load_features(SAMPLE_V2, feature_file, FullTokenizer(vocab_file=vocab), 64, 16, 8, True)
    assert not os.path.exists(tmp_path / "cache")


def test_prediction_dataset_pads_the_last_batch(tokenizer, tmp_path):
    feature_file = str(tmp_path / "predict.tf_record")
    built = squad.build_or_load_features(SAMPLE_V2, feature_file, tokenizer, 128, 64, 32, is_training=False)
    batches = list(squad.prediction_dataset(feature_file, 128, 8, built.num_features))
    ids = np.concatenate([b["example_index"].numpy() for b in batches])
    assert all(b["input_ids"].shape[0] == 8 for b in batches)
    assert list(ids[ids >= 0]) == list(range(len(built.features)))
    assert (ids < 0).sum() == (-built.num_features) % 8


def test_dynamic_prediction_batches_are_the_windows_cut_to_their_longest(tokenizer, tmp_path):
    feature_file = str(tmp_path / "predict.tf_record")
    built = squad.build_or_load_features(SAMPLE_V2, feature_file, tokenizer, 128, 64, 32, is_training=False)
    def batches(min_length):
        return list(squad.prediction_dataset(feature_file, 128, 4, built.num_features, dynamic_padding=True,
                                             min_length=min_length, window_batches=2))

    longest = sorted({batch["input_ids"].shape[1] for batch in batches(1)})
    min_length = longest[len(longest) // 2]  # wider than some batches' windows, narrower than others'
    widths, seen = set(), []
    for batch in batches(min_length):
        width = batch["input_ids"].shape[1]
        widths.add(width)
        assert width == max(min_length, batch["input_mask"].numpy().sum(axis=1).max())
        assert batch["example_index"].shape == (4,) and all(batch[n].shape[0] == 4 for n in squad.SEQUENCE_FEATURES)
        for row, index in enumerate(batch["example_index"].numpy()):
            if index < 0:
                continue
            seen.append(index)
            feature = built.features[index]
            for name in squad.SEQUENCE_FEATURES:  # as in the features, p_mask 1 on the padding included
                np.testing.assert_array_equal(batch[name][row].numpy(), getattr(feature, name)[:width])
    assert sorted(seen) == list(range(built.num_features)) and min(widths) == min_length < max(widths)


# ------------------------------------------------------------------------------------------------------------------
# Post-processing.

def _one_window(tokenizer, context, question="What?", max_seq_length=64):
    example = squad.SquadExample("q", question, context)
    return example, squad.convert_examples_to_features([example], tokenizer, max_seq_length, 32, 16, False)


def test_v1_post_processing_validity_checks_and_nbest(tokenizer):
    example, features = _one_window(tokenizer, "Paris is the capital of France and its largest city.")
    (f,) = features
    n = len(f.input_ids)
    start, end = np.full(n, -10.0), np.full(n, -10.0)
    start[0] = end[0] = 9.0  # [CLS]: not in the context, dropped
    start[2] = 8.0  # in the question, dropped
    start[f.doc_offset] = 5.0  # "paris"
    end[f.doc_offset] = 4.0
    end[f.doc_offset + 3] = 6.0  # "paris is the capital"
    end[n - 1] = 7.0  # padding: dropped
    results = [post.RawResult(f.unique_id, start.tolist(), end.tolist())]
    result_dict = {}
    post.accumulate_predictions_v1(result_dict, [example], features, results, 20, 30)
    predictions, nbest = post.write_predictions_v1(result_dict, [example], features, 20)
    assert predictions["q"] == "Paris is the capital"
    texts = [e["text"] for e in nbest["q"]]
    assert texts[:2] == ["Paris is the capital", "Paris"]
    assert len(texts) == len(set(texts))
    probs = [e["probability"] for e in nbest["q"]]
    assert probs == sorted(probs, reverse=True) and sum(probs) == pytest.approx(1.0)
    # max_answer_length: the 4-piece span is dropped at 3.
    result_dict = {}
    post.accumulate_predictions_v1(result_dict, [example], features, results, 20, 3)
    assert post.write_predictions_v1(result_dict, [example], features, 20)[0]["q"] == "Paris"
    # A second evaluation of the same window is averaged in.
    doubled = [post.RawResult(f.unique_id, (start - 2.0).tolist(), end.tolist())]
    result_dict = {}
    post.accumulate_predictions_v1(result_dict, [example], features, results, 20, 30)
    post.accumulate_predictions_v1(result_dict, [example], features, doubled, 20, 30)
    _, nbest = post.write_predictions_v1(result_dict, [example], features, 20)
    assert nbest["q"][0]["start_log_prob"] == pytest.approx(4.0)
    # No valid span at all: the original's "empty".
    nothing = [post.RawResult(f.unique_id, [0.0] * n, [0.0] * n)]
    result_dict = {}
    post.accumulate_predictions_v1(result_dict, [example], features, nothing, 1, 30)
    assert post.write_predictions_v1(result_dict, [example], features, 1)[0]["q"] in ("empty", "Paris")


def test_v1_windows_are_combined_by_max_context(tokenizer):
    context = " ".join(f"w{i}" for i in range(30))
    example, features = _one_window(tokenizer, context, max_seq_length=24)
    assert len(features) > 1
    results = []
    for f in features:
        n = len(f.input_ids)
        start, end = np.full(n, -5.0), np.full(n, -5.0)
        # Every window votes for its own first context piece, which is max-context only in the first window.
        start[f.doc_offset] = end[f.doc_offset] = 3.0
        results.append(post.RawResult(f.unique_id, start.tolist(), end.tolist()))
    result_dict = {}
    post.accumulate_predictions_v1(result_dict, [example], features, results, 5, 30)
    predictions, nbest = post.write_predictions_v1(result_dict, [example], features, 5)
    first_piece = context[:features[0].tok_end_to_orig_index[0] + 1].strip()
    assert predictions["q"] == first_piece
    assert all(e["text"] for e in nbest["q"])


def test_v2_post_processing_null_score_and_threshold(tokenizer):
    context = " ".join(f"w{i}" for i in range(30))
    example, features = _one_window(tokenizer, context, max_seq_length=24)
    results = []
    for k, f in enumerate(features):
        starts = [f.doc_offset, 0, 1, 2, f.doc_offset + 1]
        ends = [f.doc_offset + 1] + [0] * 24
        results.append(post.RawResultV2(f.unique_id, [-0.1, -1, -2, -3, -4], starts, [-0.2] * 25, ends,
                                         cls_logits=2.0 - k))
    result_dict, cls_dict = {}, {}
    post.accumulate_predictions_v2(result_dict, cls_dict, [example], features, results, 20, 30, 5, 5)
    null = min(2.0 - k for k in range(len(features)))
    assert cls_dict == {0: [null]}
    predictions, null_odds, best, nbest = post.write_predictions_v2(result_dict, cls_dict, [example], features, 20)
    assert null_odds["q"] == null and predictions["q"] == best["q"] != ""
    kept, _, _, _ = post.write_predictions_v2(result_dict, cls_dict, [example], features, 20, null + 0.5)
    nulled, _, _, _ = post.write_predictions_v2(result_dict, cls_dict, [example], features, 20, null - 0.5)
    assert kept["q"] == best["q"] and nulled["q"] == ""


def test_oracle_logits_give_the_gold_answers(tokenizer):
    """Logits peaked on the gold pieces, through the whole post-processing, score the mapping's exact rate."""
    examples = squad.read_squad_examples(SAMPLE_V1, is_training=True)
    features = squad.convert_examples_to_features(examples, tokenizer, 128, 64, 32, True)
    results = []
    for f in features:
        start, end = np.zeros(len(f.input_ids)), np.zeros(len(f.input_ids))
        if not f.is_impossible:
            start[f.start_position] = end[f.end_position] = 10.0
        results.append(post.RawResult(f.unique_id, start.tolist(), end.tolist()))
    result_dict = {}
    post.accumulate_predictions_v1(result_dict, examples, features, results, 20, 30)
    predictions, _ = post.write_predictions_v1(result_dict, examples, features, 20)
    with open(SAMPLE_V1, encoding="utf-8") as f:
        scores = squad_evaluation.evaluate_v1(json.load(f), predictions)
    exact = sum(predictions[e.qas_id] == e.orig_answer_text for e in examples)
    print(f"\noracle predictions: {exact} of {len(examples)} exact texts, {scores}")
    assert exact >= len(examples) - 3 and scores["exact_match"] > 99.0
