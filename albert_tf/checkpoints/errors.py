"""What can be wrong with a checkpoint, told apart: not there, unreadable, or not fitting the model.

`CheckpointError` is the base (an `AlbertError`: the scripts print it as one line). A caller that adds context
("does not fit the model of the albert config") does so for `CheckpointMismatchError` only: a checkpoint that
is missing or corrupt fits nothing, and saying otherwise sends the user after the wrong fix.
"""

import contextlib
import re

import tensorflow as tf

from albert_tf.errors import AlbertError


class CheckpointError(AlbertError):
    """A checkpoint cannot be read or does not fit the model; the message names the file or variable."""


class CheckpointNotFoundError(CheckpointError):
    """No checkpoint of any known format is at the path given; the message names it."""


class CorruptCheckpointError(CheckpointError):
    """A checkpoint is there but cannot be read: a `checkpoint` state file or `.index` that is not one, a
    truncated or checksum-corrupted `.data` shard, a missing shard, an unreadable `model.safetensors` or
    `config.json`; the message names the file and what is wrong with it."""


class CheckpointMismatchError(CheckpointError):
    """A checkpoint that reads fine but does not fit the model (a shape, a config field, weights the model needs
    that it lacks: another model's checkpoint); the message names the variable or field."""


_FUNCTION_NODE = re.compile(r"^\{\{function_node [^}]*\}\}\s*")
_OP_SUFFIX = re.compile(r"\s*\[Op:\w+\]( name: \S*)?$")


def reason(err):
    """One line of what TensorFlow (or the OS) said, without its op and function-node decorations."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    text = lines[0] if lines else type(err).__name__
    text = _OP_SUFFIX.sub("", _FUNCTION_NODE.sub("", text))
    return text.rstrip(" .[") or type(err).__name__


def describe(prefix, err):
    """A one-line description of why the TF checkpoint at `prefix` could not be read."""
    why = reason(err)
    if "sstable" in why:
        return f"checkpoint {prefix} is corrupt: {prefix}.index is not a checkpoint index ({why})"
    if isinstance(err, IndexError) or "Read less bytes" in why or "truncated" in why.lower():
        return f"checkpoint {prefix} is truncated: its data is shorter than its index says ({why})"
    if "Checksum does not match" in why or isinstance(err, tf.errors.DataLossError):
        return f"checkpoint {prefix} is corrupt: {why}"
    if isinstance(err, (tf.errors.NotFoundError, FileNotFoundError)) or "No such file" in why:
        return f"checkpoint {prefix} is incomplete: {why}"
    return f"cannot read checkpoint {prefix}: {why}"


# What reading a damaged TF checkpoint raises: `OpError`s (DataLoss for a bad checksum, NotFound for a missing
# shard, plain `OpError` for an index that is no sstable), `IndexError` (OUT_OF_RANGE: a truncated shard) and
# `OSError`; a damaged object graph fails to parse as a protobuf.
READ_ERRORS = (tf.errors.OpError, IndexError, OSError)


def _decode_error():
    from google.protobuf.message import DecodeError  # pylint: disable=import-outside-toplevel

    return DecodeError


@contextlib.contextmanager
def reading(prefix):
    """Turns the errors of reading the TF checkpoint at `prefix` into a `CorruptCheckpointError` naming it."""
    try:
        yield
    except READ_ERRORS + (_decode_error(),) as err:
        raise CorruptCheckpointError(describe(prefix, err)) from None
