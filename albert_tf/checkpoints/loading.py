"""`load_checkpoint`, `save_checkpoint` and `read_arrays`: one call into the format the registry finds or names.

`load_checkpoint` returns what was loaded, missing and unused; it raises `CheckpointNotFoundError` when nothing
is there, `CorruptCheckpointError` naming the file when what is there cannot be read, and
`CheckpointMismatchError` naming the variable on a shape mismatch; it refuses to leave an encoder weight at its
random init. Nothing is assigned until every weight has been read.
"""

import logging

import numpy as np

from albert_tf.checkpoints import registry, tf_checkpoint
from albert_tf.checkpoints.errors import CheckpointError, CheckpointMismatchError, reading
from albert_tf.checkpoints.format import ensure_built


def read_arrays(path, fmt, names, config=None):
    """{TF1 name: array} from an original, Hugging Face, keras-hub or Model Garden checkpoint; `names` are the
    TF1 names the model wants (Hugging Face tensors are selected and re-laid-out by them); with the model's
    `config`, Model Garden's per-head kernels must have its number of heads."""
    found = registry.get(fmt)
    if found is None:
        raise CheckpointError(f"read_arrays does not handle the {fmt!r} format")
    return found.read(path, names, config=config)


def load_checkpoint(model, path, init_from_group0=False, allow_missing_encoder=False):
    """Loads weights into `model` from `path`, detecting the format (`registry.detect`).

    Args:
      model: an `AlbertModel`, `AlbertForPretraining` or task model (built on first use if needed).
      path: a checkpoint prefix or directory, a Hugging Face directory or `.safetensors` file, a keras-hub
        preset directory, a TF-Hub module or SavedModel directory, or a `keras_hub.models.AlbertBackbone`.
      init_from_group0: original, Model Garden and keras-hub formats: initialise every group from group_0 (the
        original's flag).
      allow_missing_encoder: do not raise when encoder weights are absent from the checkpoint.
    Returns:
      a `LoadResult`. Head weights absent from the checkpoint (a new task head) are reported and logged.
    Raises:
      CheckpointNotFoundError: no checkpoint at `path`.
      CorruptCheckpointError: a checkpoint that cannot be read (a state file, index, data shard, safetensors or
        config.json that is damaged, truncated or missing), naming the file.
      CheckpointMismatchError: one that does not fit the model: a shape mismatch (naming the variable), encoder
        weights missing (another model's checkpoint), a config field that differs.
    """
    fmt = registry.detect(path)
    ensure_built(model)
    source = tf_checkpoint.resolve(path) if fmt.reads_prefix else path
    try:
        with reading(source):
            pairs, result, encoder_missing = fmt.load(model, path, init_from_group0=init_from_group0)
    except CheckpointError:
        raise
    except ValueError as err:  # a shape or layout the model does not have (the readers name the variable)
        raise CheckpointMismatchError(f"{path}: {err}") from None
    if encoder_missing and not allow_missing_encoder:
        raise CheckpointMismatchError(
            f"{path} ({fmt.name}) lacks {len(encoder_missing)} encoder weight(s) the model needs, e.g. "
            f"{', '.join(encoder_missing[:3])}; is it an ALBERT checkpoint of this config?")
    if not pairs:
        raise CheckpointMismatchError(f"{path} ({fmt.name}) has no weight this model uses")
    for variable, value in pairs:
        variable.assign(np.asarray(value).astype(np.dtype(variable.dtype)))  # arrays or tensors alike
    if result.missing:
        logging.warning("Not in %s, left at their initial values: %s", path, ", ".join(result.missing))
    return result


def save_checkpoint(model, path, fmt="original"):
    """Writes `model`'s weights as `original` (TF1 prefix), `huggingface` (directory) or `native` (prefix);
    returns `path`."""
    found = registry.get(fmt)
    if found is None or not found.saves_models:
        known = ", ".join(f.name for f in registry.REGISTRY if f.saves_models)
        raise CheckpointError(f"unknown checkpoint format {fmt!r}; known: {known}")
    return found.write(model, path)
