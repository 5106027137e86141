"""What both tokenizers share: the SentencePiece word-start marker, the error type, and text decoding."""

from albert_tf.errors import AlbertError

SPIECE_UNDERLINE = "\u2581"


class TokenizerError(AlbertError):
    """The tokenizer's model or vocabulary file is missing or unreadable; the message names it."""


def convert_to_unicode(text):
    """Returns `text` as `str`, decoding UTF-8 bytes (invalid bytes are replaced, not fatal)."""
    if isinstance(text, str):
        return text
    if isinstance(text, bytes):
        return text.decode("utf-8", "ignore")
    raise TypeError(f"expected str or bytes, got {type(text).__name__}")
