"""Python tokenization with the original release's semantics.

`FullTokenizer` wraps a SentencePiece model (`30k-clean.model`) and reproduces the original's text handling:
`preprocess_text` (whitespace folding, NFKD with accents stripped, lowercasing; `preprocess_lines` is the same
rule over many lines at once, which the pretraining records use) and `encode_pieces` (SentencePiece pieces with
the digit-comma rule). LaTeX-style quotes (`` and '') are left as they are, as the original leaves them;
`map_latex_quotes=True` turns them into " first, as Hugging Face's `AlbertTokenizer` (and XLNet's code) do, for
models fine-tuned through that tokenizer. Unlike the original, `tokenize()` applies
`preprocess_text` itself, so callers cannot forget it; both functions stay public for callers that need them.
Given only a `vocab_file`, `FullTokenizer` uses BERT-style WordPiece instead (`albert_tf.text.wordpiece`), as the
original does for its Chinese models.

`encode_pair` turns one example's text (or text pair) into the fixed-length `input_ids`/`input_mask`/
`segment_ids` lists of the original's classifier features; `albert_tf.text.preprocessor.AlbertTextPreprocessor`
does the same inside a TensorFlow graph and gives the same ids.
"""

import os
import unicodedata

import sentencepiece as spm

from albert_tf.text import wordpiece
from albert_tf.text.common import SPIECE_UNDERLINE, TokenizerError, convert_to_unicode

SPECIAL_TOKENS = ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")


def strip_accents(text):
    """NFKD with the combining marks dropped: the original's accent rule (ASCII text is returned as it is)."""
    if text.isascii():
        return text
    text = unicodedata.normalize("NFKD", text)
    return "".join(c for c in text if not unicodedata.combining(c))


def preprocess_lines(text, remove_space=True, lower=False, keep_accents=False, map_latex_quotes=False):
    """`preprocess_text` of every "\\n"-separated line of `text`, as a list: the one implementation of the rule.

    Done in bulk, which is what makes it fast on a corpus: the whitespace of each line is folded, the LaTeX quotes
    and the lowercasing run once over the whole text, and the accent pass only on lines that are not ASCII. Every
    step gives per line what it gives on the line alone, since "\\n" is left alone by NFKD and by case mapping.
    """
    lines = convert_to_unicode(text).split("\n")
    if remove_space:
        lines = [" ".join(line.split()) for line in lines]
    text = "\n".join(lines)
    if map_latex_quotes:
        text = text.replace("``", '"').replace("''", '"')
    if not keep_accents and not text.isascii():
        text = "\n".join(strip_accents(line) for line in text.split("\n"))
    if lower:
        text = text.lower()
    return text.split("\n")


def preprocess_text(inputs, remove_space=True, lower=False, keep_accents=False, map_latex_quotes=False):
    """Normalises text as the original's `preprocess_text` does before SentencePiece.

    Folds runs of whitespace (line breaks too) to one space and strips the ends, decomposes with NFKD and drops
    combining marks (accents) unless `keep_accents`, and lowercases if `lower`. With `map_latex_quotes` (not the
    original's rule: Hugging Face's), the LaTeX-style quotes `` and '' become " after the whitespace folding.
    The steps are `preprocess_lines`'.
    """
    outputs = convert_to_unicode(inputs)
    if remove_space:
        outputs = " ".join(outputs.split())
    return "\n".join(preprocess_lines(outputs, False, lower, keep_accents, map_latex_quotes))


def encode_pieces(sp_model, text, sample=False):
    """SentencePiece pieces of `text`, with the original's digit-comma rule.

    A piece longer than one character that ends in "," after a digit (e.g. "▁1,000,") is re-encoded without
    the comma and the comma becomes its own piece, so numbers are split consistently whatever follows them.
    `sample=True` uses SentencePiece's subword sampling (regularisation), as the original allows.
    """
    text = convert_to_unicode(text)
    if sample:
        pieces = sp_model.encode(text, out_type=str, enable_sampling=True, alpha=0.1, nbest_size=64)
    else:
        pieces = sp_model.encode(text, out_type=str)
    new_pieces = []
    for piece in pieces:
        if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
            sub = sp_model.encode(piece[:-1].replace(SPIECE_UNDERLINE, ""), out_type=str)
            if piece[0] != SPIECE_UNDERLINE and sub and sub[0][0] == SPIECE_UNDERLINE:
                if len(sub[0]) == 1:
                    sub = sub[1:]
                else:
                    sub[0] = sub[0][1:]
            sub.append(piece[-1])
            new_pieces.extend(sub)
        else:
            new_pieces.append(piece)
    return new_pieces


def load_sentencepiece(path):
    """Loads a SentencePiece model, raising `TokenizerError` naming the file if it cannot."""
    if not path or not os.path.isfile(path):
        raise TokenizerError(f"SentencePiece model file not found: {path!r}")
    sp_model = spm.SentencePieceProcessor()
    try:
        sp_model.load(path)
    except (OSError, RuntimeError) as err:
        raise TokenizerError(f"cannot read SentencePiece model {path!r}: {err}") from None
    return sp_model


class FullTokenizer:
    """Text to pieces to ids, with the original's method names.

    Args:
      vocab_file: a WordPiece vocabulary (one token per line); used when no `spm_model_file` is given.
      do_lower_case: lowercase text before tokenizing (the released English v2 models are uncased).
      spm_model_file: a SentencePiece model such as `30k-clean.model`.
      map_latex_quotes: SentencePiece mode: turn `` and '' into " before tokenizing, as Hugging Face's
        `AlbertTokenizer` does (the original does not; off by default).
    """

    def __init__(self, vocab_file=None, do_lower_case=True, spm_model_file=None, map_latex_quotes=False):
        self.do_lower_case = do_lower_case
        self.spm_model_file = spm_model_file
        self.vocab_file = vocab_file
        self.map_latex_quotes = bool(map_latex_quotes)
        if self.map_latex_quotes and not spm_model_file:
            raise TokenizerError("map_latex_quotes applies to SentencePiece models (spm_model_file) only")
        if spm_model_file:
            self.sp_model = load_sentencepiece(spm_model_file)
            self.vocab = {self.sp_model.id_to_piece(i): i for i in range(self.sp_model.get_piece_size())}
            self.wordpiece = None
        elif vocab_file:
            self.sp_model = None
            self.wordpiece = wordpiece.WordpieceTextTokenizer.from_file(vocab_file, do_lower_case=do_lower_case)
            self.vocab = self.wordpiece.vocab
            # The original's attribute names in this mode.
            self.basic_tokenizer = self.wordpiece.basic_tokenizer
            self.wordpiece_tokenizer = self.wordpiece.wordpiece_tokenizer
        else:
            raise TokenizerError("FullTokenizer needs spm_model_file (SentencePiece) or vocab_file (WordPiece)")
        self.inv_vocab = {i: t for t, i in self.vocab.items()}

    @property
    def is_sentencepiece(self):
        return self.sp_model is not None

    def preprocess(self, text):
        """The text normalisation `tokenize` applies (SentencePiece mode), exposed for alignment code."""
        return preprocess_text(text, lower=self.do_lower_case, map_latex_quotes=self.map_latex_quotes)

    def tokenize(self, text, sample=False):
        """Pieces of `text` after the original's preprocessing (see module docstring)."""
        if self.sp_model is not None:
            return encode_pieces(self.sp_model, self.preprocess(text), sample=sample)
        return self.wordpiece.tokenize(text)

    def convert_tokens_to_ids(self, tokens):
        if self.sp_model is not None:
            return [self.sp_model.piece_to_id(t) for t in tokens]
        return [self.vocab[t] for t in tokens]

    def convert_ids_to_tokens(self, ids):
        if self.sp_model is not None:
            return [self.sp_model.id_to_piece(int(i)) for i in ids]
        return [self.inv_vocab[int(i)] for i in ids]

    def token_id(self, token):
        """Id of a special token such as "[CLS]" (or its WordPiece equivalent), from the model file."""
        if token not in self.vocab:
            raise TokenizerError(f"token {token!r} is not in the vocabulary of "
                                 f"{self.spm_model_file or self.vocab_file}")
        return self.vocab[token]

    @property
    def pad_id(self):
        return self.vocab.get("<pad>", self.vocab.get("[PAD]", 0))

    @property
    def unk_token(self):
        return "<unk>" if self.sp_model is not None else "[UNK]"


def truncate_seq_pair(tokens_a, tokens_b, max_length):
    """Shortens two token lists in place until together they hold at most `max_length` tokens.

    One token at a time is removed from the end of the longer list (from `tokens_b` when they are equally long),
    as the original's `_truncate_seq_pair` does, so a short segment keeps all its tokens.
    """
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def encode_pair(tokenizer, text_a, text_b=None, max_seq_length=128):
    """Model inputs for one example, laid out as the original's classifier features.

    The tokens are `[CLS] A [SEP]` for a single text and `[CLS] A [SEP] B [SEP]` for a pair, then padded with id 0
    to `max_seq_length`. A pair longer than `max_seq_length - 3` tokens is cut by `truncate_seq_pair` (from the end
    of the longer segment); a single text is cut to its first `max_seq_length - 2` tokens. As in the original, a
    `text_b` that is empty or has no tokens gives the single-text layout.

    Args:
      tokenizer: a `FullTokenizer` (either mode).
      text_a: the first (or only) text, str or UTF-8 bytes.
      text_b: the second text of a pair, or None.
      max_seq_length: length of the returned lists.

    Returns:
      `(input_ids, input_mask, segment_ids)`, three lists of `max_seq_length` ints: token ids; 1 for real tokens and
      0 for padding; 0 for `[CLS] A [SEP]` (and padding) and 1 for `B [SEP]`.
    """
    tokens_a = tokenizer.tokenize(text_a)
    tokens_b = tokenizer.tokenize(text_b) if text_b else None
    if tokens_b:
        if max_seq_length < 3:
            raise ValueError(f"max_seq_length must be at least 3 for a text pair, got {max_seq_length}")
        truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
    else:
        if max_seq_length < 2:
            raise ValueError(f"max_seq_length must be at least 2, got {max_seq_length}")
        tokens_a = tokens_a[:max_seq_length - 2]
    tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
    segment_ids = [0] * len(tokens)
    if tokens_b:
        tokens += tokens_b + ["[SEP]"]
        segment_ids += [1] * (len(tokens_b) + 1)
    input_ids = tokenizer.convert_tokens_to_ids(tokens)
    input_mask = [1] * len(input_ids)
    padding = [0] * (max_seq_length - len(input_ids))
    return input_ids + padding, input_mask + padding, segment_ids + padding
