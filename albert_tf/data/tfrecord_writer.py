"""TFRecord framing without TensorFlow: CRC-32C in numpy, many records at a time.

A TFRecord file is a sequence of frames, one per record:

    uint64 length (little-endian) | uint32 masked_crc32c(length bytes) | data | uint32 masked_crc32c(data)

where `masked_crc32c(x) = rotate_right(crc32c(x), 15) + 0xa282ead8 (mod 2**32)` and CRC-32C is the Castagnoli CRC
(reflected polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF). `frame_records` writes exactly the bytes
`tf.io.TFRecordWriter` writes for the same records (no compression), so the pretraining data tool can write local
files without importing TensorFlow (which costs seconds of CPU and about 600 MB per process).

How the CRC is vectorized: without its initial value and final xor, CRC-32C is linear over GF(2), so a message's
CRC is the xor, over its bytes, of a table entry `CONTRIB[d][byte]` (the CRC of that byte followed by `d` zero
bytes, `d` its distance from the end), xor a constant that depends only on the length (the initial value pushed
through `length` bytes, and the final xor). A zero byte contributes nothing, so records of different lengths are
right-aligned in one zero-padded matrix and each column is one table lookup for all records at once. The table
covers distances up to `_BLOCK`; a longer message is cut into blocks whose CRCs are combined (pushing a register
through `_BLOCK` zero bytes is linear too: four lookups).
"""

import shutil
import struct

import numpy as np

_POLY = 0x82F63B78
_MASK_DELTA = 0xA282EAD8
_MATRIX_BYTES = 1 << 16  # bytes of the padded matrix handled at once (its temporaries stay in the cache)
_BLOCK = 4096  # longest distance the contribution table covers (4 MB); longer messages are cut into blocks


def _byte_table():
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(_POLY), table >> 1).astype(np.uint32)
    return table


_TABLE = _byte_table()
_TABLE_LIST = _TABLE.tolist()


class _Contributions:
    """`rows[d, b]`: the raw CRC (no initial value, no final xor) of byte `b` followed by `d` zero bytes."""

    def __init__(self):
        self.rows = _TABLE[None, :].copy()

    def upto(self, length):
        """The table for distances `0 .. length - 1` (grown on demand), flattened: entry `d * 256 + b`."""
        have = self.rows.shape[0]
        if length > have:
            new = np.empty((length - have, 256), dtype=np.uint32)
            last = self.rows[-1]
            for i in range(length - have):
                last = _TABLE[last & 0xFF] ^ (last >> 8)
                new[i] = last
            self.rows = np.concatenate((self.rows, new))
        return self.rows.reshape(-1)


_CONTRIB = _Contributions()


def _block_shift_tables():
    """`tables[j][b]`: the register after `_BLOCK` zero bytes, from the register holding byte b in position j."""
    registers = (np.arange(256, dtype=np.uint32)[None, :] << (8 * np.arange(4, dtype=np.uint32))[:, None])
    for _ in range(_BLOCK):
        registers = _TABLE[registers & 0xFF] ^ (registers >> 8)
    return registers


_SHIFT = None  # `_block_shift_tables()`, built on the first message longer than `_BLOCK`


def _shift_block(registers):
    """Pushes `_BLOCK` zero bytes through raw CRC registers (uint32 [N]): linear, so four table lookups."""
    global _SHIFT  # pylint: disable=global-statement
    if _SHIFT is None:
        _SHIFT = _block_shift_tables()
    return (_SHIFT[0][registers & 0xFF] ^ _SHIFT[1][(registers >> 8) & 0xFF]
            ^ _SHIFT[2][(registers >> 16) & 0xFF] ^ _SHIFT[3][registers >> 24])


class _LengthConstants:
    """`values[n]`: what the initial value 0xFFFFFFFF and the final xor add to the CRC of any n-byte message (the
    initial value pushed through n bytes, then xor 0xFFFFFFFF); grown on demand."""

    def __init__(self):
        self._registers = [0xFFFFFFFF]  # the register after n bytes, starting from the initial value
        self.values = np.zeros(1, dtype=np.uint32)

    def upto(self, length):
        registers = self._registers
        if length >= len(registers):
            table = _TABLE_LIST
            crc = registers[-1]
            for _ in range(length + 1 - len(registers)):
                crc = table[crc & 0xFF] ^ (crc >> 8)
                registers.append(crc)
            self.values = np.array(registers, dtype=np.uint32) ^ np.uint32(0xFFFFFFFF)
        return self.values


_LENGTHS = _LengthConstants()


def crc32c_rows(data, offsets):
    """CRC-32C of each message `data[offsets[i]:offsets[i + 1]]`.

    Args:
      data: uint8 [total], the messages one after the other.
      offsets: int64 [N + 1], where each message starts (and the total at the end).

    Returns:
      uint32 [N].
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    out = np.empty(len(lengths), dtype=np.uint32)
    if not len(lengths):
        return out
    longest = max(int(lengths.max()), 1)
    block = min(longest, _BLOCK)
    n_blocks = -(-longest // block)
    width = n_blocks * block
    table = _CONTRIB.upto(block)
    constants = _LENGTHS.upto(longest)
    # Row r of the matrix is the `width` bytes that end where message r ends, its bytes before the message zeroed:
    # the message right-aligned. Cut into blocks of `block` columns, column j of a block is at distance
    # block - 1 - j from the block's end; blocks are combined by pushing the earlier ones through `block` zeros.
    windows = np.lib.stride_tricks.sliding_window_view(
        np.concatenate((np.zeros(width, dtype=np.uint8), data[offsets[0]:offsets[-1]])), width)
    column_base = np.arange(block - 1, -1, -1, dtype=np.int32) * 256
    columns = np.arange(width)
    rows_per_chunk = max(1, _MATRIX_BYTES // width)
    for lo in range(0, len(lengths), rows_per_chunk):
        hi = min(lo + rows_per_chunk, len(lengths))
        matrix = windows[offsets[lo + 1:hi + 1] - offsets[0]]
        matrix[columns[None, :] < (width - lengths[lo:hi])[:, None]] = 0
        blocks = matrix.reshape(hi - lo, n_blocks, block)
        raw = np.bitwise_xor.reduce(np.take(table, column_base + blocks), axis=2)
        crcs = raw[:, 0]
        for k in range(1, n_blocks):
            crcs = _shift_block(crcs) ^ raw[:, k]
        out[lo:hi] = crcs ^ constants[lengths[lo:hi]]
    return out


def crc32c(data):
    """CRC-32C of one bytes-like message (int)."""
    buf = np.frombuffer(bytes(data), dtype=np.uint8)
    return int(crc32c_rows(buf, [0, len(buf)])[0])


def masked_crc32c(data):
    """The masked CRC-32C that a TFRecord frame stores for `data` (int)."""
    return int(_masked(np.array([crc32c(data)], dtype=np.uint32))[0])


def _masked(crc):
    return ((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(_MASK_DELTA)


def frame_records(records):
    """The TFRecord frames of a list of `bytes` records, concatenated (bytes), as `tf.io.TFRecordWriter` writes them."""
    if not records:
        return b""
    lengths = np.fromiter(map(len, records), dtype=np.int64, count=len(records))
    data = np.frombuffer(b"".join(records), dtype=np.uint8)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    header_bytes = lengths.astype("<u8").view(np.uint8)
    header_crcs = _masked(crc32c_rows(header_bytes, np.arange(len(records) + 1, dtype=np.int64) * 8))
    data_crcs = _masked(crc32c_rows(data, offsets))
    headers = np.empty((len(records), 12), dtype=np.uint8)
    headers[:, :8] = header_bytes.reshape(-1, 8)
    headers[:, 8:] = header_crcs.astype("<u4").view(np.uint8).reshape(-1, 4)
    headers = headers.tobytes()
    footers = data_crcs.astype("<u4").tobytes()
    parts = []
    for i, record in enumerate(records):
        parts.append(headers[12 * i:12 * i + 12])
        parts.append(record)
        parts.append(footers[4 * i:4 * i + 4])
    return b"".join(parts)


def read_frames(path):
    """Yields the frames (header, record, checksum: bytes) of a local TFRecord file; the checksums are not checked
    (for files this module wrote). Raises ValueError on a truncated frame."""
    with open(path, "rb") as f:
        while True:
            header = f.read(12)
            if not header:
                return
            size = struct.unpack("<Q", header[:8])[0] + 4 if len(header) == 12 else None
            rest = f.read(size) if size else b""
            if size is None or len(rest) < size:
                raise ValueError(f"{path}: truncated TFRecord frame")
            yield header + rest


class LocalRecordWriter:
    """Writes TFRecord frames to a local file, framing records in batches (`write` buffers, `flush` frames)."""

    def __init__(self, path, batch_records=512):
        self._file = open(path, "wb")  # pylint: disable=consider-using-with
        self._pending = []
        self._batch = batch_records

    def write(self, record):
        self._pending.append(record)
        if len(self._pending) >= self._batch:
            self.flush()

    def flush(self):
        if self._pending:
            self._file.write(frame_records(self._pending))
            self._pending = []
        self._file.flush()

    def write_frame(self, frame):
        """Appends one already framed record (from `read_frames`), after the records written so far."""
        if self._pending:
            self.flush()
        self._file.write(frame)

    def append_file(self, path):
        """Appends the frames of another TFRecord file (e.g. a worker's), after the records written so far."""
        self.flush()
        with open(path, "rb") as source:
            shutil.copyfileobj(source, self._file, 1 << 20)

    def close(self):
        if self._file.closed:
            return
        try:
            self.flush()
        finally:
            self._file.close()
