"""The name table every name-mapped format builds on: each weight of a model under the name the original release
gives it, and a format loaded through that table.

`tf1_entries(model)` gives one `Entry` per weight of the model with the name the original `modeling.py` gives it
(`bert/...`, `cls/...`, task heads as the original's run scripts name them). Attention kernels are [H, H] in TF1
and [H, heads, head_size] here; the entry records the TF1 shape and whether the matrix is stored transposed
(`cls/seq_relationship/output_weights` is [2, H]). `model_arrays` reads a model as `{TF1 name: array}` and
`assign_by_name` loads such arrays back. `NamedFormat` is the format interface of every format read by these names
(original, Hugging Face, keras-hub, Model Garden): it reads `{TF1 name: array}` and loads through the table.
"""

import dataclasses

import numpy as np

from albert_tf import keras_internals
from albert_tf.checkpoints.format import CheckpointFormat, LoadResult, ensure_built
from albert_tf.model import AlbertClassifier, AlbertForMultipleChoice, AlbertForPretraining, AlbertForSquad, AlbertModel


@dataclasses.dataclass
class Entry:
    """One weight: its TF1 name, the Keras variable, and how the TF1 array relates to it.

    Attributes:
      name: the original's variable name, e.g. "bert/pooler/dense/kernel".
      variable: the Keras variable it loads into.
      tf1_shape: the shape the original stores.
      transpose: the original stores the transpose of our (reshaped) matrix.
    """

    name: str
    variable: object
    tf1_shape: tuple
    transpose: bool = False

    def to_keras(self, array):
        """TF1 array -> value for `variable`; raises ValueError naming the variable on a shape mismatch."""
        array = np.asarray(array)
        if tuple(array.shape) != tuple(self.tf1_shape):
            raise ValueError(f"shape mismatch for {self.name}: checkpoint has {list(array.shape)}, the model "
                             f"expects {list(self.tf1_shape)} (variable {self.variable.path})")
        if self.transpose:
            array = array.T
        return array.reshape(tuple(self.variable.shape))

    def to_tf1(self, value):
        """Keras value -> TF1 array."""
        array = np.asarray(value)
        if self.transpose:
            return array.reshape(tuple(reversed(self.tf1_shape))).T
        return array.reshape(self.tf1_shape)


def _dense(prefix, layer):
    kernel, bias = layer.kernel, layer.bias
    out_size = int(np.prod(bias.shape))
    in_size = int(np.prod(kernel.shape)) // out_size
    return [Entry(f"{prefix}/kernel", kernel, (in_size, out_size)),
            Entry(f"{prefix}/bias", bias, (out_size,))]


def _layer_norm(prefix, layer):
    return [Entry(f"{prefix}/gamma", layer.gamma, tuple(layer.gamma.shape)),
            Entry(f"{prefix}/beta", layer.beta, tuple(layer.beta.shape))]


def block_entries(scope, block):
    """Entries of one Transformer block (a keras-hub `TransformerEncoder`) under a TF1 layer scope."""
    parts = keras_internals.transformer_block_parts(block)
    entries = []
    for part in ("query", "key", "value"):
        entries += _dense(f"{scope}/attention_1/self/{part}", parts[part])
    entries += _dense(f"{scope}/attention_1/output/dense", parts["attention_output"])
    entries += _layer_norm(f"{scope}/LayerNorm", parts["attention_layer_norm"])
    entries += _dense(f"{scope}/ffn_1/intermediate/dense", parts["intermediate"])
    entries += _dense(f"{scope}/ffn_1/intermediate/output/dense", parts["output"])
    entries += _layer_norm(f"{scope}/LayerNorm_1", parts["output_layer_norm"])
    return entries


def encoder_entries(albert, prefix="bert"):
    """Entries of an `AlbertModel` under the original's `bert/` scope."""
    emb = albert.embeddings
    entries = [
        Entry(f"{prefix}/embeddings/word_embeddings", emb.word_embeddings.embeddings,
              tuple(emb.word_embeddings.embeddings.shape)),
        Entry(f"{prefix}/embeddings/position_embeddings", emb.position_embeddings.position_embeddings,
              tuple(emb.position_embeddings.position_embeddings.shape)),
        Entry(f"{prefix}/embeddings/token_type_embeddings", emb.token_type_embeddings.embeddings,
              tuple(emb.token_type_embeddings.embeddings.shape)),
    ]
    entries += _layer_norm(f"{prefix}/embeddings/LayerNorm", emb.layer_norm)
    entries += _dense(f"{prefix}/encoder/embedding_hidden_mapping_in", emb.embedding_hidden_mapping_in)
    for g, group in enumerate(albert.encoder.groups):
        for i, block in enumerate(group):
            entries += block_entries(f"{prefix}/encoder/transformer/group_{g}/inner_group_{i}", block)
    entries += _dense(f"{prefix}/pooler/dense", albert.pooler)
    return entries


def pretraining_head_entries(model):
    """Entries of the MLM and SOP heads of an `AlbertForPretraining`, under `cls/`."""
    mlm = model.masked_lm
    entries = _dense("cls/predictions/transform/dense", mlm.transform)
    entries += _layer_norm("cls/predictions/transform/LayerNorm", mlm.layer_norm)
    entries.append(Entry("cls/predictions/output_bias", mlm.output_bias, tuple(mlm.output_bias.shape)))
    sop = model.seq_relationship
    hidden = int(sop.kernel.shape[0])
    entries.append(Entry("cls/seq_relationship/output_weights", sop.kernel, (2, hidden), transpose=True))
    entries.append(Entry("cls/seq_relationship/output_bias", sop.bias, (2,)))
    return entries


def output_layer_entries(model, num_outputs):
    """The original's task head of `run_classifier` / `run_race`: `output_weights` [num_outputs, H] (the
    transpose of our kernel) and `output_bias`."""
    dense = model.output_layer
    return [Entry("output_weights", dense.kernel, (num_outputs, model.config.hidden_size), transpose=True),
            Entry("output_bias", dense.bias, (num_outputs,))]


def squad_head_entries(model):
    """The SQuAD heads under the original's names: v1.1 `cls/squad/output_weights` [2, H] and `output_bias`;
    v2.0 the answer verifier's `start_logits/dense`, `end_logits/dense_0`, `end_logits/LayerNorm`,
    `end_logits/dense_1`, `answer_class/dense_0` and `answer_class/dense_1` (no bias)."""
    h = model.config.hidden_size
    if not model.version_2:
        dense = model.output_layer
        return [Entry("cls/squad/output_weights", dense.kernel, (2, h), transpose=True),
                Entry("cls/squad/output_bias", dense.bias, (2,))]

    def dense(name, layer, in_size, out_size, bias=True):
        entries = [Entry(f"{name}/kernel", layer.kernel, (in_size, out_size))]
        if bias:
            entries.append(Entry(f"{name}/bias", layer.bias, (out_size,)))
        return entries

    return (dense("start_logits/dense", model.start_dense, h, 1)
            + dense("end_logits/dense_0", model.end_dense_0, 2 * h, h)
            + [Entry("end_logits/LayerNorm/gamma", model.end_layer_norm.gamma, (h,)),
               Entry("end_logits/LayerNorm/beta", model.end_layer_norm.beta, (h,))]
            + dense("end_logits/dense_1", model.end_dense_1, h, 1)
            + dense("answer_class/dense_0", model.answer_dense_0, 2 * h, h)
            + dense("answer_class/dense_1", model.answer_dense_1, h, 1, bias=False))


def tf1_entries(model):
    """All entries of `model`: the encoder's under `bert/`, then its head's (pretraining `cls/...`, the
    classifier's or multiple choice's `output_*`, or SQuAD's)."""
    if isinstance(model, AlbertModel):
        return encoder_entries(model)
    entries = encoder_entries(model.albert)
    if isinstance(model, AlbertForPretraining):
        entries += pretraining_head_entries(model)
    elif isinstance(model, AlbertClassifier):
        entries += output_layer_entries(model, model.num_labels)
    elif isinstance(model, AlbertForMultipleChoice):
        entries += output_layer_entries(model, 1)
    elif isinstance(model, AlbertForSquad):
        entries += squad_head_entries(model)
    return entries


def model_arrays(model, exclude_ids=frozenset()):
    """{TF1 name: array} of every weight of `model` (the original's layout), less the variables whose id is in
    `exclude_ids`."""
    ensure_built(model)
    return {e.name: e.to_tf1(e.variable.numpy()) for e in tf1_entries(model) if id(e.variable) not in exclude_ids}


def _group0_name(name):
    """The group_0 variable the original's `init_from_group0` reads for `name`."""
    parts = name.split("/")
    return "/".join("group_0" if p.startswith("group_") else p for p in parts)


def assign_by_name(model, arrays, fmt, init_from_group0=False):
    """(pairs of (variable, value), `LoadResult`) loading `{tf1_name: array}` into `model` via the TF1 name
    table; raises ValueError naming the variable on a shape mismatch."""
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


def encoder_missing(result):
    """The encoder weights (`bert/...`) a load by TF1 name left missing."""
    return [n for n in result.missing if n.startswith("bert/")]


class NamedFormat(CheckpointFormat):
    """A format read as `{TF1 name: array}` (`read`) and loaded through the name table."""

    def load(self, model, path, init_from_group0=False):
        names = [e.name for e in tf1_entries(model)]
        arrays = self.read(path, names, config=getattr(model, "config", None))
        pairs, result = assign_by_name(model, arrays, self.name, init_from_group0=init_from_group0)
        return pairs, result, encoder_missing(result)
