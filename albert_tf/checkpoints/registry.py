"""The checkpoint formats, in the order `detect_format` asks them, and their lookup by name.

Detection order: `huggingface` (a `model.safetensors` directory or file), `keras_hub` (a preset directory or a
live `AlbertBackbone`), then the TF checkpoints: `model_garden` (its encoder's variable names), `native` (a
`model` root in the object graph, or an object graph that cannot be read: the load names the damage) and
`original`, any other TF checkpoint. The first format whose `detect` says yes holds the path, so a folder with
Hugging Face weights is read as such whatever else it holds, and `original` comes last. Adding a format is one
module with a `CheckpointFormat` and one entry here: its `description` joins the error of a path no format
recognises, the converter's usage and (a test checks) the table of formats in docs/compatibility.md.
"""

from albert_tf.checkpoints import huggingface, keras_hub_format, model_garden, native, original
from albert_tf.checkpoints.errors import CheckpointError, CheckpointNotFoundError

REGISTRY = (huggingface.FORMAT, keras_hub_format.FORMAT, model_garden.FORMAT, native.FORMAT, original.FORMAT)
FORMATS = tuple(f.name for f in REGISTRY)


def get(name):
    """The format called `name`, or None."""
    return next((f for f in REGISTRY if f.name == name), None)


def detect(path):
    """The format `path` holds (see the module docstring for the order).

    Raises `CheckpointNotFoundError` if none is there, `CheckpointError` for an object that is no checkpoint,
    `CorruptCheckpointError` for a `checkpoint` state file or an `.index` that is not one. Damage to the data
    shards is left for the load to find and report.
    """
    found = next((f for f in REGISTRY if f.detect(path)), None)
    if found is not None:
        return found
    if not isinstance(path, str):
        raise CheckpointError(f"cannot load weights from a {type(path).__name__}")
    raise CheckpointNotFoundError(f"no checkpoint found at {path!r} (expected {expected()})")


def expected():
    """What a checkpoint path may be: every format's description and name, in detection order, as one line."""
    return "; ".join(f"{f.description} ({f.name})" for f in REGISTRY)


def detect_format(path):
    """The name of the format `path` holds (one of `FORMATS`); raises as `detect`."""
    return detect(path).name
