"""WordPiece tokenization (the original release's mode for BERT-style vocabularies such as `vocab_chinese.txt`).

The original scripts switch to this mode when `--vocab_file` is given without `--spm_model_file`; the Chinese
ALBERT models were trained with it. Tokenization has two stages, exposed under the original's class names:

* `BasicTokenizer`: cleans the text (drops NUL, U+FFFD and control/format characters; every whitespace
  character becomes a space), puts spaces around each CJK ideograph, splits on whitespace, then per word
  lowercases, decomposes with NFD and drops non-spacing marks (only when `do_lower_case`), and finally makes every
  punctuation character a word of its own (all non-alphanumeric printable ASCII counts as punctuation).
* `WordpieceTokenizer`: greedy longest-match-first over each word's characters; pieces after the first carry the
  `##` prefix. A word with a part that matches nothing, or longer than `max_input_chars_per_word` characters,
  becomes the unknown token as a whole.

`WordpieceTextTokenizer` chains the two with a vocabulary read by `load_vocab`; `FullTokenizer(vocab_file=...)`
uses it. The character classes are the predicates `is_whitespace`, `is_control`, `is_punctuation` and
`is_chinese_char`; the in-graph tokenizer (`albert_tf.text.preprocessor`) builds its regular expressions from these same
functions, so both paths classify characters identically.
"""

import collections
import os
import unicodedata

from albert_tf.text.common import TokenizerError, convert_to_unicode

UNK_TOKEN = "[UNK]"
SUFFIX_INDICATOR = "##"
# The original's `WordpieceTokenizer` default (google-research/albert and bert both use 200).
DEFAULT_MAX_INPUT_CHARS_PER_WORD = 200

# CJK Unified Ideographs and their extensions plus the compatibility blocks, as in the original. Hangul, kana and
# full-width Latin are deliberately not included: those scripts separate words with spaces.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

# Printable ASCII that is neither a letter nor a digit; "$", "^", "`", "+", "<", "=", ">", "|" and "~" are
# symbols in Unicode, but the original treats them as punctuation too.
ASCII_PUNCT_RANGES = ((33, 47), (58, 64), (91, 96), (123, 126))


def is_whitespace(char):
    """Space, tab, newline, carriage return, or any Unicode space separator (category Zs)."""
    if char in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(char) == "Zs"


def is_control(char):
    """Control (Cc) or format (Cf, e.g. zero-width space/joiner, BOM) characters, except tab/newline/CR."""
    if char in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def is_punctuation(char):
    """Unicode punctuation (categories P*) plus all non-alphanumeric printable ASCII."""
    cp = ord(char)
    if cp < 128:
        return any(lo <= cp <= hi for lo, hi in ASCII_PUNCT_RANGES)
    return unicodedata.category(char).startswith("P")


def is_chinese_char(cp):
    """Whether code point `cp` is in one of the CJK ideograph blocks (`CJK_RANGES`)."""
    return cp >= 0x3400 and any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def is_removed_in_cleanup(char):
    """Characters `BasicTokenizer` deletes before anything else: NUL, U+FFFD and controls (see `is_control`)."""
    return char in ("\x00", "\ufffd") or is_control(char)


def whitespace_tokenize(text):
    """Splits on runs of whitespace (Python's `str.split()` notion of it), dropping empty pieces."""
    return text.split()


def load_vocab(vocab_file):
    """Reads a WordPiece vocabulary file (see `parse_vocab`) into an OrderedDict token -> id.

    Raises:
      TokenizerError: the file is missing, unreadable or has no tokens; the message names it.
    """
    if not vocab_file or not os.path.isfile(vocab_file):
        raise TokenizerError(f"WordPiece vocabulary file not found: {vocab_file!r}")
    try:
        with open(vocab_file, "rb") as f:
            data = f.read()
    except OSError as err:
        raise TokenizerError(f"cannot read WordPiece vocabulary {vocab_file!r}: {err}") from None
    return parse_vocab(data, vocab_file)


def parse_vocab(data, source=None):
    """Parses the contents (bytes or str) of a vocabulary file: one token per line, id = order of first appearance.

    Matches the original's reader: lines are separated by "\n" only; a line's token is its first
    whitespace-separated field (so "token score" files work); a blank line is the token " " (it still takes an
    id); a repeated token keeps its first id and takes no new one. Invalid UTF-8 bytes are dropped. `source`
    names the file in the error raised for a vocabulary with no tokens.
    """
    text = convert_to_unicode(data)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the file's final newline ends the last line; it does not start a new one
    vocab = collections.OrderedDict()
    for line in lines:
        stripped = line.strip()
        token = stripped.split()[0] if stripped else " "
        if token not in vocab:
            vocab[token] = len(vocab)
    if not any(t.strip() for t in vocab):
        raise TokenizerError(f"WordPiece vocabulary {source!r} is empty")
    return vocab


class BasicTokenizer:
    """Cleanup, CJK spacing, optional lowercasing/accent stripping, and punctuation splitting (no vocabulary)."""

    def __init__(self, do_lower_case=True):
        self.do_lower_case = do_lower_case

    def tokenize(self, text):
        """Words and punctuation marks of `text` (str, or UTF-8 bytes with invalid bytes dropped)."""
        text = convert_to_unicode(text)
        text = self._clean_text(text)
        text = self._tokenize_chinese_chars(text)
        split_tokens = []
        for token in whitespace_tokenize(text):
            if self.do_lower_case:
                token = token.lower()
                token = self._run_strip_accents(token)
            split_tokens.extend(self._run_split_on_punc(token))
        return whitespace_tokenize(" ".join(split_tokens))

    @staticmethod
    def _run_strip_accents(text):
        """NFD, then drops non-spacing marks (category Mn)."""
        text = unicodedata.normalize("NFD", text)
        return "".join(c for c in text if unicodedata.category(c) != "Mn")

    @staticmethod
    def _run_split_on_punc(text):
        """Splits `text` so that every punctuation character is a token of its own."""
        output = []
        start_new_word = True
        for char in text:
            if is_punctuation(char):
                output.append([char])
                start_new_word = True
            else:
                if start_new_word:
                    output.append([])
                start_new_word = False
                output[-1].append(char)
        return ["".join(x) for x in output]

    @staticmethod
    def _tokenize_chinese_chars(text):
        """Puts a space on both sides of every CJK ideograph."""
        return "".join(f" {c} " if is_chinese_char(ord(c)) else c for c in text)

    @staticmethod
    def _clean_text(text):
        """Drops NUL, U+FFFD and control characters; turns every whitespace character into a space."""
        output = []
        for char in text:
            if is_removed_in_cleanup(char):
                continue
            output.append(" " if is_whitespace(char) else char)
        return "".join(output)


class WordpieceTokenizer:
    """Greedy longest-match-first WordPiece over whitespace-separated words (already basic-tokenized)."""

    def __init__(self, vocab, unk_token=UNK_TOKEN, max_input_chars_per_word=DEFAULT_MAX_INPUT_CHARS_PER_WORD):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize(self, text):
        """Word pieces of `text`; e.g. "unaffable" -> ["un", "##aff", "##able"] with a suitable vocabulary."""
        text = convert_to_unicode(text)
        output_tokens = []
        for token in whitespace_tokenize(text):
            output_tokens.extend(self._tokenize_word(token))
        return output_tokens

    def _tokenize_word(self, word):
        if len(word) > self.max_input_chars_per_word:
            return [self.unk_token]
        pieces = []
        start = 0
        while start < len(word):
            end = len(word)
            match = None
            while start < end:
                candidate = word[start:end]
                if start > 0:
                    candidate = SUFFIX_INDICATOR + candidate
                if candidate in self.vocab:
                    match = candidate
                    break
                end -= 1
            if match is None:
                return [self.unk_token]
            pieces.append(match)
            start = end
        return pieces


class WordpieceTextTokenizer:
    """Raw text to WordPiece tokens: `BasicTokenizer` then `WordpieceTokenizer`, sharing one vocabulary.

    Attributes mirror the original `FullTokenizer` in WordPiece mode: `vocab` (OrderedDict token -> id),
    `basic_tokenizer`, `wordpiece_tokenizer`.
    """

    def __init__(self, vocab, do_lower_case=True, unk_token=UNK_TOKEN,
                 max_input_chars_per_word=DEFAULT_MAX_INPUT_CHARS_PER_WORD, vocab_file=None):
        self.vocab = vocab
        self.vocab_file = vocab_file
        self.do_lower_case = do_lower_case
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word
        if unk_token not in vocab:
            raise TokenizerError(f"WordPiece vocabulary {vocab_file or '(in memory)'!r} has no {unk_token!r} token")
        self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
        self.wordpiece_tokenizer = WordpieceTokenizer(vocab, unk_token=unk_token,
                                                      max_input_chars_per_word=max_input_chars_per_word)

    @classmethod
    def from_file(cls, vocab_file, do_lower_case=True, **kwargs):
        """Reads `vocab_file` with `load_vocab` (errors name the file)."""
        return cls(load_vocab(vocab_file), do_lower_case=do_lower_case, vocab_file=vocab_file, **kwargs)

    def tokenize(self, text):
        tokens = []
        for word in self.basic_tokenizer.tokenize(text):
            tokens.extend(self.wordpiece_tokenizer.tokenize(word))
        return tokens
