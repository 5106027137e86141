"""Input files and their shards: pattern expansion, the checks on each file, the shard plan (byte ranges of a file
cut at document boundaries, `plan_shards`) and a shard's documents (`read_shard_documents`).

The shard rule is part of what fixes the output bytes (docs/pretraining_data.md, "Bounded memory").
"""

import contextlib
import dataclasses
import os

import numpy as np

from albert_tf import fileio
from albert_tf.data.pretraining.config import PretrainingDataError

# Input shard size in MB of text (docs/pretraining_data.md, "Bounded memory"). Part of what determines the output
# bytes.
DEFAULT_SHARD_SIZE_MB = 4.0
# Bytes read from the start of each input file to recognise binary files.
_SNIFF_BYTES = 1 << 16


@dataclasses.dataclass(frozen=True)
class InputShard:
    """A byte range `[start, end)` of one input file that begins and ends at document boundaries."""

    index: int          # position among all shards of the run (the output order; -1 under Beam)
    file_index: int     # position of the file in the expanded input list
    shard_in_file: int  # position of the shard inside its file
    path: str
    start: int
    end: int


def expand_input_patterns(patterns, what="input"):
    """`fileio.expand_globs` in the order given (each pattern's matches sorted): a file's position in this list
    seeds its records. Raises `PretrainingDataError` (naming `what`, e.g. "--input_file") when nothing matches or
    a pattern without wildcards names a directory."""
    return fileio.expand_globs(patterns, what, order="given", error=PretrainingDataError)


@contextlib.contextmanager
def _reading(path):
    """Turns an OS error while reading the input file `path` into a `PretrainingDataError` naming it."""
    try:
        yield
    except OSError as err:
        raise PretrainingDataError(f"cannot read input file {path!r}: {err.strerror or err}") from None


# How remote inputs (gs://, s3://, ...) are opened and sized: TensorFlow's gfile unless `use_remote_io` installed
# other functions (the Beam pipeline installs Beam's file systems in its workers). Local paths are always `open`.
_REMOTE_IO = {}


def use_remote_io(open_binary, file_size):
    """Reads remote input paths with `open_binary(path)` (a seekable binary file object) and `file_size(path)`."""
    _REMOTE_IO.update(open=open_binary, size=file_size)


def _open_binary(path):
    if fileio.is_remote(path):
        if "open" in _REMOTE_IO:
            return _REMOTE_IO["open"](path)
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")  # pylint: disable=consider-using-with


def _file_size(path):
    if fileio.is_remote(path):
        if "size" in _REMOTE_IO:
            return _REMOTE_IO["size"](path)
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        return tf.io.gfile.stat(path).length
    return os.path.getsize(path)


def check_input_file(path, head=None, size=None):
    """Raises `PretrainingDataError` if `path` is empty, holds only whitespace, or looks binary.

    "Binary" means a NUL byte, or more than 5% of control bytes (other than tab/newline/CR/FF/VT), in the first
    64 KiB. Text that is not valid UTF-8 is accepted; invalid bytes are dropped when reading, as the original's
    `convert_to_unicode` does.
    """
    if size is None:
        size = _file_size(path)
    if size == 0:
        raise PretrainingDataError(f"input file {path!r} is empty; expected text, one sentence per line")
    if head is None:
        with _open_binary(path) as f:
            head = f.read(_SNIFF_BYTES)
    if b"\x00" in head:
        raise PretrainingDataError(
            f"input file {path!r} looks binary (it contains NUL bytes); expected UTF-8 text, one sentence per line")
    controls = sum(head.count(bytes([c])) for c in range(32) if c not in (9, 10, 11, 12, 13)) + head.count(b"\x7f")
    if controls > 0.05 * len(head):
        raise PretrainingDataError(
            f"input file {path!r} looks binary ({controls} control bytes in the first {len(head)}); expected "
            f"UTF-8 text, one sentence per line")
    if size <= len(head) and not head.decode("utf-8", "ignore").split():
        raise PretrainingDataError(f"input file {path!r} contains no text (only whitespace)")


def _blank(line_bytes):
    # A whitespace-only line normalises to "" in both tokenizer modes, so it always ends a document.
    return not line_bytes.decode("utf-8", "ignore").split()


def file_cuts(path, shard_bytes):
    """Checks one input file and returns its shard boundaries `[0, cut, ..., size]` (byte offsets).

    The shard rule (`plan_shards`): a cut is placed at the first blank line at or after `shard_bytes` past the
    previous cut. Only the file's first 64 KiB and the few lines after each target offset are read, so this runs
    wherever the file is read (the local tool's parent, a Beam worker).
    """
    with _reading(path), _open_binary(path) as f:
        size = _file_size(path)
        check_input_file(path, f.read(_SNIFF_BYTES), size)
        cuts = [0]
        while size - cuts[-1] > shard_bytes:
            f.seek(cuts[-1] + shard_bytes - 1)
            f.readline()  # finish the line holding the target byte; we are now at a line start
            cut = None
            while True:
                line = f.readline()
                if not line:
                    break
                if _blank(line):
                    cut = f.tell()
                    break
            if cut is None or cut >= size:
                break
            cuts.append(cut)
        cuts.append(size)
    return cuts


def shard_bytes_of(shard_size_mb):
    """The shard size in bytes of `shard_size_mb` (checked)."""
    if shard_size_mb <= 0:
        raise PretrainingDataError(f"shard_size_mb must be positive, got {shard_size_mb}")
    return max(1, int(shard_size_mb * 1e6))


def plan_shards(files, shard_size_mb=DEFAULT_SHARD_SIZE_MB):
    """Checks each input file and cuts it into `InputShard`s of about `shard_size_mb` MB (`file_cuts`).

    Every shard holds whole documents; the documents are the same as reading the file in one piece.
    """
    shard_bytes = shard_bytes_of(shard_size_mb)
    shards = []
    for file_index, path in enumerate(files):
        cuts = file_cuts(path, shard_bytes)
        for shard_in_file, (start, end) in enumerate(zip(cuts[:-1], cuts[1:])):
            shards.append(InputShard(len(shards), file_index, shard_in_file, path, start, end))
    return shards


@dataclasses.dataclass
class ShardDocuments:
    """A shard's documents over one flat token array.

    Attributes:
      tokens: int32 [total tokens], all sentences of the shard, in order (skipped documents' tokens included).
      word_start: bool [total tokens], `TokenTables.word_start` of each token.
      bounds: per kept document, its sentence boundaries into `tokens` (a list of sentences + 1 ints).
      skipped: documents dropped for having fewer than two tokens.
      text_bytes: size of the shard's text.
    """

    tokens: np.ndarray
    word_start: np.ndarray
    bounds: list
    skipped: int
    text_bytes: int

    def document_tokens(self, index):
        b = self.bounds[index]
        return self.tokens[b[0]:b[-1]]


def read_shard_documents(shard, tables):
    """Reads, normalises and tokenizes one `InputShard` into `ShardDocuments`."""
    with _reading(shard.path), _open_binary(shard.path) as f:
        f.seek(shard.start)
        data = f.read(shard.end - shard.start)
    tokens, lengths = tables.lines_to_ids(data.decode("utf-8", "ignore"))
    bounds, skipped = [], 0
    doc = None
    offset = 0
    for n in lengths:
        if n < 0:
            if doc is not None:
                if doc[-1] - doc[0] >= 2:
                    bounds.append(doc)
                else:
                    skipped += 1
            doc = None
        elif n > 0:
            if doc is None:
                doc = [offset]
            offset += n
            doc.append(offset)
    if doc is not None:
        if doc[-1] - doc[0] >= 2:
            bounds.append(doc)
        else:
            skipped += 1
    return ShardDocuments(tokens=tokens, word_start=tables.word_start[tokens], bounds=bounds, skipped=skipped,
                          text_bytes=len(data))
