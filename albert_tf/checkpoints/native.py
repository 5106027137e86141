"""This project's own checkpoints: TF2 object-based checkpoints written by `tf.train.Checkpoint(model=...)`.

Training writes `tf.train.Checkpoint(model=model, optimizer=..., ...)`; a weight's key is its attribute path
from the root (`model/albert/embeddings/word_embeddings/_embeddings/.ATTRIBUTES/VARIABLE_VALUE`). Every model
here keeps its encoder under the attribute `albert`, so a pretraining checkpoint's encoder loads into any
task model by key.
"""

import tensorflow as tf

ROOT = "model"
_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"


def object_keys(model, root=ROOT):
    """{checkpoint key: Keras variable} for every weight of `model`, as `tf.train.Checkpoint(model=model)`
    would name them."""
    wanted = {}
    for variable in model.weights:
        wanted[id(variable)] = variable
        wanted[id(getattr(variable, "value", variable))] = variable
    keys, seen = {}, set()

    def walk(obj, path):
        for name, child in obj._trackable_children(save_type="checkpoint").items():
            if id(child) in seen:
                continue
            seen.add(id(child))
            child_path = f"{path}/{name}"
            if id(child) in wanted:
                keys[child_path + _SUFFIX] = wanted[id(child)]
            elif hasattr(child, "_trackable_children"):
                walk(child, child_path)

    if id(model) in wanted:
        return keys
    walk(model, root)
    return keys


def is_native(path):
    """True when `path` (a prefix) is an object-based checkpoint with a `model` root."""
    try:
        names = tf.train.list_variables(path)
    except (tf.errors.NotFoundError, tf.errors.DataLossError, ValueError):
        return False
    return any(name.startswith(ROOT + "/") and name.endswith(_SUFFIX) for name, _ in names)


def read_native(path):
    """{key: array} of the `model/` weights of an object-based checkpoint."""
    reader = tf.train.load_checkpoint(path)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name.startswith(ROOT + "/") and name.endswith(_SUFFIX)}
