"""TFRecord framing without TensorFlow: the bytes are TensorFlow's, and TensorFlow reads them back."""

import struct

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import tfrecord_writer as tw


@pytest.mark.parametrize("data, expected", [
    (b"123456789", 0xE3069283),  # the CRC-32C check value (RFC 3720 / iSCSI)
    (bytes(32), 0x8A9136AA),     # RFC 3720 B.4 test vectors
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (b"", 0x00000000),
])
def test_crc32c_known_values(data, expected):
    assert tw.crc32c(data) == expected


def bitwise_crc32c(data):
    """The textbook bit-at-a-time CRC-32C, as an independent reference."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


@pytest.mark.parametrize("longest", [300, 9000])  # one table block, and several blocks per message
def test_crc32c_rows_equal_the_bitwise_crc(longest):
    rng = np.random.default_rng(longest)
    messages = [rng.integers(0, 256, int(n), dtype=np.uint8).tobytes() for n in rng.integers(0, longest, 12)]
    data = np.frombuffer(b"".join(messages), dtype=np.uint8)
    offsets = np.concatenate(([0], np.cumsum([len(m) for m in messages])))
    rows = tw.crc32c_rows(data, offsets)
    assert rows.tolist() == [bitwise_crc32c(m) for m in messages]


def test_crc32c_rows_of_messages_starting_inside_the_buffer():
    data = np.frombuffer(b"skip me|123456789|abc", dtype=np.uint8)
    assert tw.crc32c_rows(data, [8, 17, 18, 21]).tolist() == [0xE3069283, bitwise_crc32c(b"|"),
                                                             bitwise_crc32c(b"abc")]


def test_crc32c_rows_of_no_messages_is_empty():
    rows = tw.crc32c_rows(np.zeros(0, dtype=np.uint8), [0])
    assert rows.dtype == np.uint32 and rows.shape == (0,)


def test_the_length_constants_grow_one_byte_at_a_time():
    # A zero byte contributes nothing, so the constant of n bytes is the CRC of n zero bytes.
    constants = tw._LengthConstants()  # pylint: disable=protected-access
    for n in range(12):
        assert int(constants.upto(n)[n]) == bitwise_crc32c(bytes(n))


def tf_framed(tmp_path, records):
    path = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    with open(path, "rb") as f:
        return f.read()


def test_frames_are_tensorflows_bytes(tmp_path):
    """Random records of many lengths (empty, one byte, longer than a CRC chunk's width) framed in one call and
    through the batching writer give exactly `tf.io.TFRecordWriter`'s file, and tf.data reads them back (it checks
    both checksums of every frame)."""
    rng = np.random.default_rng(0)
    lengths = [0, 1, 7, 8, 9, 100, 4095, 4096, 4097, 5000, 70_000] + rng.integers(0, 2000, 600).tolist()
    records = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in lengths]
    expected = tf_framed(tmp_path, records)
    assert tw.frame_records(records) == expected
    path = str(tmp_path / "ours.tfrecord")
    writer = tw.LocalRecordWriter(path, batch_records=97)
    for record in records:
        writer.write(record)
    writer.close()
    with open(path, "rb") as f:
        assert f.read() == expected
    assert [r.numpy() for r in tf.data.TFRecordDataset(path)] == records
    assert [frame[12:-4] for frame in tw.read_frames(path)] == records


def test_masked_crcs_are_the_ones_tensorflow_stores(tmp_path):
    records = [b"", b"a", b"123456789", bytes(range(256))]
    framed, at = tf_framed(tmp_path, records), 0
    for record in records:
        stored = struct.unpack("<I", framed[at + 12 + len(record):at + 16 + len(record)])[0]
        assert tw.masked_crc32c(record) == stored
        at += 16 + len(record)
    assert tw.frame_records([]) == tf_framed(tmp_path, []) == b""


def test_append_file_continues_the_stream(tmp_path):
    first, second = [b"a" * 10, b"bb"], [b"c" * 300, b"", b"d"]
    part = str(tmp_path / "part.tfrecord")
    with open(part, "wb") as f:
        f.write(tw.frame_records(second))
    path = str(tmp_path / "all.tfrecord")
    writer = tw.LocalRecordWriter(path)
    for record in first:
        writer.write(record)
    writer.append_file(part)
    writer.write(b"e")
    writer.close()
    assert [r.numpy() for r in tf.data.TFRecordDataset(path)] == first + second + [b"e"]


def test_the_writer_frames_each_full_batch_to_the_file_and_a_closed_writer_takes_no_more(tmp_path):
    path = tmp_path / "batched.tfrecord"
    writer = tw.LocalRecordWriter(str(path), batch_records=3)
    records = [b"one", b"two", b"three", b"four"]
    for count, record in enumerate(records, 1):
        writer.write(record)
        assert path.read_bytes() == tw.frame_records(records[:3] if count >= 3 else [])  # memory stays bounded
    writer.flush()
    assert path.read_bytes() == tw.frame_records(records)
    writer.close()
    writer.close()  # closing twice is harmless
    with pytest.raises(ValueError, match="closed file"):
        writer.write_frame(tw.frame_records([b"late"]))


@pytest.mark.parametrize("cut", [3, 12, 60])  # in a checksum, in a header, in a record
def test_read_frames_rejects_a_truncated_file(tmp_path, cut):
    path = tmp_path / "cut.tfrecord"
    path.write_bytes(tw.frame_records([b"x" * 50, b"y"])[:-cut])
    with pytest.raises(ValueError, match="truncated"):
        list(tw.read_frames(str(path)))


def test_frames_are_copied_one_by_one(tmp_path):
    source = tmp_path / "source.tfrecord"
    source.write_bytes(tw.frame_records([b"a", b"bb" * 40, b""]))
    path = str(tmp_path / "copy.tfrecord")
    writer = tw.LocalRecordWriter(path)
    writer.write(b"first")
    for frame in tw.read_frames(str(source)):
        writer.write_frame(frame)
    writer.close()
    assert [r.numpy() for r in tf.data.TFRecordDataset(path)] == [b"first", b"a", b"bb" * 40, b""]
