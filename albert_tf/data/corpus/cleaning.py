"""Light cleaning of documents, each step optional: whitespace normalised (runs of whitespace become one space,
control characters go), empty documents and those shorter than `min_document_chars` dropped, exact duplicates
dropped (the first occurrence is kept; a 16-byte BLAKE2b digest per kept document is the only state that grows).
"""

import collections
import dataclasses
import hashlib
import re

from albert_tf.settings import NON_NEGATIVE, setting

# Whatever `str.splitlines` would break a line at: never inside an output sentence, normalised or not.
_LINE_BREAKS = re.compile(r"[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]+")
# Control and format characters that are not whitespace, and the byte-order mark.
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\ufeff]")


@dataclasses.dataclass(frozen=True)
class CleaningOptions:
    normalize_whitespace: bool = setting(True, "Turn runs of whitespace into one space and drop control characters "
                                               "(line breaks inside a paragraph always become spaces).")
    min_document_chars: int = setting(0, "Drop documents with fewer characters than this (after cleaning; 0 keeps all "
                                         "but empty ones).", flag_default=50, bounds=NON_NEGATIVE)
    deduplicate: bool = setting(True, "Drop documents whose cleaned text equals an earlier one's.")


def normalize(paragraph, normalize_whitespace=True):
    """One line of text: line breaks always become spaces; with `normalize_whitespace` control characters go and
    every run of whitespace becomes one space, with none at the ends."""
    if normalize_whitespace:
        return " ".join(_CONTROLS.sub("", paragraph).split())
    return _LINE_BREAKS.sub(" ", paragraph)


class Cleaner:
    """`clean(paragraphs)` returns the document's cleaned paragraphs, or None when it is dropped; `counts` says
    how many documents went which way ("read", "empty", "short", "duplicate", "kept")."""

    def __init__(self, options=CleaningOptions()):
        self.options = options
        self.counts = collections.Counter()
        self._seen = set()

    def clean(self, paragraphs):
        self.counts["read"] += 1
        cleaned = [normalize(p, self.options.normalize_whitespace) for p in paragraphs]
        cleaned = [p for p in cleaned if p.strip()]
        chars = sum(len(p) for p in cleaned)
        if not chars:
            self.counts["empty"] += 1
            return None
        if chars < self.options.min_document_chars:
            self.counts["short"] += 1
            return None
        if self.options.deduplicate:
            digest = hashlib.blake2b("\n".join(cleaned).encode("utf-8"), digest_size=16).digest()
            if digest in self._seen:
                self.counts["duplicate"] += 1
                return None
            self._seen.add(digest)
        self.counts["kept"] += 1
        return cleaned
