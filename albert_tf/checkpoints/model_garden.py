"""TensorFlow Model Garden's ALBERT weights, and TF-Hub model directories, in terms of the original's TF1 names.

Read here (and loaded by `albert_tf.checkpoints.load_checkpoint` through the TF1 name table):
  * Model Garden TF2 checkpoints of `AlbertEncoder` (root object `encoder`, or the legacy `model`) and of
    `BertPretrainerV2` (roots `encoder` and `masked_lm`, as `tf2_albert_encoder_checkpoint_converter` and Model
    Garden's trainer write them);
  * TF-Hub style TF2 SavedModels made by Model Garden's `export_tfhub` (`albert_en_base/3` and its siblings, and
    this project's `export_model.py --export_type=tfhub`): the encoder, plus the masked-LM head of an `mlm`
    sub-object.
A TF1 TF-Hub module (`tfhub_module.pb` + `variables/`, the original's `export_to_tfhub.py` output) needs nothing
from here: its variables are a TF1 name-based checkpoint (`tf_checkpoint.resolve` points at them), and its
`assets/albert_config.json` is found by `config_file_beside`.

How the weights are found. An object-based checkpoint keys each variable by one object path, whichever TF met
first: a pretrainer stores the shared word table once, as `masked_lm/embedding_table`, and a SavedModel as
`variables/0`. The object graph (`_CHECKPOINTABLE_OBJECT_GRAPH`) also records each variable's Keras name
(`full_name`), and those names are Model Garden's stable interface (its converter loads TF1 weights into its
models by these names). So every variable is looked up by its name, wherever it is stored.

Layouts. Model Garden keeps the attention kernels per head: query, key and value kernels are [H, heads, H/heads]
with biases [heads, H/heads], the output kernel is [heads, H/heads, H]; the original stores them [H, H] and [H].
These are row-major reshapes (TF1 column `n * H/heads + d` is head n, depth d); every shape is checked before
it is reshaped. Everything else has the original's shape. Model Garden has no sentence-order head (a
`BertPretrainerV2` without classification heads has no place for it), so a loader reports it missing.

Model Garden's ALBERT has one shared Transformer block (num_hidden_groups = inner_group_num = 1). The weights
reveal the heads but not the number of layers: the config comes from `--albert_config_file` or an
`albert_config.json` beside the weights.
"""

import os

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from albert_tf.checkpoints import tf_checkpoint
from albert_tf.checkpoints.name_table import NamedFormat
from albert_tf.checkpoints.tf_checkpoint import GRAPH_KEY

CONFIG_NAME = "albert_config.json"
_BLOCK = "bert/encoder/transformer/group_0/inner_group_0/"

# How a Model Garden array relates to the TF1 one.
SAME = "same"  # identical shape and layout
HEADS_IN = "heads_in"  # [H, heads, H/heads] <-> [H, H] (query, key, value kernels)
HEADS_BIAS = "heads_bias"  # [heads, H/heads] <-> [H] (their biases)
HEADS_OUT = "heads_out"  # [heads, H/heads, H] <-> [H, H] (attention output kernel)

# (Model Garden variable name, TF1 name, layout), in the order of Model Garden's `variables` lists.
ENCODER_TABLE = [
    ("word_embeddings/embeddings", "bert/embeddings/word_embeddings", SAME),
    ("position_embedding/embeddings", "bert/embeddings/position_embeddings", SAME),
    ("type_embeddings/embeddings", "bert/embeddings/token_type_embeddings", SAME),
    ("embeddings/layer_norm/gamma", "bert/embeddings/LayerNorm/gamma", SAME),
    ("embeddings/layer_norm/beta", "bert/embeddings/LayerNorm/beta", SAME),
    ("embedding_projection/kernel", "bert/encoder/embedding_hidden_mapping_in/kernel", SAME),
    ("embedding_projection/bias", "bert/encoder/embedding_hidden_mapping_in/bias", SAME),
]
for _part in ("query", "key", "value"):
    ENCODER_TABLE += [(f"transformer/self_attention/{_part}/kernel", f"{_BLOCK}attention_1/self/{_part}/kernel",
                       HEADS_IN),
                      (f"transformer/self_attention/{_part}/bias", f"{_BLOCK}attention_1/self/{_part}/bias",
                       HEADS_BIAS)]
ENCODER_TABLE += [
    ("transformer/self_attention/attention_output/kernel", f"{_BLOCK}attention_1/output/dense/kernel", HEADS_OUT),
    ("transformer/self_attention/attention_output/bias", f"{_BLOCK}attention_1/output/dense/bias", SAME),
    ("transformer/self_attention_layer_norm/gamma", f"{_BLOCK}LayerNorm/gamma", SAME),
    ("transformer/self_attention_layer_norm/beta", f"{_BLOCK}LayerNorm/beta", SAME),
    ("transformer/intermediate/kernel", f"{_BLOCK}ffn_1/intermediate/dense/kernel", SAME),
    ("transformer/intermediate/bias", f"{_BLOCK}ffn_1/intermediate/dense/bias", SAME),
    ("transformer/output/kernel", f"{_BLOCK}ffn_1/intermediate/output/dense/kernel", SAME),
    ("transformer/output/bias", f"{_BLOCK}ffn_1/intermediate/output/dense/bias", SAME),
    ("transformer/output_layer_norm/gamma", f"{_BLOCK}LayerNorm_1/gamma", SAME),
    ("transformer/output_layer_norm/beta", f"{_BLOCK}LayerNorm_1/beta", SAME),
    ("pooler_transform/kernel", "bert/pooler/dense/kernel", SAME),
    ("pooler_transform/bias", "bert/pooler/dense/bias", SAME),
]
MLM_TABLE = [
    ("bert/cls/predictions/output_bias/bias", "cls/predictions/output_bias", SAME),
    ("bert/cls/predictions/transform/dense/kernel", "cls/predictions/transform/dense/kernel", SAME),
    ("bert/cls/predictions/transform/dense/bias", "cls/predictions/transform/dense/bias", SAME),
    ("bert/cls/predictions/transform/LayerNorm/gamma", "cls/predictions/transform/LayerNorm/gamma", SAME),
    ("bert/cls/predictions/transform/LayerNorm/beta", "cls/predictions/transform/LayerNorm/beta", SAME),
]
TABLE = ENCODER_TABLE + MLM_TABLE
_MARKERS = ("word_embeddings/embeddings", "transformer/self_attention/query/kernel")


# ------------------------------------------------------------------------------------------------------------------
# Where things are.

def config_file_beside(path):
    """The `albert_config.json` that belongs to the weights at `path` (a prefix, checkpoint directory, SavedModel
    or TF-Hub module directory), or None: beside them, or in the directory's `assets/` (where the original's
    hub modules and this project's `tfhub` exports keep it)."""
    path = os.path.abspath(path)
    directory = path if os.path.isdir(path) else os.path.dirname(path)
    candidates = [directory, os.path.join(directory, "assets")]
    if os.path.basename(directory) == "variables":  # a SavedModel's or hub module's variables prefix
        candidates += [os.path.dirname(directory), os.path.join(os.path.dirname(directory), "assets")]
    for candidate in candidates:
        config = os.path.join(candidate, CONFIG_NAME)
        if os.path.isfile(config):
            return config
    return None


def variable_keys(reader, strict=True):
    """{variable name (`full_name`): checkpoint key} of every variable in an object-based checkpoint.

    With `strict`, raises ValueError if two different stored variables carry one name (the checkpoint holds two
    models); else the first is kept.
    """
    if not reader.has_tensor(GRAPH_KEY):
        return {}
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor(GRAPH_KEY))
    keys = {}
    for node in graph.nodes:
        for attribute in node.attributes:
            if attribute.name != "VARIABLE_VALUE" or not attribute.full_name:
                continue
            name = attribute.full_name.removesuffix(":0")
            if keys.setdefault(name, attribute.checkpoint_key) != attribute.checkpoint_key and strict:
                raise ValueError(f"two variables are named {name} ({keys[name]} and {attribute.checkpoint_key}); "
                                 "expected one ALBERT")
    return keys


def is_model_garden(prefix):
    """True when the checkpoint at `prefix` holds a Model Garden ALBERT encoder (checkpoint or SavedModel)."""
    try:
        reader = tf.train.load_checkpoint(prefix)
        return all(name in variable_keys(reader, strict=False) for name in _MARKERS)
    except (tf.errors.OpError, ValueError):
        return False


# ------------------------------------------------------------------------------------------------------------------
# Layouts.

def _heads(name, shape, num_heads, expected):
    """Checks a per-head shape; returns (hidden, heads, head_size)."""
    def fail(why):
        return ValueError(f"shape mismatch for {name}: Model Garden stores it as {expected}, the checkpoint has "
                          f"{list(shape)} ({why})")

    if expected == "[H, heads, H/heads]" and len(shape) == 3:
        hidden, heads, size = shape
    elif expected == "[heads, H/heads, H]" and len(shape) == 3:
        heads, size, hidden = shape
    elif expected == "[heads, H/heads]" and len(shape) == 2:
        (heads, size), hidden = shape, shape[0] * shape[1]
    else:
        raise fail(f"rank {len(shape)}")
    if heads * size != hidden:
        raise fail(f"heads x head size = {heads * size}, hidden size {hidden}")
    if num_heads is not None and heads != num_heads:
        raise fail(f"{heads} heads, the config has num_attention_heads {num_heads}")
    return hidden, heads, size


def to_tf1(mg_name, layout, array, num_heads=None):
    """A Model Garden array in the original's layout; raises ValueError naming `mg_name` if its shape is not
    Model Garden's (or, with `num_heads`, has another number of heads)."""
    array = np.asarray(array)
    if layout == HEADS_IN:
        hidden, _, _ = _heads(mg_name, array.shape, num_heads, "[H, heads, H/heads]")
        return array.reshape(hidden, hidden)
    if layout == HEADS_BIAS:
        hidden, _, _ = _heads(mg_name, array.shape, num_heads, "[heads, H/heads]")
        return array.reshape(hidden)
    if layout == HEADS_OUT:
        hidden, _, _ = _heads(mg_name, array.shape, num_heads, "[heads, H/heads, H]")
        return array.reshape(hidden, hidden)
    return array


def from_tf1(tf1_name, layout, array, num_heads):
    """A TF1 array in Model Garden's layout (the inverse of `to_tf1`); raises ValueError naming `tf1_name` if its
    shape does not split into `num_heads` heads."""
    array = np.asarray(array)
    if layout == SAME:
        return array
    hidden = array.shape[0]
    expected_rank = 1 if layout == HEADS_BIAS else 2
    if array.ndim != expected_rank or hidden % num_heads or (array.ndim == 2 and array.shape[1] != hidden):
        raise ValueError(f"shape mismatch for {tf1_name}: {list(array.shape)} does not split into "
                         f"{num_heads} attention heads of a hidden size {hidden}")
    size = hidden // num_heads
    if layout == HEADS_IN:
        return array.reshape(hidden, num_heads, size)
    if layout == HEADS_BIAS:
        return array.reshape(num_heads, size)
    return array.reshape(num_heads, size, hidden)


# ------------------------------------------------------------------------------------------------------------------
# Reading.

def read_tf1_arrays(prefix, num_attention_heads=None):
    """{TF1 name: array} of a Model Garden checkpoint or SavedModel (variables prefix `prefix`).

    Weights Model Garden has and the original has not (e.g. a pretrainer's classification heads) are returned
    under their Model Garden names, so a loader can report them unused; counters and optimizer state are left out.
    With `num_attention_heads`, the per-head kernels must have that many heads.
    """
    reader = tf.train.load_checkpoint(prefix)
    keys = variable_keys(reader)
    dtypes = reader.get_variable_to_dtype_map()
    arrays, mapped = {}, set()
    for mg_name, tf1_name, layout in TABLE:
        if mg_name in keys:
            arrays[tf1_name] = to_tf1(mg_name, layout, reader.get_tensor(keys[mg_name]), num_attention_heads)
            mapped.add(mg_name)
    for name, key in keys.items():
        if (name in mapped or key.startswith(("optimizer/", "save_counter/")) or "/.OPTIMIZER_SLOT/" in key
                or not dtypes[key].is_floating):
            continue
        arrays[name] = reader.get_tensor(key)
    return arrays


class ModelGardenFormat(NamedFormat):
    """Model Garden TF2 checkpoints and TF-Hub style TF2 SavedModels, read by the original's names."""

    name = "model_garden"
    description = ("a TF Model Garden TF2 checkpoint (AlbertEncoder, BertPretrainerV2), or a TF-Hub style TF2 "
                   "SavedModel (albert_en_base/3)")
    reads_prefix = True

    def detect(self, path):
        opened = tf_checkpoint.open_prefix(path)
        return (opened is not None and not tf_checkpoint.object_graph_damaged(*opened)
                and is_model_garden(opened[0]))

    def read(self, path, names=None, config=None):
        heads = config.num_attention_heads if config is not None else None
        return read_tf1_arrays(tf_checkpoint.resolve(path), num_attention_heads=heads)


FORMAT = ModelGardenFormat()
