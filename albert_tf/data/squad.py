"""SQuAD v1.1 / v2.0 for ALBERT: reading the JSON, features as the original release builds them, feature caches,
and the tf.data pipelines.

Reading (`read_squad_examples`): the official JSON layout (`data` -> `paragraphs` -> `context`, `qas` -> `id`,
`question`, `answers`, and for v2.0 `is_impossible`). Plain `.json` files and `.zip` archives holding one are
accepted. A file that is not valid JSON, or that lacks a required field, raises `SquadDataError` naming the file and
where the problem is. An answer whose `answer_start` does not point at its `text` is warned about and counted in
`ReadStats`: for training it is moved to the occurrence of the text nearest the given offset when the text occurs in
the context, and the question is skipped otherwise; evaluation only reads the texts.

Features (`convert_examples_to_features`), as the original's `squad_utils`:

* the context is normalised (`tokenization.preprocess_text`) and cut into SentencePiece pieces; the pieces (with
  the word-boundary mark read as a space) are aligned to the raw context characters by a longest-common-subsequence
  dynamic programme restricted to a diagonal band, where each raw character is compared after normalising it alone.
  The band starts at |len(raw) - len(pieces)| + 5 characters and is doubled once if fewer than 80% of the raw
  characters matched; characters left unmatched take the positions of their matched neighbours (the original's
  `_convert_index`). Each piece thus has a first and a last raw character, and a span of pieces maps to an exact
  slice of the original context. (The original drops a question whose context aligns under 80% even after the
  doubling; here a full-width programme is tried first, see `ConversionStats.wide_alignments`.)
* `[CLS] question [SEP] context-window [SEP]`, the question cut to its first `max_query_length` pieces, windows of at
  most `max_seq_length - len(question) - 3` context pieces, each starting `doc_stride` pieces after the previous one;
* `p_mask` 1 on positions that cannot hold an answer (question, [SEP], padding), 0 on [CLS] and the context;
* each context piece is flagged in the window where it has the most context on its shorter side ("max context");
* training windows that do not contain the whole answer, and impossible (v2.0) questions, point at [CLS]
  (start = end = 0, `is_impossible` = 1), as the original does for both versions.

Caches (`build_or_load_features`): features are written to a TFRecord file (the original's `train_feature_file` /
`predict_feature_file`, with the same feature names) together with everything post-processing needs, so no pickle
side file is used. A small `<file>.meta.json` records a fingerprint of the inputs (data file, tokenizer model and
settings); a cache whose fingerprint differs is rebuilt. Both files are written under temporary names and renamed
into place, the meta file last.

Post-processing is in `albert_tf.evaluation.squad_postprocessing`.
"""

import array
import collections
import dataclasses
import io
import json
import logging
import random
import zipfile

import tensorflow as tf

from albert_tf import fileio
from albert_tf.data import records
from albert_tf.errors import DataError, UsageError
from albert_tf.text.tokenization import SPIECE_UNDERLINE, preprocess_text

UNIQUE_ID_START = 1000000000
FEATURE_FORMAT_VERSION = 1
ALIGNMENT_CACHE_SIZE = 4096  # contexts whose alignment is kept (training examples are shuffled)


class SquadDataError(DataError):
    """A SQuAD file cannot be read: not JSON, or a required field is missing; the message names the file and place."""


# ------------------------------------------------------------------------------------------------------------------
# Reading.

@dataclasses.dataclass
class SquadExample:
    """One question about one context.

    Attributes:
      qas_id: the question's `id`.
      question_text, paragraph_text: the raw question and context.
      orig_answer_text: training: the answer text ("" for impossible questions); else None.
      start_position: training: the answer's first character in `paragraph_text` (-1 if impossible); else None.
      is_impossible: training: the v2.0 `is_impossible` flag.
      answers: every gold answer text as in the file (for evaluation; empty for impossible questions).
    """

    qas_id: str
    question_text: str
    paragraph_text: str
    orig_answer_text: str = None
    start_position: int = None
    is_impossible: bool = False
    answers: tuple = ()

    @property
    def end_position(self):
        """Training: the answer's last character in `paragraph_text`."""
        if self.start_position is None or self.is_impossible:
            return None
        return self.start_position + len(self.orig_answer_text) - 1


@dataclasses.dataclass
class ReadStats:
    """What `read_squad_examples` found.

    Attributes:
      questions: questions read (examples returned plus skipped).
      impossible: questions marked `is_impossible`.
      offset_mismatches: ids of answers whose `answer_start` does not point at their text.
      offsets_repaired: training: ids whose answer was moved to the nearest occurrence of its text.
      skipped: training: ids dropped because the answer text does not occur in the context.
      extra_answers: training: questions with more than one answer (the first is used).
    """

    questions: int = 0
    impossible: int = 0
    offset_mismatches: list = dataclasses.field(default_factory=list)
    offsets_repaired: list = dataclasses.field(default_factory=list)
    skipped: list = dataclasses.field(default_factory=list)
    extra_answers: int = 0


def load_squad_json(input_file):
    """The parsed JSON of a SQuAD file (`.json`, or a `.zip` holding one `.json`); raises `SquadDataError`."""
    try:
        with tf.io.gfile.GFile(input_file, "rb") as f:
            raw = f.read()
    except (tf.errors.NotFoundError, OSError) as err:
        raise SquadDataError(f"cannot read SQuAD file {input_file!r}: {err}") from None
    name = input_file
    if raw[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            members = [m for m in archive.namelist() if m.endswith(".json")]
            if len(members) != 1:
                raise SquadDataError(f"{input_file}: a zip archive must hold exactly one .json file, found "
                                     f"{members or 'none'}")
            raw = archive.read(members[0])
            name = f"{input_file}:{members[0]}"
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise SquadDataError(f"{name} is not UTF-8 text: {err}") from None
    except json.JSONDecodeError as err:
        raise SquadDataError(f"{name} is not valid JSON: {err.msg} at line {err.lineno} column {err.colno}") \
            from None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise SquadDataError(f"{name} is not a SQuAD file: expected a JSON object with a 'data' list of articles")
    return data


def _field(obj, key, kind, where):
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, kind):
        expected = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise SquadDataError(f"{where}: missing or invalid {key!r} (expected {expected})")
    return value


def _nearest_occurrence(text, sub, offset):
    best = None
    start = text.find(sub)
    while start != -1:
        if best is None or abs(start - offset) < abs(best - offset):
            best = start
        start = text.find(sub, start + 1)
    return best


def read_squad_examples(input_file, is_training, stats=None):
    """Reads a SQuAD v1.1 or v2.0 file into a list of `SquadExample`s (one per question, in file order).

    Args:
      input_file: path of the `.json` (or `.zip`), any `tf.io.gfile` path.
      is_training: read the answer position (the first answer) for training.
      stats: an optional `ReadStats` filled in place (see its attributes).
    Raises:
      SquadDataError: not JSON, a required field missing (naming the article/paragraph/question), or an id repeated.
    """
    stats = stats if stats is not None else ReadStats()
    data = load_squad_json(input_file)
    examples, seen = [], set()
    for a, article in enumerate(data["data"]):
        where_a = f"{input_file}: data[{a}]"
        for p, paragraph in enumerate(_field(article, "paragraphs", list, where_a)):
            where_p = f"{where_a}.paragraphs[{p}]"
            context = _field(paragraph, "context", str, where_p)
            for q, qa in enumerate(_field(paragraph, "qas", list, where_p)):
                where_q = f"{where_p}.qas[{q}]"
                qas_id = _field(qa, "id", (str, int), where_q)
                qas_id = str(qas_id)
                where_q = f"{where_q} (id {qas_id})"
                if qas_id in seen:
                    raise SquadDataError(f"{where_q}: the question id is repeated; ids must be unique")
                seen.add(qas_id)
                question = _field(qa, "question", str, where_q)
                answers = qa.get("answers", [])
                if not isinstance(answers, list):
                    raise SquadDataError(f"{where_q}: 'answers' must be a list")
                for k, answer in enumerate(answers):
                    _field(answer, "text", str, f"{where_q}.answers[{k}]")
                    _field(answer, "answer_start", int, f"{where_q}.answers[{k}]")
                is_impossible = bool(qa.get("is_impossible", False))
                stats.questions += 1
                stats.impossible += int(is_impossible)
                mismatched = [ans for ans in answers
                              if context[ans["answer_start"]:ans["answer_start"] + len(ans["text"])] != ans["text"]]
                if mismatched:
                    stats.offset_mismatches.append(qas_id)
                    ans = mismatched[0]
                    found = context[ans["answer_start"]:ans["answer_start"] + len(ans["text"])]
                    logging.warning("%s: answer_start %d does not point at the answer text %r (the context has %r "
                                    "there)", where_q, ans["answer_start"], ans["text"], found)
                example = SquadExample(qas_id=qas_id, question_text=question, paragraph_text=context,
                                       answers=tuple(ans["text"] for ans in answers))
                if is_training:
                    example.is_impossible = is_impossible
                    if is_impossible:
                        example.start_position, example.orig_answer_text = -1, ""
                    else:
                        if not answers:
                            raise SquadDataError(f"{where_q}: a training question needs an answer (or "
                                                 "is_impossible: true)")
                        if len(answers) > 1:
                            stats.extra_answers += 1
                        text, start = answers[0]["text"], answers[0]["answer_start"]
                        if not text:
                            raise SquadDataError(f"{where_q}: empty answer text")
                        if context[start:start + len(text)] != text:
                            nearest = _nearest_occurrence(context, text, start)
                            if nearest is None:
                                stats.skipped.append(qas_id)
                                logging.warning("%s: skipped for training: the answer text %r does not occur in "
                                                "the context", where_q, text)
                                continue
                            stats.offsets_repaired.append(qas_id)
                            logging.warning("%s: answer moved from offset %d to %d, where its text occurs",
                                            where_q, start, nearest)
                            start = nearest
                        example.start_position, example.orig_answer_text = start, text
                examples.append(example)
    if stats.offset_mismatches:
        logging.warning("%s: %d answer offset(s) do not match their text (%d moved to the text, %d questions "
                        "skipped)", input_file, len(stats.offset_mismatches), len(stats.offsets_repaired),
                        len(stats.skipped))
    return examples


# ------------------------------------------------------------------------------------------------------------------
# Alignment of SentencePiece pieces to the raw context.

_UP, _LEFT, _DIAG, _UNSET = 0, 1, 2, 3


def _banded_lcs(raw, target, max_dist):
    """Longest common subsequence of `raw` (a list of normalised characters) and `target` (a string), computed
    only for cells with |i - j| < max_dist (j from i - max_dist to i + max_dist - 1), preferring up, then left,
    then diagonal moves only when they are strictly better, as the original.

    Returns (score at the last cell, rows) where rows[i] = (first column of the band, bytearray of moves).
    """
    n, m = len(raw), len(target)
    prev, cur = [0] * m, [0] * m
    rows = []
    for i in range(n):
        lo, hi = max(0, i - max_dist), min(m, i + max_dist)
        moves = bytearray(max(hi - lo, 0))
        char = raw[i]
        left = 0
        first_row = i == 0
        for j in range(lo, hi):
            if first_row:
                best, move = 0, _UNSET
            else:
                best, move = prev[j], _UP
            if left > best:
                best, move = left, _LEFT
            if char == target[j]:
                diag = (prev[j - 1] if (j > 0 and not first_row) else 0) + 1
                if diag > best:
                    best, move = diag, _DIAG
            cur[j] = best
            moves[j - lo] = move
            left = best
        rows.append((lo, moves))
        prev, cur = cur, prev
    last_lo, last_moves = rows[-1]
    score = prev[m - 1] if last_lo <= m - 1 < last_lo + len(last_moves) else 0
    return score, rows


def _trace_back(rows, n, m):
    orig_to_chartok = [None] * n
    chartok_to_orig = [None] * m
    i, j = n - 1, m - 1
    while i >= 0 and j >= 0:
        lo, moves = rows[i]
        if not lo <= j < lo + len(moves) or moves[j - lo] == _UNSET:
            break
        move = moves[j - lo]
        if move == _DIAG:
            orig_to_chartok[i] = j
            chartok_to_orig[j] = i
            i, j = i - 1, j - 1
        elif move == _LEFT:
            j -= 1
        else:
            i -= 1
    return orig_to_chartok, chartok_to_orig


def convert_index(index, pos, m=None, is_start=True):
    """Position for `pos` in a partial mapping `index` (None = unmatched), from its matched neighbours.

    As the original's `_convert_index`: a start takes the position after the matched one on its left (or the one on
    its right if nothing lies between them), an end the position before the matched one on its right; `m` bounds
    positions after the last match.
    """
    if index[pos] is not None:
        return index[pos]
    n = len(index)
    rear = pos
    while rear < n - 1 and index[rear] is None:
        rear += 1
    front = pos
    while front > 0 and index[front] is None:
        front -= 1
    if index[front] is None and index[rear] is None:
        raise ValueError("nothing is aligned")
    if index[front] is None:
        if index[rear] >= 1:
            return 0 if is_start else index[rear] - 1
        return index[rear]
    if index[rear] is None:
        if m is not None and index[front] < m - 1:
            return index[front] + 1 if is_start else m - 1
        return index[front]
    if index[rear] > index[front] + 1:
        return index[front] + 1 if is_start else index[rear] - 1
    return index[rear] if is_start else index[front]


@dataclasses.dataclass
class ContextAlignment:
    """A context's pieces and their raw-character spans.

    Attributes:
      pieces: SentencePiece pieces of the normalised context.
      tok_start_to_orig_index, tok_end_to_orig_index: first and last raw character of each piece.
      start_token_of_char, end_token_of_char: for each raw character, the piece an answer starting (ending) there
        starts (ends) in, as the original derives training positions.
      matched: characters matched by the alignment (the original requires more than 80% of the raw characters).
      band_width: the band of the programme that gave the alignment (`None` when no band reached 80%).
    """

    pieces: list
    tok_start_to_orig_index: list
    tok_end_to_orig_index: list
    start_token_of_char: array.array
    end_token_of_char: array.array
    matched: int
    band_width: int
    piece_ids: list = None

    def token_span(self, start_char, end_char):
        """Pieces (first, last) covering raw characters start_char..end_char (inclusive), as the original."""
        return self.start_token_of_char[start_char], self.end_token_of_char[end_char]

    def char_span(self, start_piece, end_piece):
        """Raw characters (first, last) of pieces start_piece..end_piece."""
        return self.tok_start_to_orig_index[start_piece], self.tok_end_to_orig_index[end_piece]


class AlignmentError(ValueError):
    """No alignment of a context's pieces to its characters could be found."""


def align_context(paragraph_text, pieces, do_lower_case, char_cache=None):
    """Aligns SentencePiece `pieces` of `paragraph_text` (after preprocessing) to its raw characters.

    Returns a `ContextAlignment`; raises `AlignmentError` when nothing can be aligned (e.g. an empty context).
    `band_width` is None when even a full-width programme matched no more than 80% of the characters (the original
    would drop such a context).
    """
    char_cache = {} if char_cache is None else char_cache
    chartok_to_tok, tok_start_to_chartok, tok_end_to_chartok = [], [], []
    count = 0
    texts = [piece.replace(SPIECE_UNDERLINE, " ") for piece in pieces]
    for i, text in enumerate(texts):
        chartok_to_tok.extend([i] * len(text))
        tok_start_to_chartok.append(count)
        count += len(text)
        tok_end_to_chartok.append(count - 1)
    target = "".join(texts)
    n, m = len(paragraph_text), len(target)
    if n == 0 or m == 0:
        raise AlignmentError("the context is empty" if n == 0 else "the context has no pieces")
    raw = []
    for char in paragraph_text:
        normalised = char_cache.get(char)
        if normalised is None:
            normalised = char_cache[char] = preprocess_text(char, lower=do_lower_case, remove_space=False)
        raw.append(normalised)

    max_dist = abs(n - m) + 5
    score, rows = 0, None
    for _ in range(2):
        score, rows = _banded_lcs(raw, target, max_dist)
        if score > 0.8 * n:
            break
        max_dist *= 2
    band = max_dist
    if score < 0.8 * n or score == 0:
        full = max(n, m) + 1
        wide_score, wide_rows = _banded_lcs(raw, target, full)
        if wide_score > score:
            score, rows = wide_score, wide_rows
        band = full if score >= 0.8 * n else None
    orig_to_chartok, chartok_to_orig = _trace_back(rows, n, m)
    if all(v is None for v in orig_to_chartok):
        raise AlignmentError("no character of the context matches its pieces")
    starts = [convert_index(chartok_to_orig, s, n, is_start=True) for s in tok_start_to_chartok]
    ends = [convert_index(chartok_to_orig, e, n, is_start=False) for e in tok_end_to_chartok]
    start_tokens = array.array("i", (chartok_to_tok[convert_index(orig_to_chartok, c, is_start=True)]
                                     for c in range(n)))
    end_tokens = array.array("i", (chartok_to_tok[convert_index(orig_to_chartok, c, is_start=False)]
                                   for c in range(n)))
    return ContextAlignment(pieces=list(pieces), tok_start_to_orig_index=starts, tok_end_to_orig_index=ends,
                            start_token_of_char=start_tokens, end_token_of_char=end_tokens, matched=int(score),
                            band_width=band)


# ------------------------------------------------------------------------------------------------------------------
# Features.

@dataclasses.dataclass
class InputFeatures:
    """One window of one example, with the original's fields.

    `token_is_max_context` maps a position in the window to whether the window is the piece's max-context window;
    `tok_start_to_orig_index`/`tok_end_to_orig_index` give each context piece of the window its raw characters;
    `doc_offset` is the position of the window's first context piece (len(question) + 2); `paragraph_len` is the
    number of real tokens (the original's name). `start_position`/`end_position`/`is_impossible` are set for training.
    """

    unique_id: int
    example_index: int
    doc_span_index: int
    tok_start_to_orig_index: list
    tok_end_to_orig_index: list
    token_is_max_context: dict
    input_ids: list
    input_mask: list
    segment_ids: list
    p_mask: list
    paragraph_len: int
    doc_offset: int
    start_position: int = None
    end_position: int = None
    is_impossible: bool = False


@dataclasses.dataclass
class ConversionStats:
    """What `convert_examples_to_features` did.

    Attributes:
      examples, features: counts in and out; positive / negative: training windows with and without the answer.
      truncated_questions: ids of questions longer than max_query_length pieces (cut to their first pieces).
      alignment_failures: ids whose context could not be aligned to its pieces (training: skipped; prediction: the
        question gets no window and is answered "").
      wide_alignments: ids whose context needed the full-width programme (the original would drop them).
    """

    examples: int = 0
    features: int = 0
    positive: int = 0
    negative: int = 0
    truncated_questions: list = dataclasses.field(default_factory=list)
    alignment_failures: list = dataclasses.field(default_factory=list)
    wide_alignments: list = dataclasses.field(default_factory=list)


def check_lengths(max_seq_length, max_query_length, doc_stride=1):
    """Raises ValueError unless the settings leave room for context pieces (as the original's flag check)."""
    if max_seq_length <= max_query_length + 3:
        raise UsageError(f"max_seq_length ({max_seq_length}) must be greater than max_query_length "
                         f"({max_query_length}) + 3: [CLS] question [SEP] context [SEP] would leave no room for the "
                         "context")
    if doc_stride < 1:
        raise UsageError(f"doc_stride must be at least 1, got {doc_stride}")


def doc_spans_for(num_tokens, max_tokens_for_doc, doc_stride):
    """(start, length) of each window over `num_tokens` context pieces, as the original's sliding windows."""
    spans, start = [], 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens_for_doc)
        spans.append((start, length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    return spans


def max_context_owners(doc_spans, num_tokens):
    """For each context piece, the index of the window where it has the max context (`is_max_context` for all
    pieces at once: the first window with the highest score wins)."""
    best_score = [None] * num_tokens
    owner = [None] * num_tokens
    for index, (start, length) in enumerate(doc_spans):
        end = start + length - 1
        bonus = 0.01 * length
        for position in range(start, end + 1):
            score = min(position - start, end - position) + bonus
            if best_score[position] is None or score > best_score[position]:
                best_score[position], owner[position] = score, index
    return owner


def is_max_context(doc_spans, span_index, position):
    """Whether window `span_index` gives piece `position` its largest min(left, right) context (+ 0.01 x length)."""
    best_score, best_index = None, None
    for index, (start, length) in enumerate(doc_spans):
        end = start + length - 1
        if position < start or position > end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return span_index == best_index


def _require_sentencepiece(tokenizer):
    if getattr(tokenizer, "sp_model", None) is None:
        raise UsageError("SQuAD features need a SentencePiece tokenizer (spm_model_file): the answer spans are found "
                         "by aligning SentencePiece pieces to the context characters. WordPiece vocabularies "
                         "(vocab_file only) are not supported for SQuAD, as in the original release.")


def convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training,
                                 output_fn=None, stats=None, log_every=1000, alignment_cache=None):
    """Builds the windows of each example (see module docstring).

    Args:
      examples: `SquadExample`s (read with `is_training` for training).
      tokenizer: a SentencePiece `tokenization.FullTokenizer`; its `do_lower_case` is used.
      max_seq_length, doc_stride, max_query_length: the original's flags.
      is_training: set `start_position`/`end_position`/`is_impossible` on the windows.
      output_fn: called with each `InputFeatures`; if None, the features are returned as a list.
      stats: an optional `ConversionStats` filled in place.
      alignment_cache: an optional dict {context: `ContextAlignment`} to share alignments between calls (by
        default the last `ALIGNMENT_CACHE_SIZE` contexts are kept during the call).
    Returns:
      the list of features when `output_fn` is None, else the number of features.
    """
    _require_sentencepiece(tokenizer)
    check_lengths(max_seq_length, max_query_length, doc_stride)
    stats = stats if stats is not None else ConversionStats()
    collected = [] if output_fn is None else None
    emit = collected.append if output_fn is None else output_fn
    do_lower_case = tokenizer.do_lower_case
    cls_id, sep_id = tokenizer.token_id("[CLS]"), tokenizer.token_id("[SEP]")
    alignments, char_cache = collections.OrderedDict(), {}
    if alignment_cache is not None:
        alignments = alignment_cache
    unique_id = UNIQUE_ID_START
    for example_index, example in enumerate(examples):
        if log_every and example_index % log_every == 0:
            logging.info("Converting %d/%d (windows: %d with the answer, %d without)", example_index, len(examples),
                         stats.positive, stats.negative)
        stats.examples += 1
        query_ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(example.question_text))
        if len(query_ids) > max_query_length:
            stats.truncated_questions.append(example.qas_id)
            query_ids = query_ids[:max_query_length]

        alignment = alignments.get(example.paragraph_text)
        if alignment is None:
            try:
                alignment = align_context(example.paragraph_text, tokenizer.tokenize(example.paragraph_text),
                                          do_lower_case, char_cache)
            except AlignmentError as err:
                alignment = err
            alignments[example.paragraph_text] = alignment
            if alignment_cache is None and len(alignments) > ALIGNMENT_CACHE_SIZE:
                alignments.popitem(last=False)
        elif alignment_cache is None:
            alignments.move_to_end(example.paragraph_text)
        if isinstance(alignment, AlignmentError):
            stats.alignment_failures.append(example.qas_id)
            logging.warning("Question %s: %s; %s", example.qas_id, alignment,
                            "skipped for training" if is_training else "it is answered \"\"")
            continue
        if alignment.band_width is None:
            stats.alignment_failures.append(example.qas_id)
            logging.warning("Question %s: only %d of %d context characters align to the pieces", example.qas_id,
                            alignment.matched, len(example.paragraph_text))
            if is_training:
                continue
        elif alignment.band_width > max(len(example.paragraph_text), 1):
            stats.wide_alignments.append(example.qas_id)

        tok_start_position = tok_end_position = None
        if is_training and example.is_impossible:
            tok_start_position = tok_end_position = 0
        elif is_training:
            tok_start_position, tok_end_position = alignment.token_span(example.start_position, example.end_position)

        if alignment.piece_ids is None:
            alignment.piece_ids = tokenizer.convert_tokens_to_ids(alignment.pieces)
        doc_ids = alignment.piece_ids
        max_tokens_for_doc = max_seq_length - len(query_ids) - 3
        doc_spans = doc_spans_for(len(doc_ids), max_tokens_for_doc, doc_stride)
        owners = max_context_owners(doc_spans, len(doc_ids))
        doc_offset = len(query_ids) + 2
        for span_index, (span_start, span_length) in enumerate(doc_spans):
            input_ids = [cls_id] + query_ids + [sep_id] + doc_ids[span_start:span_start + span_length]
            p_mask = [0] + [1] * (len(query_ids) + 1) + [0] * span_length
            token_is_max_context = {doc_offset + k: owners[span_start + k] == span_index
                                    for k in range(span_length)}
            input_ids.append(sep_id)
            p_mask.append(1)
            segment_ids = [0] * doc_offset + [1] * (span_length + 1)
            paragraph_len = len(input_ids)
            input_mask = [1] * paragraph_len
            padding = max_seq_length - paragraph_len
            input_ids += [0] * padding
            input_mask += [0] * padding
            segment_ids += [0] * padding
            p_mask += [1] * padding

            start_position = end_position = None
            span_is_impossible = bool(example.is_impossible) if is_training else False
            if is_training and not span_is_impossible:
                span_end = span_start + span_length - 1
                if tok_start_position >= span_start and tok_end_position <= span_end:
                    start_position = tok_start_position - span_start + doc_offset
                    end_position = tok_end_position - span_start + doc_offset
                else:
                    span_is_impossible = True
            if is_training and span_is_impossible:
                start_position = end_position = 0

            emit(InputFeatures(
                unique_id=unique_id, example_index=example_index, doc_span_index=span_index,
                tok_start_to_orig_index=alignment.tok_start_to_orig_index[span_start:span_start + span_length],
                tok_end_to_orig_index=alignment.tok_end_to_orig_index[span_start:span_start + span_length],
                token_is_max_context=token_is_max_context, input_ids=input_ids, input_mask=input_mask,
                segment_ids=segment_ids, p_mask=p_mask, paragraph_len=paragraph_len, doc_offset=doc_offset,
                start_position=start_position, end_position=end_position, is_impossible=span_is_impossible))
            unique_id += 1
            stats.features += 1
            if span_is_impossible:
                stats.negative += 1
            else:
                stats.positive += 1
    if stats.truncated_questions:
        logging.warning("%d question(s) are longer than max_query_length=%d pieces and were cut to their first %d "
                        "pieces (e.g. %s); their contexts are kept whole", len(stats.truncated_questions),
                        max_query_length, max_query_length, ", ".join(stats.truncated_questions[:3]))
    if stats.alignment_failures:
        logging.warning("%d question(s) whose context could not be aligned: %s", len(stats.alignment_failures),
                        ", ".join(stats.alignment_failures[:10]))
    logging.info("%d examples -> %d windows (%d with the answer, %d without)", stats.examples, stats.features,
                 stats.positive, stats.negative)
    return collected if output_fn is None else stats.features


# ------------------------------------------------------------------------------------------------------------------
# Feature files.

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


def features_key(input_file, tokenizer, max_seq_length, doc_stride, max_query_length, is_training,
                 shuffle_seed=None):
    """Everything the features of `input_file` depend on (the cache key)."""
    return {
        "format": FEATURE_FORMAT_VERSION,
        "input_file": fileio.file_sha256(input_file),
        "spm_model_file": fileio.file_sha256(tokenizer.spm_model_file) if tokenizer.spm_model_file else None,
        "do_lower_case": bool(tokenizer.do_lower_case),
        "map_latex_quotes": bool(tokenizer.map_latex_quotes),  # (absent from caches that always mapped them)
        "max_seq_length": max_seq_length, "doc_stride": doc_stride, "max_query_length": max_query_length,
        "is_training": bool(is_training), "shuffle_seed": shuffle_seed,
    }


@dataclasses.dataclass
class FeatureSet:
    """The result of `build_or_load_features`: examples, their windows (prediction; None for training, which
    streams from the file), the file, and the statistics of reading and conversion."""

    examples: list
    features: list
    feature_file: str
    num_features: int
    read_stats: ReadStats
    conversion: dict
    from_cache: bool


def read_examples(input_file, is_training, shuffle_seed=12345):
    """The examples of `input_file` and their `ReadStats` (training examples shuffled with
    `random.Random(shuffle_seed)`, as the original); an input without questions is refused."""
    read_stats = ReadStats()
    examples = read_squad_examples(input_file, is_training=is_training, stats=read_stats)
    if not examples:
        raise SquadDataError(f"{input_file} holds no question")
    if is_training and shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(examples)
    return examples, read_stats


def build_or_load_features(input_file, feature_file, tokenizer, max_seq_length, doc_stride, max_query_length,
                           is_training, shuffle_seed=12345, examples=None):
    """Reads `input_file` and writes its windows to `feature_file`, or reuses the file when it was written from the
    same inputs (`records.cached_records`).

    Training examples are shuffled with `random.Random(shuffle_seed)` before conversion, as the original does.
    `examples` (with their `ReadStats`, from `read_examples`) skips reading the file again.
    Returns a `FeatureSet`; prediction windows are returned in memory as well.
    """
    _require_sentencepiece(tokenizer)
    examples, read_stats = examples or read_examples(input_file, is_training, shuffle_seed)
    key = features_key(input_file, tokenizer, max_seq_length, doc_stride, max_query_length, is_training,
                       shuffle_seed if is_training else None)
    stats = ConversionStats()
    kept = [] if not is_training else None

    def write(writer):
        def output_fn(feature):
            writer.write(feature_to_example(feature, is_training).SerializeToString())
            if kept is not None:
                kept.append(feature)

        convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length,
                                     is_training, output_fn=output_fn, stats=stats)
        return {"num_examples": len(examples), "input_file": input_file,
                "conversion": {"examples": stats.examples, "features": stats.features, "positive": stats.positive,
                               "negative": stats.negative, "truncated_questions": len(stats.truncated_questions),
                               "alignment_failures": len(stats.alignment_failures),
                               "wide_alignments": len(stats.wide_alignments)}}

    cached = records.cached_records(feature_file, key, write)
    features = kept
    if not cached.written and not is_training:
        features = read_feature_file(feature_file)
        if len(features) != cached.num_records:
            raise SquadDataError(f"{feature_file} holds {len(features)} windows but its description says "
                                 f"{cached.num_records}; delete both to rebuild")
    return FeatureSet(examples, features, feature_file, cached.num_records, read_stats,
                      cached.meta.get("conversion", {}), not cached.written)


def feature_spec(max_seq_length, is_training):
    """`tf.io.parse_example` spec of the model inputs in a feature file."""
    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
            for name in ("input_ids", "input_mask", "segment_ids", "p_mask")}
    spec["unique_ids"] = tf.io.FixedLenFeature([], tf.int64)
    if is_training:
        for name in ("start_positions", "end_positions", "is_impossible"):
            spec[name] = tf.io.FixedLenFeature([], tf.int64)
    return spec


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
