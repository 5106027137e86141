"""Reading delimited UTF-8 files row by row, as the classifier's processors read them: a byte-order mark dropped
(MRPC's files have one), no quote handling for tab-separated files (GLUE's texts hold bare quotes) and standard CSV
quoting for comma-separated ones; a byte that is not UTF-8, or a row that cannot be parsed, is reported with its
file, line and column."""

import csv
import io

import tensorflow as tf

from albert_tf.data.glue.errors import MalformedRowError, MissingSplitError

_BOM = b"\xef\xbb\xbf"


def first_invalid_utf8(binary):
    """(line, column, byte, reason) of the first byte of the binary file object `binary` that is not UTF-8, or
    None. Lines are counted as the text reader counts them (a line ends at "\\n", "\\r\\n" or "\\r"), the column
    in characters from 1 (a byte-order mark at the start is not counted)."""
    # Latin-1 maps each byte to one character, and line ends are ASCII (never part of a UTF-8 sequence): the
    # lines are the text reader's lines, their bytes unchanged.
    lines = io.TextIOWrapper(binary, encoding="latin-1", newline="")
    for number, line in enumerate(lines, start=1):
        raw = line.encode("latin-1")
        if number == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM):]
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as err:
            return number, len(raw[:err.start].decode("utf-8")) + 1, raw[err.start], err.reason
    return None


def _not_utf8_error(path, binary, fallback_line):
    """The `MalformedRowError` of a file that failed to decode: the line and column of its first bad byte."""
    found = first_invalid_utf8(binary)
    if found is None:  # pragma: no cover (the file changed under us)
        return MalformedRowError(path, fallback_line, "not valid UTF-8")
    line, column, byte, reason = found
    return MalformedRowError(path, line, f"not valid UTF-8 (byte 0x{byte:02x} at column {column}: {reason})")


def _open_text(path):
    if "://" in path:
        with tf.io.gfile.GFile(path, "rb") as f:
            data = f.read()
        try:
            return io.StringIO(data.decode("utf-8-sig"), newline="")
        except UnicodeDecodeError:
            raise _not_utf8_error(path, io.BytesIO(data), 1) from None
    return open(path, "r", encoding="utf-8-sig", newline="")  # pylint: disable=consider-using-with


def read_rows(path, delimiter="\t", quoting=None):
    """Yields `(line_number, fields)` for each non-blank row of a delimited UTF-8 file.

    `quoting` is a `csv` quoting constant; None means no quote handling for tab-separated files (the GLUE files
    and the original's reader) and standard CSV quoting otherwise. A byte that is not UTF-8 is reported on its own
    line (the text is decoded in chunks, so the row being read when decoding fails is not where the byte is).
    """
    if quoting is None:
        quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
    try:
        handle = _open_text(path)
    except FileNotFoundError:
        raise MissingSplitError(f"data file not found: {path}") from None
    with handle:
        reader = csv.reader(handle, delimiter=delimiter, quoting=quoting, strict=quoting != csv.QUOTE_NONE)
        line = 1
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except UnicodeDecodeError:  # a local file (a remote one is decoded whole by `_open_text`)
                with open(path, "rb") as binary:
                    raise _not_utf8_error(path, binary, reader.line_num + 1) from None
            except csv.Error as err:
                raise MalformedRowError(path, reader.line_num, f"cannot parse the row: {err}") from None
            if row:
                yield line, row
            line = reader.line_num + 1
