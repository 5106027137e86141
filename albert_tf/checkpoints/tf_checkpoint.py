"""Where a TF checkpoint's weights are: the latest checkpoint of a directory, a TF-Hub module's or SavedModel's
variables, and whether an `.index` there can be opened.

Three formats are TF checkpoints (`model_garden`, `native`, `original`); they find their prefix and reader here,
so a directory, a `checkpoint` state file or an index is read by one rule, and its damage named one way.
"""

import os

import tensorflow as tf
from google.protobuf import text_format
from tensorflow.python.training.checkpoint_state_pb2 import CheckpointState

from albert_tf.checkpoints.errors import CorruptCheckpointError, reading, reason

STATE_FILE = "checkpoint"  # TF's checkpoint state file, naming a directory's latest checkpoint
GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"  # the object graph of a TF2 (object-based) checkpoint


def latest_checkpoint(directory):
    """The prefix of the latest checkpoint that `directory`'s `checkpoint` state file names, or None when there is
    no state file or the files it names are gone (as `tf.train.latest_checkpoint`, without its log lines).

    Raises `CorruptCheckpointError` naming the state file when it is not one (binary garbage, text that is no
    `CheckpointState`, no checkpoint named): TF would raise a `UnicodeDecodeError` on the first, and ignore the
    others, so that a training run started over and overwrote it.
    """
    state_file = os.path.join(directory, STATE_FILE)
    try:
        if not tf.io.gfile.exists(state_file):
            return None
        if tf.io.gfile.isdir(state_file):
            raise CorruptCheckpointError(f"{state_file} is a directory, not a TF checkpoint state file")
        with tf.io.gfile.GFile(state_file, "rb") as f:
            data = f.read()
    except (tf.errors.OpError, OSError) as err:
        raise CorruptCheckpointError(f"cannot read the checkpoint state file {state_file}: "
                                     f"{reason(err)}") from None
    state = CheckpointState()
    try:
        text_format.Merge(data.decode("utf-8"), state)
    except UnicodeDecodeError:
        raise CorruptCheckpointError(f"{state_file} is corrupt: not a TF checkpoint state file (not text: invalid "
                                     "UTF-8)") from None
    except text_format.ParseError as err:
        raise CorruptCheckpointError(f"{state_file} is corrupt: not a TF checkpoint state file "
                                     f"({reason(err)})") from None
    if not state.model_checkpoint_path:
        raise CorruptCheckpointError(f"{state_file} is corrupt: it names no checkpoint (no model_checkpoint_path)")
    prefix = state.model_checkpoint_path
    if not os.path.isabs(prefix):
        prefix = os.path.join(directory, prefix)
    try:
        if tf.io.gfile.glob(prefix + ".index") or tf.io.gfile.glob(prefix):  # a TF2 or a TF1 (V1) checkpoint
            return prefix
    except tf.errors.OpError:
        pass
    return None


def saved_model_variables(path):
    """The variables prefix of a TF2 SavedModel directory (not a TF1 hub module), else None."""
    if not (isinstance(path, str) and os.path.isdir(path)):
        return None
    prefix = os.path.join(path, "variables", "variables")
    has_graph = any(os.path.exists(os.path.join(path, f)) for f in ("saved_model.pb", "saved_model.pbtxt"))
    if has_graph and os.path.exists(prefix + ".index") and not os.path.exists(os.path.join(path, "tfhub_module.pb")):
        return prefix
    return None


def resolve(path):
    """A checkpoint prefix for a directory holding a TF checkpoint (its latest), a TF1 TF-Hub module or a TF2
    SavedModel (their variables), else `path` itself. A `checkpoint` state file that is not one raises
    `CorruptCheckpointError`."""
    if isinstance(path, str) and os.path.isdir(path):
        hub_variables = os.path.join(path, "variables", "variables")
        if os.path.exists(os.path.join(path, "tfhub_module.pb")) and os.path.exists(hub_variables + ".index"):
            return hub_variables  # a TF1 TF-Hub module: its variables are a TF1 checkpoint
        if saved_model_variables(path):
            return hub_variables
        latest = latest_checkpoint(path)
        if latest:
            return latest
        indexes = sorted(f[:-len(".index")] for f in os.listdir(path) if f.endswith(".index"))
        if len(indexes) == 1:
            return os.path.join(path, indexes[0])
    return path


def open_prefix(path):
    """(prefix, reader) of the TF checkpoint at `path` (see `resolve`), or None when there is no `.index` there.
    Raises `CorruptCheckpointError` for a state file or an `.index` that is not one."""
    if not isinstance(path, str):
        return None
    prefix = resolve(path)
    if not os.path.exists(prefix + ".index"):
        return None
    with reading(prefix):
        return prefix, tf.train.load_checkpoint(prefix)  # an .index that is none fails here


def object_graph_damaged(prefix, reader):
    """Whether the object graph of the TF2 checkpoint at `prefix` cannot be read. Such a checkpoint is taken for a
    native one, whose load names the damage; damage to the data shards is likewise left for the load to find."""
    try:
        with reading(prefix):
            if reader.has_tensor(GRAPH_KEY):
                reader.get_tensor(GRAPH_KEY)
    except CorruptCheckpointError:
        return True
    return False
