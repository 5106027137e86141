"""This project's own checkpoints: TF2 object-based checkpoints written by `tf.train.Checkpoint(model=...)`.

Training writes `tf.train.Checkpoint(model=model, optimizer=..., ...)`; a weight's key is its attribute path
from the root (`model/albert/embeddings/word_embeddings/_embeddings/.ATTRIBUTES/VARIABLE_VALUE`). Every model
here keeps its encoder under the attribute `albert`, so a pretraining checkpoint's encoder loads into any
task model by key. `FORMAT` loads and writes them by those keys, not by the original's names.
"""

import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from albert_tf import fileio, keras_internals
from albert_tf.checkpoints import tf_checkpoint
from albert_tf.checkpoints.errors import CheckpointMismatchError
from albert_tf.checkpoints.format import CheckpointFormat, LoadResult, ensure_built
from albert_tf.checkpoints.tf_checkpoint import GRAPH_KEY

ROOT = "model"
_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
_MAX_DEPTH = 24
# Stored state that is not a weight: optimizer, metric and RNG state.
_NOT_WEIGHTS = ("seed_generator", "/_metrics", "_tracker", "model/optimizer/")


def object_keys(model, root=ROOT):
    """{checkpoint key: Keras variable} for every weight of `model`, as `tf.train.Checkpoint(model=model)`
    would name them."""
    wanted = {id(variable): variable for variable in model.weights}
    keys, seen = {}, set()

    def walk(obj, path):
        for name, child in keras_internals.trackable_children(obj).items():
            if id(child) in seen:
                continue
            seen.add(id(child))
            child_path = f"{path}/{name}"
            if id(child) in wanted:
                keys[child_path + _SUFFIX] = wanted[id(child)]
            elif keras_internals.is_trackable(child):
                walk(child, child_path)

    walk(model, root)
    return keys


def partial_root(model, exclude_ids):
    """A tree of plain trackable nodes holding `model`'s variables at their checkpoint paths, less those whose id
    is in `exclude_ids`: `tf.train.Checkpoint(model=partial_root(model, ids))` writes the keys
    `tf.train.Checkpoint(model=model)` would, without the excluded variables (heads an input did not have)."""
    root = keras_internals.plain_trackable()
    for key, variable in object_keys(model).items():
        if id(variable) in exclude_ids:
            continue
        parts = key[len(ROOT) + 1:-len(_SUFFIX)].split("/")
        node = root
        for part in parts[:-1]:
            if not hasattr(node, part):
                setattr(node, part, keras_internals.plain_trackable())
            node = getattr(node, part)
        setattr(node, parts[-1], getattr(variable, "value", variable))
    return root


def _object_graph_keys(reader):
    """{attribute path under `model/` + suffix: checkpoint key}, from the checkpoint's object graph.

    A variable is stored once, under whichever path TF met first (often `optimizer/_trainable_variables/N`
    when an optimizer was saved too); the object graph still records every path to it, so weights are
    found by their path under the model whatever key they were stored under.
    """
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor(GRAPH_KEY))
    keys = {}
    root = graph.nodes[0]
    stack = [(child.node_id, child.local_name) for child in root.children if child.local_name == ROOT]
    while stack:
        node_id, path = stack.pop()
        if path.count("/") > _MAX_DEPTH:  # a reference cycle; real weights sit far shallower
            continue
        node = graph.nodes[node_id]
        for attribute in node.attributes:
            if attribute.name == "VARIABLE_VALUE":
                keys[path + _SUFFIX] = attribute.checkpoint_key
        stack.extend((child.node_id, f"{path}/{child.local_name}") for child in node.children)
    return keys


def is_native(path):
    """True when `path` (a prefix) is an object-based checkpoint with a `model` root."""
    try:
        reader = tf.train.load_checkpoint(path)
        if not reader.has_tensor(GRAPH_KEY):
            return False
        return bool(_object_graph_keys(reader))
    except (tf.errors.NotFoundError, tf.errors.DataLossError, ValueError):
        return False


def read_native(path):
    """Weights under `model/` of an object-based checkpoint: ({path key: array}, {path key: checkpoint key}).

    Several paths can lead to one stored variable; each stored array is read once and shared.
    """
    reader = tf.train.load_checkpoint(path)
    keys = _object_graph_keys(reader)
    cache = {}
    for key in set(keys.values()):
        cache[key] = reader.get_tensor(key)
    return {path_key: cache[key] for path_key, key in keys.items()}, keys


def assign_by_key(model, arrays, stored_keys):
    """(pairs of (variable, value), `LoadResult`) loading `read_native`'s arrays into `model` by key; an encoder
    stored at the root (`model/...`) loads into a task model's `albert` and the other way round. Raises
    `CheckpointMismatchError` naming the variable on a shape mismatch."""
    loaded, missing, pairs, used = [], [], [], set()
    for key, variable in object_keys(model).items():
        candidates = [key]
        if key.startswith("model/albert/"):
            candidates.append("model/" + key[len("model/albert/"):])
        else:
            candidates.append("model/albert/" + key[len("model/"):])
        source = next((c for c in candidates if c in arrays), None)
        if source is None:
            missing.append(key)
            continue
        value = arrays[source]
        if tuple(value.shape) != tuple(variable.shape):
            raise CheckpointMismatchError(f"shape mismatch for {key}: checkpoint has {list(value.shape)}, the model "
                                  f"expects {list(variable.shape)} (variable {variable.path})")
        pairs.append((variable, value))
        loaded.append(key)
        used.add(stored_keys[source])
    # Report each stored variable once, by one of its paths.
    unused = {}
    for path_key, stored in sorted(stored_keys.items()):
        if stored not in used and not any(s in path_key for s in _NOT_WEIGHTS):
            unused.setdefault(stored, path_key)
    return pairs, LoadResult("native", loaded, missing, sorted(unused.values()))


class NativeFormat(CheckpointFormat):
    """This project's TF2 checkpoints, loaded and written by object path."""

    name = "native"
    description = "this project's TF2 checkpoint, with or without optimizer state (what training writes)"
    reads_prefix = True
    saves_models = True

    def detect(self, path):
        opened = tf_checkpoint.open_prefix(path)
        return opened is not None and (tf_checkpoint.object_graph_damaged(*opened) or is_native(opened[0]))

    def load(self, model, path, init_from_group0=False):
        pairs, result = assign_by_key(model, *read_native(tf_checkpoint.resolve(path)))
        encoder_missing = [k for k in result.missing if "/albert/" in k or not hasattr(model, "albert")]
        return pairs, result, encoder_missing

    def write(self, model, path, exclude_ids=frozenset(), what=None):
        """`tf.train.Checkpoint(model=model)`'s keys, less the excluded variables (never random weights), staged
        and moved into place (`fileio.atomic_prefix`); `what` names the output in errors."""
        ensure_built(model)
        root = partial_root(model, exclude_ids) if exclude_ids else model
        with fileio.atomic_prefix(path, what) as staged:
            tf.train.Checkpoint(model=root).write(staged)
        return path


FORMAT = NativeFormat()
