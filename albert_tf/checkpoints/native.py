"""This project's own checkpoints: TF2 object-based checkpoints written by `tf.train.Checkpoint(model=...)`.

Training writes `tf.train.Checkpoint(model=model, optimizer=..., ...)`; a weight's key is its attribute path
from the root (`model/albert/embeddings/word_embeddings/_embeddings/.ATTRIBUTES/VARIABLE_VALUE`). Every model
here keeps its encoder under the attribute `albert`, so a pretraining checkpoint's encoder loads into any
task model by key.
"""

import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from albert_tf import keras_internals

ROOT = "model"
_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
_MAX_DEPTH = 24
_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


def object_keys(model, root=ROOT):
    """{checkpoint key: Keras variable} for every weight of `model`, as `tf.train.Checkpoint(model=model)`
    would name them."""
    wanted = {}
    for variable in model.weights:
        wanted[id(variable)] = variable
        wanted[id(getattr(variable, "value", variable))] = variable
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

    if id(model) in wanted:
        return keys
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
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
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
        if not reader.has_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"):
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
