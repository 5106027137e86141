"""How records cross the pipeline's stage boundaries: as a few large pieces of TFRecord frames, never one element
per record (Beam's cost per element, its coders, the Fn API data channel and the runner's grouping, would exceed
the cost of making the record). A batch of records becomes one piece per output file (dealt round-robin) or per
shuffle bucket (with each record's random key), and a bucket's pieces come back in the order of their keys."""

import numpy as np

from albert_tf.data.tfrecord_writer import frame_records

# Records leave BuildRecords (and a shuffle bucket) as elements of TFRecord frames of at most about this many bytes:
# Beam's per-element cost (coders, the Fn API data channel, the runner's grouping) is paid per piece, not per record.
# A BuildRecords worker holds one batch of this size (and its frames) besides its shard.
BATCH_BYTES = 16 << 20
_FRAME_OVERHEAD = 16  # a TFRecord frame: uint64 length, uint32 masked CRC of it, the data, uint32 masked CRC of it


def _runs(items, sizes, limit):
    """Splits `items` (in order) into runs of at most about `limit` bytes (each run at least one item)."""
    run, total = [], 0
    for item, size in zip(items, sizes):
        if run and total + size > limit:
            yield run
            run, total = [], 0
        run.append(item)
        total += size
    if run:
        yield run


def _framed_groups(groups):
    """TFRecord frames of each group of records, framed in one batch: [(group index, frames bytes)] for the
    groups that are not empty."""
    framed = frame_records([record for group in groups for record in group])
    out, offset = [], 0
    for index, group in enumerate(groups):
        if group:
            end = offset + sum(map(len, group)) + _FRAME_OVERHEAD * len(group)
            out.append((index, framed[offset:end]))
            offset = end
    return out


def dealt_pieces(records, start, num_files):
    """(output file, frames) pieces of a batch of records dealt round-robin over the files from `start`."""
    groups = [records[(j - start) % num_files::num_files] for j in range(num_files)]
    return _framed_groups(groups)


def keyed_pieces(buckets):
    """(bucket, piece) of each non-empty bucket {bucket: (keys, records)} of one batch: a piece is
    `uint32 n | n uint64 keys | n uint32 frame sizes | n TFRecord frames`, little-endian."""
    order = sorted(buckets)
    pieces = []
    for bucket, frames in _framed_groups([buckets[b][1] for b in order]):
        keys, records = buckets[order[bucket]]
        sizes = np.fromiter(map(len, records), dtype=np.uint32, count=len(records)) + np.uint32(_FRAME_OVERHEAD)
        pieces.append((order[bucket], b"".join((len(keys).to_bytes(4, "little"),
                                                np.array(keys, dtype="<u8").tobytes(), sizes.astype("<u4").tobytes(),
                                                frames))))
    return pieces


def bucket_frames(pieces):
    """A bucket's frames in the order of their random keys (ties: by frame bytes), from its `keyed_pieces`."""
    keys, sizes, frames = [], [], []
    for piece in pieces:
        n = int.from_bytes(piece[:4], "little")
        keys.append(np.frombuffer(piece, dtype="<u8", count=n, offset=4))
        sizes.append(np.frombuffer(piece, dtype="<u4", count=n, offset=4 + 8 * n))
        frames.append(memoryview(piece)[4 + 12 * n:])
    keys = np.concatenate(keys)
    data = memoryview(b"".join(frames))
    ends = np.cumsum(np.concatenate(sizes).astype(np.int64)).tolist()
    starts = [0] + ends[:-1]
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    if len(ordered) > 1 and bool(np.any(ordered[1:] == ordered[:-1])):  # 64-bit keys: almost never
        order = sorted(range(len(keys)), key=lambda i: (int(keys[i]), bytes(data[starts[i]:ends[i]])))
    return [data[starts[i]:ends[i]] for i in map(int, order)]


def joined_pieces(frames):
    """`frames` joined into pieces of about `BATCH_BYTES` each, in order."""
    for run in _runs(frames, map(len, frames), BATCH_BYTES):
        yield b"".join(run)
