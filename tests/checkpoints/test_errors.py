"""The one line a damaged TF checkpoint gets (albert_tf/checkpoints/errors.py), from the errors TensorFlow and the
OS raise, built here as they arrive: what TF said without its decorations, which damage it is, and `reading`
turning read errors (only those) into `CorruptCheckpointError`. Real damaged files: tests/faults/test_checkpoints.py."""

import pytest
import tensorflow as tf
from google.protobuf.message import DecodeError

from albert_tf.checkpoints.errors import (CheckpointError, CheckpointMismatchError, CorruptCheckpointError, describe,
                                          reading, reason)


def _op_error(kind, message):
    if kind is tf.errors.OpError:  # the base takes the error code too
        return kind(None, None, message, tf.errors.UNKNOWN)
    return kind(None, None, message)


def test_the_reason_is_tfs_first_line_without_function_node_or_op():
    err = _op_error(tf.errors.DataLossError, "{{function_node __inference_restore_12}} Checksum does not match: "
                                             "stored 1 vs. calculated on the restored bytes 2 [Op:RestoreV2] name: r\n"
                                             "\tdetails that follow\nthe last line")
    assert reason(err) == "Checksum does not match: stored 1 vs. calculated on the restored bytes 2"
    assert reason(OSError("\n  \nfirst real line.\nsecond")) == "first real line"
    assert reason(IndexError()) == "IndexError"
    assert reason(ValueError(" . [")) == "ValueError"


@pytest.mark.parametrize("err, told", [
    (_op_error(tf.errors.OpError, "Could not open x.index: Data loss: not an sstable (bad magic number)"),
     "checkpoint ck is corrupt: ck.index is not a checkpoint index (Could not open x.index: Data loss: not an "
     "sstable (bad magic number))"),
    (IndexError("Read less bytes than requested"), "checkpoint ck is truncated: its data is shorter than its index "
                                                   "says (Read less bytes than requested)"),
    (IndexError(), "checkpoint ck is truncated: its data is shorter than its index says (IndexError)"),
    (_op_error(tf.errors.OutOfRangeError, "Input is Truncated"), "checkpoint ck is truncated: its data is shorter "
                                                                  "than its index says (Input is Truncated)"),
    (_op_error(tf.errors.OpError, "Checksum does not match: stored 3"), "checkpoint ck is corrupt: Checksum does "
                                                                        "not match: stored 3"),
    (_op_error(tf.errors.DataLossError, "bad block"), "checkpoint ck is corrupt: bad block"),
    (_op_error(tf.errors.NotFoundError, "ck.data-00000-of-00001; missing"),
     "checkpoint ck is incomplete: ck.data-00000-of-00001; missing"),
    (FileNotFoundError(2, "gone"), "checkpoint ck is incomplete: [Errno 2] gone"),
    (OSError("No such file or directory: ck.data"), "checkpoint ck is incomplete: No such file or directory: "
                                                    "ck.data"),
    (OSError("Permission denied"), "cannot read checkpoint ck: Permission denied"),
])
def test_each_damage_is_told_apart(err, told):
    assert describe("ck", err) == told


def test_reading_turns_read_errors_into_one_corrupt_checkpoint_error_and_nothing_else():
    for err in (_op_error(tf.errors.DataLossError, "bad block"), IndexError(), OSError("Permission denied"),
                DecodeError("Error parsing message")):
        with pytest.raises(CorruptCheckpointError) as caught:
            with reading("ck"):
                raise err
        assert caught.value.__suppress_context__ and str(caught.value).startswith(("checkpoint ck", "cannot read "
                                                                                               "checkpoint ck"))
    mismatch = CheckpointMismatchError("a shape")
    with pytest.raises(CheckpointMismatchError) as caught:
        with reading("ck"):
            raise mismatch
    assert caught.value is mismatch  # a checkpoint error passes as it is
    with pytest.raises(ValueError, match="not a read error"):
        with reading("ck"):
            raise ValueError("not a read error")
    assert issubclass(CorruptCheckpointError, CheckpointError)
