"""Hugging Face ALBERT weights (`model.safetensors` + `config.json`) in terms of the original's TF1 names.

`hf_name(tf1_name)` gives the Hugging Face tensor name and whether the array is transposed (PyTorch
`Linear` stores [out, in]; TF1 kernels are [in, out]). Both `AlbertModel` files (no prefix) and
`AlbertForPreTraining` / task files (`albert.` prefix) are read.
"""

import json
import os
import re

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file

from albert_tf import fileio
from albert_tf.checkpoints.errors import CheckpointMismatchError, CorruptCheckpointError
from albert_tf.config import AlbertConfig, ConfigError

# (TF1 pattern, HF template, transposed). Patterns see names without the "bert/" prefix where marked.
_TABLE = [
    (r"bert/embeddings/(word|position|token_type)_embeddings", r"albert.embeddings.\1_embeddings.weight", False),
    (r"bert/embeddings/LayerNorm/gamma", "albert.embeddings.LayerNorm.weight", False),
    (r"bert/embeddings/LayerNorm/beta", "albert.embeddings.LayerNorm.bias", False),
    (r"bert/encoder/embedding_hidden_mapping_in/kernel", "albert.encoder.embedding_hidden_mapping_in.weight", True),
    (r"bert/encoder/embedding_hidden_mapping_in/bias", "albert.encoder.embedding_hidden_mapping_in.bias", False),
    (r"bert/pooler/dense/kernel", "albert.pooler.weight", True),
    (r"bert/pooler/dense/bias", "albert.pooler.bias", False),
    (r"cls/predictions/transform/dense/kernel", "predictions.dense.weight", True),
    (r"cls/predictions/transform/dense/bias", "predictions.dense.bias", False),
    (r"cls/predictions/transform/LayerNorm/gamma", "predictions.LayerNorm.weight", False),
    (r"cls/predictions/transform/LayerNorm/beta", "predictions.LayerNorm.bias", False),
    (r"cls/predictions/output_bias", "predictions.bias", False),
    (r"cls/seq_relationship/output_weights", "sop_classifier.classifier.weight", False),
    (r"cls/seq_relationship/output_bias", "sop_classifier.classifier.bias", False),
    (r"output_weights", "classifier.weight", False),
    (r"output_bias", "classifier.bias", False),
]
# Hugging Face tensors that duplicate others (tied) or are buffers, never weights to load.
TIED_OR_BUFFERS = {"predictions.decoder.weight", "predictions.decoder.bias", "albert.embeddings.position_ids"}
_LAYER = r"bert/encoder/transformer/group_(\d+)/inner_group_(\d+)/"
_LAYER_HF = r"albert.encoder.albert_layer_groups.\1.albert_layers.\2."
_LAYER_TABLE = [
    (r"attention_1/self/(query|key|value)/kernel", r"attention.\3.weight", True),
    (r"attention_1/self/(query|key|value)/bias", r"attention.\3.bias", False),
    (r"attention_1/output/dense/kernel", "attention.dense.weight", True),
    (r"attention_1/output/dense/bias", "attention.dense.bias", False),
    (r"LayerNorm/gamma", "attention.LayerNorm.weight", False),
    (r"LayerNorm/beta", "attention.LayerNorm.bias", False),
    (r"ffn_1/intermediate/dense/kernel", "ffn.weight", True),
    (r"ffn_1/intermediate/dense/bias", "ffn.bias", False),
    (r"ffn_1/intermediate/output/dense/kernel", "ffn_output.weight", True),
    (r"ffn_1/intermediate/output/dense/bias", "ffn_output.bias", False),
    (r"LayerNorm_1/gamma", "full_layer_layer_norm.weight", False),
    (r"LayerNorm_1/beta", "full_layer_layer_norm.bias", False),
]
_COMPILED = [(re.compile(p + "$"), t, tr) for p, t, tr in _TABLE]
_COMPILED += [(re.compile(_LAYER + p + "$"), _LAYER_HF + t, tr) for p, t, tr in _LAYER_TABLE]


def hf_name(tf1_name):
    """(Hugging Face name, transposed) for a TF1 name, or None if Hugging Face has no such tensor."""
    for pattern, template, transposed in _COMPILED:
        match = pattern.match(tf1_name)
        if match:
            return match.expand(template), transposed
    return None


def weights_file(path):
    """The safetensors file for a directory or file path (None if `path` is not Hugging Face weights)."""
    if os.path.isdir(path):
        candidate = os.path.join(path, "model.safetensors")
        return candidate if os.path.isfile(candidate) else None
    return path if path.endswith(".safetensors") and os.path.isfile(path) else None


def read_hf(path):
    """Reads Hugging Face ALBERT weights and returns them keyed by TF1 name (arrays in TF1 layout)."""
    filename = weights_file(path)
    try:
        tensors = load_file(filename)
    except SafetensorError as err:  # a truncated, empty or garbage file: its header does not describe it
        raise CorruptCheckpointError(f"{filename} is corrupt or truncated: not a readable safetensors file "
                                     f"({str(err).strip()})") from None
    except OSError as err:
        raise CorruptCheckpointError(f"cannot read {filename}: {err.strerror or err}") from None
    # AlbertModel files carry no "albert." prefix; normalise to the AlbertForPreTraining spelling.
    if not any(k.startswith("albert.") for k in tensors):
        tensors = {(f"albert.{k}" if k.split(".")[0] in ("embeddings", "encoder", "pooler") else k): v
                   for k, v in tensors.items()}
    return tensors


def to_tf1_arrays(tensors, tf1_names):
    """Selects and re-lays-out Hugging Face tensors for the given TF1 names; returns (arrays, used)."""
    arrays, used = {}, set()
    for name in tf1_names:
        mapped = hf_name(name)
        if mapped is None or mapped[0] not in tensors:
            continue
        key, transposed = mapped
        arrays[name] = tensors[key].T if transposed else tensors[key]
        used.add(key)
    return arrays, used


def read_config(path):
    """The `AlbertConfig` of a Hugging Face directory (None when it has no config.json)."""
    directory = path if os.path.isdir(path) else os.path.dirname(path)
    config_file = os.path.join(directory, "config.json")
    if not os.path.isfile(config_file):
        return None
    try:
        with open(config_file, "rb") as f:
            values = json.loads(f.read().decode("utf-8"))
    except UnicodeDecodeError:
        raise CorruptCheckpointError(f"{config_file} is corrupt: not a JSON file (invalid UTF-8)") from None
    except json.JSONDecodeError as err:
        raise CorruptCheckpointError(f"{config_file} is corrupt: not valid JSON ({err})") from None
    except OSError as err:
        raise CorruptCheckpointError(f"cannot read {config_file}: {err.strerror or err}") from None
    if not isinstance(values, dict):
        raise CorruptCheckpointError(f"{config_file} is not a model config: a JSON {type(values).__name__}, "
                                     "expected an object")
    try:
        return AlbertConfig.from_hf_dict(values, source=config_file)
    except ConfigError as err:  # another model's config, or one this project cannot build
        raise CheckpointMismatchError(f"{os.path.dirname(config_file)}: {err}") from None


def write_hf(arrays, config, directory):
    """Writes `{tf1_name: array}` as `model.safetensors` + `config.json` in `directory` (atomically per file)."""
    tensors = {}
    for name, array in arrays.items():
        mapped = hf_name(name)
        if mapped is None:
            continue
        key, transposed = mapped
        tensors[key] = np.ascontiguousarray(array.T if transposed else array, dtype=np.float32)
    if "predictions.bias" in tensors:  # decoder.weight is tied to the word embeddings and not stored
        tensors["predictions.decoder.bias"] = tensors["predictions.bias"]
    with fileio.atomic_path(os.path.join(directory, "model.safetensors")) as tmp:
        save_file(tensors, tmp, metadata={"format": "pt"})
    fileio.write_json(os.path.join(directory, "config.json"), config.to_hf_dict())
    return directory
