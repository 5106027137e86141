"""Documents out of input files: plain text or JSON Lines, each plain, gzip (`.gz`) or bzip2 (`.bz2`), read as a
stream (one document in memory at a time).

* text: documents are separated by blank lines (a block of lines is one paragraph); with `document_per_file` the
  whole file is one document and its blank lines separate paragraphs.
* jsonl: one JSON object per line, its `text_field` a document; a blank line inside the text separates paragraphs.

The format follows the extension (`.txt`/`.text`: text, `.jsonl`/`.json`/`.ndjson`: jsonl, after removing `.gz` or
`.bz2`); a file with another extension (wikiextractor's `wiki_00`) is jsonl when its first non-blank byte is `{`,
else text. Invalid UTF-8 bytes are dropped (as `create_pretraining_data.py` does); a binary file, a line that is
not JSON or lacks the field raise `DataError` naming the file and line.
"""

import bz2
import dataclasses
import gzip
import json
import os
import re
import zlib

from albert_tf import fileio
from albert_tf.errors import DataError, UsageError

FORMATS = ("text", "jsonl")
EXTENSIONS = {".txt": "text", ".text": "text", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl"}
COMPRESSIONS = {".gz": lambda raw: gzip.GzipFile(fileobj=raw, mode="rb"),
                ".bz2": lambda raw: bz2.BZ2File(raw, "rb")}
_SNIFF_BYTES = 1 << 16
# A blank line inside a JSON text: the end of a paragraph.
_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n\s*")


@dataclasses.dataclass
class Document:
    """One document: where it starts (`path`, 1-based `line`) and its paragraphs (raw text, may hold newlines)."""

    path: str
    line: int
    paragraphs: list


def _split_ext(path):
    base, ext = os.path.splitext(path)
    compression = ext.lower() if ext.lower() in COMPRESSIONS else None
    if compression:
        ext = os.path.splitext(base)[1]
    return ext.lower(), compression


def input_format(path, head, requested="auto"):
    """The format of `path`: `requested` unless "auto", else by extension, else by the first non-blank byte of
    `head` (the start of its decompressed bytes)."""
    if requested != "auto":
        if requested not in FORMATS:
            raise UsageError(f"--input_format={requested}: must be one of auto, {', '.join(FORMATS)}")
        return requested
    ext, _ = _split_ext(path)
    if ext in EXTENSIONS:
        return EXTENSIONS[ext]
    return "jsonl" if head.lstrip()[:1] == b"{" else "text"


def _open_binary(path):
    if fileio.is_remote(path):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")  # pylint: disable=consider-using-with


def file_size(path):
    if fileio.is_remote(path):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        return tf.io.gfile.stat(path).length
    return os.path.getsize(path)


def _check_text(path, head):
    if b"\x00" in head:
        raise DataError(f"input file {path} looks binary (it contains NUL bytes); expected text or JSON Lines")
    controls = sum(head.count(bytes([c])) for c in range(32) if c not in (9, 10, 11, 12, 13)) + head.count(b"\x7f")
    if controls > 0.05 * len(head):
        raise DataError(f"input file {path} looks binary ({controls} control bytes in the first {len(head)}); "
                        "expected text or JSON Lines")


class CorpusFile:
    """One input file: `documents()` streams its documents; `bytes_read` is how far into the (compressed) file the
    reading has come, for progress."""

    def __init__(self, path, input_format_flag="auto", text_field="text", document_per_file=False):
        self.path = path
        self.requested = input_format_flag
        self.text_field = text_field
        self.document_per_file = document_per_file
        self.format = None
        self._raw = None

    @property
    def bytes_read(self):
        try:
            return self._raw.tell() if self._raw is not None else 0
        except (OSError, ValueError):
            return 0

    def _lines(self):
        """(1-based number, bytes) of each line of the decompressed file; the format is known before the first."""
        _, compression = _split_ext(self.path)
        try:
            with _open_binary(self.path) as raw:
                self._raw = raw
                stream = COMPRESSIONS[compression](raw) if compression else raw
                with stream:
                    head = stream.peek(_SNIFF_BYTES)[:_SNIFF_BYTES] if hasattr(stream, "peek") else b""
                    _check_text(self.path, head)
                    self.format = input_format(self.path, head, self.requested)
                    for number, line in enumerate(stream, 1):
                        yield number, line
        except (OSError, EOFError, zlib.error) as err:
            detail = getattr(err, "strerror", None) or str(err) or type(err).__name__
            raise DataError(f"cannot read input file {self.path}: {detail}") from None
        finally:
            self._raw = None

    def documents(self):
        """The file's documents, in order (empty ones included: the cleaning counts them)."""
        lines = self._lines()
        first = next(lines, None)
        if first is None:
            return
        if self.format == "jsonl":
            yield from self._jsonl(first, lines)
        else:
            yield from self._text(first, lines)

    def _text(self, first, lines):
        paragraphs, block, start = [], [], None
        for number, raw in _chain(first, lines):
            if b"\x00" in raw:
                raise DataError(f"{self.path}:{number}: binary data (a NUL byte); expected text")
            line = raw.decode("utf-8", "ignore")
            if line.strip():
                if start is None:
                    start = number
                block.append(line.rstrip("\r\n"))
                continue
            if block:
                paragraphs.append("\n".join(block))
                block = []
                if not self.document_per_file:
                    yield Document(self.path, start, paragraphs)
                    paragraphs, start = [], None
        if block:
            paragraphs.append("\n".join(block))
        if paragraphs:
            yield Document(self.path, start, paragraphs)

    def _jsonl(self, first, lines):
        field = self.text_field
        for number, raw in _chain(first, lines):
            line = raw.decode("utf-8", "ignore")
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as err:
                hint = " (a JSON array? give JSON Lines: one object per line)" if line.lstrip()[:1] == "[" else ""
                raise DataError(f"{self.path}:{number}: not a JSON object: {err}{hint}") from None
            if not isinstance(record, dict) or field not in record:
                keys = ", ".join(sorted(record)) if isinstance(record, dict) else type(record).__name__
                raise DataError(f"{self.path}:{number}: no {field!r} field (found: {keys}); set --text_field")
            text = record[field]
            if not isinstance(text, str):
                raise DataError(f"{self.path}:{number}: field {field!r} is a {type(text).__name__}, not a string")
            yield Document(self.path, number, _PARAGRAPH_BREAK.split(text))


def _chain(first, rest):
    yield first
    yield from rest
