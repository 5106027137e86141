"""Tokenization for pretraining data: the per-vocabulary tables (`TokenTables`: special ids, the vocabulary order,
the word-start rule per id), line normalisation in bulk (`normalize_lines`, the tokenizer's own
`preprocess_lines`) and the original's word-start rules."""

import itertools

import numpy as np

from albert_tf.text import tokenization

# The punctuation set of the original's SentencePiece word-start rule (note: no apostrophe, no "<=>").
_SP_PUNCTUATION = frozenset('!"#$%&()*+,-./:;?@[\\]^_`{|}~')
_SP_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz") | _SP_PUNCTUATION


def sentencepiece_word_start(piece):
    """The original's SentencePiece word-start rule (docs/pretraining_data.md, "Masking"); `piece` is a str."""
    if piece.startswith(("\u2581", "<")) or piece in _SP_PUNCTUATION:
        return True
    return any(ch.lower() not in _SP_WORD_CHARS for ch in piece)


def wordpiece_word_start(piece):
    """WordPiece: every piece starts a word except "##" continuations."""
    return not piece.startswith("##")


def normalize_lines(text, lower):
    """`tokenization.preprocess_text(line, lower=lower)` of every "\\n"-separated line of `text`, in bulk
    (`tokenization.preprocess_lines`; LaTeX quotes kept, as the original's `create_pretraining_data.py` keeps
    them)."""
    return tokenization.preprocess_lines(text, lower=lower)


class TokenTables:
    """Per-vocabulary lookup tables used by instance creation, built once from a `FullTokenizer`.

    Attributes:
      cls_id, sep_id, mask_id: ids of [CLS], [SEP], [MASK].
      vocab_ids: int64 [vocab_size], the ids in the order of `tokenizer.vocab` (the original draws random
        replacement tokens from that list).
      word_start: bool [max_id + 1]; `word_start[id]` is the word-start rule applied to the id's piece.
    """

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.is_sentencepiece = tokenizer.is_sentencepiece
        self.cls_id = tokenizer.token_id("[CLS]")
        self.sep_id = tokenizer.token_id("[SEP]")
        self.mask_id = tokenizer.token_id("[MASK]")
        self.vocab_ids = np.fromiter(tokenizer.vocab.values(), dtype=np.int64)
        self.vocab_size = len(self.vocab_ids)
        starts = sentencepiece_word_start if self.is_sentencepiece else wordpiece_word_start
        self.word_start = np.zeros(int(self.vocab_ids.max()) + 1, dtype=bool)
        for piece, idx in tokenizer.vocab.items():
            self.word_start[idx] = starts(piece)
        # Pieces hit by the original's digit-comma rule ("▁1,000," -> "▁1,000" ","); text with one is re-encoded
        # through `tokenization.encode_pieces`.
        self._comma_ids = np.zeros(len(self.word_start), dtype=bool)
        # SentencePiece threads for batch encoding (None: its default, all cores); worker processes use 1.
        self.num_threads = None
        if self.is_sentencepiece:
            for piece, idx in tokenizer.vocab.items():
                if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
                    self._comma_ids[idx] = True

    def lines_to_ids(self, text):
        """Token ids of every "\\n"-separated line of `text` (str).

        SentencePiece mode normalises all lines (`normalize_lines`) and encodes them in bulk; WordPiece mode strips
        each line and uses the tokenizer. Either way the ids equal `tokenizer.tokenize` line by line.

        Returns:
          `(ids, lengths)`: int32 [total] ids of all lines, concatenated, and per line its number of ids, or -1 for a
          line that is blank after normalisation (a document break).
        """
        if not self.is_sentencepiece:
            chunks, lengths = [], []
            for line in text.split("\n"):
                line = line.strip()
                if not line:
                    lengths.append(-1)
                    continue
                ids = self.tokenizer.convert_tokens_to_ids(self.tokenizer.tokenize(line))
                chunks.append(np.asarray(ids, dtype=np.int32))
                lengths.append(len(ids))
            return (np.concatenate(chunks) if chunks else np.zeros(0, np.int32)), lengths
        lines = normalize_lines(text, self.tokenizer.do_lower_case)
        nonblank = [line for line in lines if line]
        sp_model = self.tokenizer.sp_model
        encoded = sp_model.encode(nonblank, out_type=int, num_threads=self.num_threads)
        counts = [len(ids) for ids in encoded]
        ids = np.fromiter(itertools.chain.from_iterable(encoded), dtype=np.int32, count=sum(counts))
        hits = np.flatnonzero(self._comma_ids[ids]) if ids.size else ids
        if hits.size:
            # The few lines with a digit-comma piece go through the tokenizer's own rule.
            line_of = np.searchsorted(np.cumsum(counts), hits, side="right")
            for k in set(line_of.tolist()):
                pieces = tokenization.encode_pieces(sp_model, nonblank[k])
                encoded[k] = [sp_model.piece_to_id(p) for p in pieces]
            counts = [len(ids) for ids in encoded]
            ids = np.fromiter(itertools.chain.from_iterable(encoded), dtype=np.int32, count=sum(counts))
        it = iter(counts)
        return ids, [next(it) if line else -1 for line in lines]
