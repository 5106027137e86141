"""Load and save ALBERT weights in every format users hold, detected from the path.

Formats:
  * `original`: a TF1 name-based checkpoint of the original release (`bert/...`, `cls/...`; a TF-Hub
    `module/` prefix is accepted; optimizer slots and `global_step` are ignored);
  * `huggingface`: a directory with `config.json` + `model.safetensors` (or the `.safetensors` file);
  * `keras_hub`: a keras-hub ALBERT preset directory, or a live `keras_hub.models.AlbertBackbone`;
  * `native`: this project's own TF2 checkpoints (`tf.train.Checkpoint(model=...)`, as training writes);
  * `model_garden`: TF Model Garden's TF2 checkpoints (`AlbertEncoder`, `BertPretrainerV2`) and TF-Hub style TF2
    SavedModels (Model Garden's `export_tfhub`, e.g. `albert_en_base/3`; this project's `tfhub` export).
A TF1 TF-Hub module directory (`tfhub_module.pb`, the original's `export_to_tfhub.py`) is read as `original`.

`load_checkpoint` returns what was loaded, missing and unused; it raises `CheckpointNotFoundError` when nothing
is there, `CorruptCheckpointError` naming the file when what is there cannot be read, and
`CheckpointMismatchError` naming the variable on a shape mismatch; it refuses to leave an encoder weight at its
random init. Nothing is assigned until every weight has been read.
"""

import dataclasses
import logging
import os

import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from tensorflow.python.training.checkpoint_state_pb2 import CheckpointState

from albert_tf.checkpoints import errors, huggingface, keras_hub_format, model_garden, native, original
from albert_tf.checkpoints.errors import (
    CheckpointError,
    CheckpointMismatchError,
    CheckpointNotFoundError,
    CorruptCheckpointError,
    reading,
)
from albert_tf.checkpoints.original import tf1_entries
from albert_tf.model import dummy_inputs

FORMATS = ("original", "huggingface", "keras_hub", "native", "model_garden")
STATE_FILE = "checkpoint"  # TF's checkpoint state file, naming a directory's latest checkpoint
_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


@dataclasses.dataclass
class LoadResult:
    """What `load_checkpoint` did: names (in the source format) loaded, missing from it, and left unused."""

    format: str
    loaded: list
    missing: list
    unused: list

    def __str__(self):
        return (f"{self.format} checkpoint: {len(self.loaded)} weights loaded, {len(self.missing)} missing"
                f"{' (' + ', '.join(self.missing[:5]) + ('...' if len(self.missing) > 5 else '') + ')' if self.missing else ''}"
                f", {len(self.unused)} unused")


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
                                     f"{errors.reason(err)}") from None
    state = CheckpointState()
    try:
        text_format.Merge(data.decode("utf-8"), state)
    except UnicodeDecodeError:
        raise CorruptCheckpointError(f"{state_file} is corrupt: not a TF checkpoint state file (not text: invalid "
                                     "UTF-8)") from None
    except text_format.ParseError as err:
        raise CorruptCheckpointError(f"{state_file} is corrupt: not a TF checkpoint state file "
                                     f"({errors.reason(err)})") from None
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


def resolve(path):
    """A checkpoint prefix for a directory holding a TF checkpoint (its latest), a TF1 TF-Hub module or a TF2
    SavedModel (their variables), else `path` itself. A `checkpoint` state file that is not one raises
    `CorruptCheckpointError`."""
    if isinstance(path, str) and os.path.isdir(path):
        hub_variables = os.path.join(path, "variables", "variables")
        if os.path.exists(os.path.join(path, "tfhub_module.pb")) and os.path.exists(hub_variables + ".index"):
            return hub_variables  # a TF1 TF-Hub module: its variables are a TF1 checkpoint
        if model_garden.saved_model_variables(path):
            return hub_variables
        latest = latest_checkpoint(path)
        if latest:
            return latest
        indexes = sorted(f[:-len(".index")] for f in os.listdir(path) if f.endswith(".index"))
        if len(indexes) == 1:
            return os.path.join(path, indexes[0])
    return path


def detect_format(path):
    """Which of `FORMATS` `path` holds.

    Raises `CheckpointNotFoundError` if none is there, `CorruptCheckpointError` for a `checkpoint` state file or
    an `.index` that is not one. Damage to the data shards is left for the load to find and report (a TF2
    checkpoint whose object graph cannot be read is taken for a native one: reading it names the damage).
    """
    if not isinstance(path, str):
        if type(path).__name__ == "AlbertBackbone":
            return "keras_hub"
        raise CheckpointError(f"cannot load weights from a {type(path).__name__}")
    if huggingface.weights_file(path):
        return "huggingface"
    if keras_hub_format.is_keras_hub_dir(path):
        return "keras_hub"
    prefix = resolve(path)
    if not os.path.exists(prefix + ".index"):
        raise CheckpointNotFoundError(
            f"no checkpoint found at {path!r} (expected a TF checkpoint prefix or directory, "
            "a Hugging Face directory with model.safetensors, a keras-hub preset directory, "
            "a TF-Hub module or a SavedModel)")
    with reading(prefix):
        reader = tf.train.load_checkpoint(prefix)  # an .index that is none fails here
    try:
        with reading(prefix):
            if reader.has_tensor(_GRAPH_KEY):
                reader.get_tensor(_GRAPH_KEY)
    except CorruptCheckpointError:
        return "native"
    if model_garden.is_model_garden(prefix):  # before native: a legacy Model Garden root is `model` too
        return "model_garden"
    return "native" if native.is_native(prefix) else "original"


def _encoder_ids(model):
    encoder = getattr(model, "albert", model)
    return {id(v) for v in encoder.weights}


def ensure_built(model):
    """Builds `model`'s weights with a tiny forward pass if it has none yet."""
    if not model.weights:
        inputs = dummy_inputs(num_predictions=1 if hasattr(model, "masked_lm") else None)
        if hasattr(model, "num_choices"):  # multiple choice: [batch, num_choices, seq]
            inputs = {k: tf.repeat(v[:, None], model.num_choices, axis=1) for k, v in inputs.items()}
        model(inputs, training=False)


def _assign_all(pairs):
    for variable, value in pairs:
        variable.assign(value.astype(np.dtype(variable.dtype)) if hasattr(value, "astype") else value)


def _load_named(model, arrays, fmt, init_from_group0=False):
    """Loads `{tf1_name: array}` into `model` via the TF1 name table."""
    loaded, missing, pairs = [], [], []
    used = set()
    for entry in tf1_entries(model):
        source = entry.name
        if init_from_group0 and source not in arrays:
            source = _group0_name(entry.name)
        if source not in arrays:
            missing.append(entry.name)
            continue
        pairs.append((entry.variable, entry.to_keras(arrays[source])))
        loaded.append(entry.name)
        used.add(source)
    unused = sorted(set(arrays) - used)
    return pairs, LoadResult(fmt, loaded, missing, unused)


def _group0_name(name):
    """The group_0 variable the original's `init_from_group0` reads for `name`."""
    parts = name.split("/")
    return "/".join("group_0" if p.startswith("group_") else p for p in parts)


def _load_native(model, arrays, stored_keys):
    loaded, missing, pairs, used = [], [], [], set()
    for key, variable in native.object_keys(model).items():
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
    # Report each stored variable once, by one of its paths; optimizer, metric and RNG state are not weights.
    unused = {}
    for path_key, stored in sorted(stored_keys.items()):
        if stored not in used and not any(s in path_key for s in ("seed_generator", "/_metrics", "_tracker",
                                                                  "model/optimizer/")):
            unused.setdefault(stored, path_key)
    return pairs, LoadResult("native", loaded, missing, sorted(unused.values()))


def read_arrays(path, fmt, names, config=None):
    """{TF1 name: array} from an original, Hugging Face, keras-hub or Model Garden checkpoint; `names` are the
    TF1 names the model wants (Hugging Face tensors are selected and re-laid-out by them); with the model's
    `config`, Model Garden's per-head kernels must have its number of heads."""
    if fmt == "original":
        return original.read_tf1(resolve(path))
    if fmt == "model_garden":
        heads = config.num_attention_heads if config is not None else None
        return model_garden.read_tf1_arrays(resolve(path), num_attention_heads=heads)
    if fmt == "huggingface":
        return huggingface.to_tf1_arrays(huggingface.read_hf(path), names)[0]
    if fmt == "keras_hub":
        backbone = path if not isinstance(path, str) else keras_hub_format.load_backbone(path)
        return keras_hub_format.backbone_arrays(backbone)
    raise CheckpointError(f"read_arrays does not handle the {fmt!r} format")


def load_checkpoint(model, path, init_from_group0=False, allow_missing_encoder=False):
    """Loads weights into `model` from `path`, detecting the format (see module docstring).

    Args:
      model: an `AlbertModel`, `AlbertForPretraining` or task model (built on first use if needed).
      path: a checkpoint prefix or directory, a Hugging Face directory or `.safetensors` file, a keras-hub
        preset directory, a TF-Hub module or SavedModel directory, or a `keras_hub.models.AlbertBackbone`.
      init_from_group0: original and Model Garden formats: initialise every group from group_0 (the original's
        flag).
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
    fmt = detect_format(path)
    ensure_built(model)
    source = resolve(path) if fmt in ("native", "original", "model_garden") else path
    try:
        with reading(source):
            if fmt == "native":
                pairs, result = _load_native(model, *native.read_native(source))
                encoder_missing = [k for k in result.missing if "/albert/" in k or not hasattr(model, "albert")]
            else:
                if fmt == "huggingface":
                    config = huggingface.read_config(path)
                    if config is not None:
                        _check_config(model, config, path)
                names = [e.name for e in tf1_entries(model)]
                if fmt == "huggingface":
                    tensors = huggingface.read_hf(path)
                    arrays, used = huggingface.to_tf1_arrays(tensors, names)
                    pairs, result = _load_named(model, arrays, fmt)
                    result.unused = sorted(set(tensors) - used - huggingface.TIED_OR_BUFFERS)
                else:
                    arrays = read_arrays(path, fmt, names, config=getattr(model, "config", None))
                    pairs, result = _load_named(model, arrays, fmt, init_from_group0=init_from_group0)
                encoder_missing = [n for n in result.missing if n.startswith("bert/")]
    except CheckpointError:
        raise
    except ValueError as err:  # a shape or layout the model does not have (the readers name the variable)
        raise CheckpointMismatchError(f"{path}: {err}") from None
    if encoder_missing and not allow_missing_encoder:
        raise CheckpointMismatchError(
            f"{path} ({fmt}) lacks {len(encoder_missing)} encoder weight(s) the model needs, e.g. "
            f"{', '.join(encoder_missing[:3])}; is it an ALBERT checkpoint of this config?")
    if not pairs:
        raise CheckpointMismatchError(f"{path} ({fmt}) has no weight this model uses")
    _assign_all(pairs)
    if result.missing:
        logging.warning("Not in %s, left at their initial values: %s", path, ", ".join(result.missing))
    return result


def _check_config(model, config, path):
    ours = getattr(model, "config", None)
    if ours is None:
        return
    for field in ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_hidden_groups",
                  "inner_group_num", "num_attention_heads", "intermediate_size", "hidden_act"):
        if getattr(ours, field) != getattr(config, field):
            raise CheckpointMismatchError(f"{path}: config field '{field}' is {getattr(config, field)!r} there but "
                                  f"{getattr(ours, field)!r} in the model's config")


def model_arrays(model):
    """{TF1 name: array} of every weight of `model` (the original's layout)."""
    ensure_built(model)
    return {e.name: e.to_tf1(e.variable.numpy()) for e in tf1_entries(model)}


def save_checkpoint(model, path, fmt="original"):
    """Writes `model`'s weights as `original` (TF1 prefix), `huggingface` (directory) or `native` (prefix)."""
    if fmt == "original":
        return original.write_tf1(model_arrays(model), path)
    if fmt == "huggingface":
        return huggingface.write_hf(model_arrays(model), model.config, path)
    if fmt == "native":
        ensure_built(model)
        return tf.train.Checkpoint(model=model).write(path)
    raise CheckpointError(f"unknown checkpoint format {fmt!r}; known: original, huggingface, native")
