"""Hugging Face ALBERT weights (`model.safetensors` + `config.json`) in terms of the original's TF1 names.

`hf_name(tf1_name)` gives the Hugging Face tensor name and whether the array is transposed (PyTorch
`Linear` stores [out, in]; TF1 kernels are [in, out]). Both `AlbertModel` files (no prefix) and
`AlbertForPreTraining` / task files (`albert.` prefix) are read.

`write_folder` writes the complete folder transformers opens with nothing else: the weights, a `config.json` whose
`architectures` names the class of the head the weights have (`AlbertModel`, `AlbertForPreTraining`,
`AlbertForMaskedLM`, `AlbertForSequenceClassification` with `id2label` / `label2id`, `AlbertForQuestionAnswering`
for the SQuAD v1.1 head), the tokenizer (`huggingface_tokenizer`) and this project's `albert_config.json`.
`FORMAT` is the format: a directory with `config.json` + `model.safetensors`, or the `.safetensors` file.
"""

import json
import os
import re

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file

from albert_tf import fileio
from albert_tf.checkpoints import huggingface_tokenizer
from albert_tf.checkpoints.errors import CheckpointMismatchError, CorruptCheckpointError
from albert_tf.checkpoints.name_table import NamedFormat, assign_by_name, encoder_missing, model_arrays, tf1_entries
from albert_tf.config import AlbertConfig, ConfigError
from albert_tf.errors import UsageError

CONFIG_NAME = "albert_config.json"  # this project's config, kept in the folder (transformers ignores it)
MODEL_FILES = ("config.json", "model.safetensors", CONFIG_NAME)

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
    (r"cls/squad/output_weights", "qa_outputs.weight", False),  # [2, H]: start logits row 0, end row 1
    (r"cls/squad/output_bias", "qa_outputs.bias", False),
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


# The fields that shape the weights: a Hugging Face config.json that differs in one does not fit the model.
_SHAPE_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_hidden_groups",
                 "inner_group_num", "num_attention_heads", "intermediate_size", "hidden_act")


def check_config(model, config, path):
    """Raises `CheckpointMismatchError` naming the field when `config` (the folder's at `path`) differs from
    `model`'s in one of the fields that shape the weights."""
    ours = getattr(model, "config", None)
    if ours is None:
        return
    for field in _SHAPE_FIELDS:
        if getattr(ours, field) != getattr(config, field):
            raise CheckpointMismatchError(f"{path}: config field '{field}' is {getattr(config, field)!r} there but "
                                  f"{getattr(ours, field)!r} in the model's config")


def _tensors(arrays):
    """`{Hugging Face name: float32 array}` of `{tf1_name: array}` (names Hugging Face has no tensor for dropped).
    As transformers' own files, it holds no decoder weight or bias: those are tied to the word embeddings and to
    `predictions.bias`."""
    tensors = {}
    for name, array in arrays.items():
        mapped = hf_name(name)
        if mapped is None:
            continue
        key, transposed = mapped
        tensors[key] = np.ascontiguousarray(array.T if transposed else array, dtype=np.float32)
    return tensors


def write_hf(arrays, config, directory):
    """Writes `{tf1_name: array}` as `model.safetensors` + `config.json` in `directory` (atomically per file)."""
    tensors = _tensors(arrays)
    with fileio.atomic_path(os.path.join(directory, "model.safetensors")) as tmp:
        save_file(tensors, tmp, metadata={"format": "pt"})
    fileio.write_json(os.path.join(directory, "config.json"), config.to_hf_dict())
    return directory


def architecture(arrays):
    """The transformers class that holds exactly the heads in `arrays` (by TF1 name)."""
    if "output_weights" in arrays:
        return "AlbertForSequenceClassification"
    if "cls/squad/output_weights" in arrays:
        return "AlbertForQuestionAnswering"
    if "cls/predictions/output_bias" in arrays:
        return "AlbertForPreTraining" if "cls/seq_relationship/output_weights" in arrays else "AlbertForMaskedLM"
    return "AlbertModel"


def hf_config(config, arrays, labels=None, regression=False):
    """The `config.json` contents for `arrays`: `architectures` by the heads present; for a classifier
    `num_labels`, `id2label` / `label2id` (from `labels`, else transformers' `LABEL_<i>`) and, for one output with
    `regression`, `problem_type` "regression". Raises `CheckpointMismatchError` when `labels` are given for
    weights without a classifier head or do not match its number of outputs."""
    values = config.to_hf_dict()
    values["architectures"] = [architecture(arrays)]
    if "output_bias" not in arrays:
        if labels:
            raise CheckpointMismatchError(f"label names {labels} given, but the model has no classifier head "
                                          "(output_weights, output_bias)")
        return values
    num_labels = int(np.shape(arrays["output_bias"])[0])
    if labels is not None and len(labels) != num_labels:
        raise CheckpointMismatchError(f"{len(labels)} label names {list(labels)} for a classifier head with "
                                      f"{num_labels} outputs")
    names = [str(label) for label in labels] if labels else [f"LABEL_{i}" for i in range(num_labels)]
    values.update(num_labels=num_labels, id2label={str(i): name for i, name in enumerate(names)},
                  label2id={name: i for i, name in enumerate(names)})
    if regression and num_labels == 1:
        values["problem_type"] = "regression"
    return values


def is_folder(directory):
    """Whether `directory` holds a Hugging Face folder this project wrote (weights, config.json and
    albert_config.json): what an export may replace."""
    return all(os.path.isfile(os.path.join(directory, name)) for name in MODEL_FILES)


def folder_problem(directory):
    """Why `directory` cannot take a Hugging Face export, or None: a file, or a non-empty folder that is not an
    earlier export (`is_folder`), which is replaced whole."""
    if not os.path.exists(directory):
        return None
    if not os.path.isdir(directory):
        return "it is a file"
    if os.listdir(directory) and not is_folder(directory):
        return ("it holds files that are not a Hugging Face export (only an earlier export, with config.json, "
                f"model.safetensors and {CONFIG_NAME}, is replaced); choose another folder")
    return None


def check_export_folder(directory, what):
    """Raises `UsageError` ("<what>: why") when `folder_problem(directory)` says it cannot take an export."""
    problem = folder_problem(directory)
    if problem:
        raise UsageError(f"{what}: {problem}")


def write_folder(directory, config, arrays, spm_model_file=None, vocab_file=None, do_lower_case=True, labels=None,
                 regression=False, overwrite=False, model_max_length=512, what=None):
    """Writes the complete Hugging Face folder of `arrays` ({TF1 name: array}) at `directory`; returns it.

    The tokenizer is `spm_model_file` (SentencePiece), else `vocab_file` (WordPiece), else none (weights and
    config only). `labels` name a classifier head's outputs. The folder is staged and moved into place whole: a
    failure leaves nothing at `directory`, and an existing non-empty one is replaced (whole) only with
    `overwrite`. `what` names the output in errors (e.g. "--output_path /x").
    """
    values = hf_config(config, arrays, labels, regression)
    tensors = _tensors(arrays)
    with fileio.atomic_path(directory, what, directory=True, replace_directory_ok=overwrite) as staged:
        if spm_model_file or vocab_file:
            huggingface_tokenizer.write_tokenizer(staged, spm_model_file, vocab_file, do_lower_case,
                                                  model_max_length=model_max_length, vocab_size=config.vocab_size)
        save_file(tensors, os.path.join(staged, "model.safetensors"), metadata={"format": "pt"})
        with open(os.path.join(staged, "config.json"), "w", encoding="utf-8") as f:
            json.dump(values, f, indent=2, sort_keys=True)
        with open(os.path.join(staged, CONFIG_NAME), "w", encoding="utf-8") as f:
            f.write(config.to_json_string())
    return directory


class HuggingfaceFormat(NamedFormat):
    """Hugging Face weights: selected and re-laid-out by the model's TF1 names; the folder's `config.json` must
    agree with the model's config; unused weights are reported by their Hugging Face names."""

    name = "huggingface"
    description = "a Hugging Face directory with config.json and model.safetensors, or the .safetensors file"
    saves_models = True

    def detect(self, path):
        return isinstance(path, str) and weights_file(path) is not None

    def read_config(self, path):
        return read_config(path)

    def read(self, path, names=None, config=None):
        return to_tf1_arrays(read_hf(path), names)[0]

    def load(self, model, path, init_from_group0=False):
        config = read_config(path)
        if config is not None:
            check_config(model, config, path)
        tensors = read_hf(path)
        arrays, used = to_tf1_arrays(tensors, [e.name for e in tf1_entries(model)])
        pairs, result = assign_by_name(model, arrays, self.name)
        result.unused = sorted(set(tensors) - used - TIED_OR_BUFFERS)
        return pairs, result, encoder_missing(result)

    def write(self, model, path, exclude_ids=frozenset(), folder=False, **folder_options):
        """Without `folder`: `model.safetensors` + `config.json` in `path` (`write_hf`, what `save_checkpoint`
        writes); with it, the complete folder transformers opens (`write_folder`, given `folder_options`)."""
        arrays = model_arrays(model, exclude_ids)
        if folder:
            return write_folder(path, model.config, arrays, **folder_options)
        return write_hf(arrays, model.config, path)


FORMAT = HuggingfaceFormat()
