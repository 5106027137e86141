"""Aligning a context's SentencePiece pieces to its raw characters, as the original's `squad_utils`, so a span of
pieces maps to an exact slice of the context.

The pieces (with the word-boundary mark read as a space) are aligned to the raw characters by a
longest-common-subsequence dynamic programme restricted to a diagonal band, where each raw character is compared
after normalising it alone. The band starts at |len(raw) - len(pieces)| + 5 characters and is doubled once unless
more than 80% of the raw characters matched; characters left unmatched take the positions of their matched neighbours
(the original's `_convert_index`). (The original drops a question whose context aligns under 80% even after the
doubling; here a full-width programme is tried first, see `windows.ConversionStats.wide_alignments`.)
"""

import array
import dataclasses

from albert_tf.text.tokenization import SPIECE_UNDERLINE, preprocess_text

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
      full_width: whether only the full-width programme reached 80% (the original, which widens its band twice
        and no more, would drop the context).
    """

    pieces: list
    tok_start_to_orig_index: list
    tok_end_to_orig_index: list
    start_token_of_char: array.array
    end_token_of_char: array.array
    matched: int
    band_width: int
    full_width: bool = False
    piece_ids: list = None

    def token_span(self, start_char, end_char):
        """Pieces (first, last) covering raw characters start_char..end_char (inclusive), as the original."""
        return self.start_token_of_char[start_char], self.end_token_of_char[end_char]

    def char_span(self, start_piece, end_piece):
        """Raw characters (first, last) of pieces start_piece..end_piece."""
        return self.tok_start_to_orig_index[start_piece], self.tok_end_to_orig_index[end_piece]


class AlignmentError(ValueError):
    """No alignment of a context's pieces to its characters could be found (an empty context, or no character in
    common). Only `align_context` raises it, and `windows.convert_examples_to_features` catches it: the question is
    counted in `ConversionStats.alignment_failures` (skipped for training, answered "" in prediction), so a run never
    stops on it and it is no part of the `albert_tf.errors` family."""


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

    band = abs(n - m) + 5
    score, rows = _banded_lcs(raw, target, band)
    if score <= 0.8 * n:  # the original's one doubling of its band
        band *= 2
        score, rows = _banded_lcs(raw, target, band)
    full_width = False
    if score < 0.8 * n:
        full = max(n, m) + 1
        wide_score, wide_rows = _banded_lcs(raw, target, full)
        if wide_score > score:
            score, rows = wide_score, wide_rows
        band = full if score >= 0.8 * n else None
        full_width = band is not None
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
                            band_width=band, full_width=full_width)
