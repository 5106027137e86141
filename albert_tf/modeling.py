"""ALBERT models: the encoder (`AlbertModel`) and the pretraining model (MLM + SOP heads).

Inputs use the original release's names: `input_ids`, `input_mask`, `segment_ids` (int [B, T]) and, for
pretraining, `masked_lm_positions` (int [B, P]). Outputs are dicts. Dropout is active only with
`training=True`. Both models are Keras 3 models that serialise through `get_config()` (the config dict).
"""

import keras
from keras import ops

from albert_tf.config import AlbertConfig
from albert_tf.layers import AlbertEncoder, FactorizedEmbedding, MaskedLMHead, truncated_normal
from albert_tf.training import ClippedTrainStep


def _as_config(config):
    if isinstance(config, AlbertConfig):
        return config
    if isinstance(config, dict):
        return AlbertConfig.from_dict(config)
    raise TypeError(f"expected an AlbertConfig or a dict, got {type(config).__name__}")


def dummy_inputs(batch_size=1, seq_length=2, num_predictions=None):
    """Small all-valid inputs, used to build a model's weights before loading a checkpoint."""
    ones = ops.ones((batch_size, seq_length), "int32")
    inputs = {"input_ids": ones, "input_mask": ones, "segment_ids": ops.zeros_like(ones)}
    if num_predictions:
        inputs["masked_lm_positions"] = ops.zeros((batch_size, num_predictions), "int32")
    return inputs


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertModel(keras.Model):
    """The ALBERT encoder: factorized embedding, grouped shared Transformer blocks, pooler.

    Args:
      config: an `AlbertConfig` (or its dict).

    Call args:
      inputs: dict with int `input_ids`, `input_mask`, `segment_ids`, each [B, T], T <= max_position_embeddings.
    Returns:
      dict with `sequence_output` [B, T, H], `pooled_output` [B, H] (dense + tanh on position 0),
      `embedding_output` [B, T, H] and `encoder_outputs` (a list of num_hidden_layers [B, T, H] tensors).
    """

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = _as_config(config)
        c = self.config
        self.embeddings = FactorizedEmbedding(
            c.vocab_size, c.embedding_size, c.hidden_size, c.max_position_embeddings, c.type_vocab_size,
            dropout=c.hidden_dropout_prob, initializer_range=c.initializer_range, dtype=self.dtype_policy,
            name="embeddings")
        self.encoder = AlbertEncoder(
            c.num_hidden_layers, c.num_hidden_groups, c.inner_group_num, c.num_attention_heads,
            c.intermediate_size, hidden_act=c.hidden_act, hidden_dropout_prob=c.hidden_dropout_prob,
            attention_probs_dropout_prob=c.attention_probs_dropout_prob, initializer_range=c.initializer_range,
            dtype=self.dtype_policy, name="encoder")
        self.pooler = keras.layers.Dense(
            c.hidden_size, activation="tanh", kernel_initializer=truncated_normal(c.initializer_range),
            dtype=self.dtype_policy, name="pooler")

    def build(self, inputs_shape):
        ids_shape = tuple(inputs_shape["input_ids"])
        self.embeddings.build(ids_shape)
        self.encoder.build(ids_shape + (self.config.hidden_size,))
        self.pooler.build((ids_shape[0], self.config.hidden_size))
        self.built = True

    def call(self, inputs, training=None):
        input_ids = inputs["input_ids"]
        input_mask = inputs.get("input_mask")
        segment_ids = inputs.get("segment_ids")
        if input_mask is None:
            input_mask = ops.ones_like(input_ids)
        if segment_ids is None:
            segment_ids = ops.zeros_like(input_ids)
        embedding_output = self.embeddings(input_ids, segment_ids, training=training)
        encoder_outputs = self.encoder(embedding_output, padding_mask=ops.cast(input_mask, "bool"),
                                       training=training)
        sequence_output = encoder_outputs[-1]
        pooled_output = self.pooler(sequence_output[:, 0, :])
        return {"sequence_output": sequence_output, "pooled_output": pooled_output,
                "embedding_output": embedding_output, "encoder_outputs": encoder_outputs}

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict()}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        return cls(AlbertConfig.from_dict(config.pop("config")), **config)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertForPretraining(keras.Model):
    """ALBERT with the masked-LM head (tied to the word embeddings) and the sentence-order head.

    Call args:
      inputs: the `AlbertModel` inputs plus `masked_lm_positions` int [B, P].
    Returns:
      the `AlbertModel` outputs plus float32 `mlm_logits` [B, P, V] and `sop_logits` [B, 2]
      (label 1 = the two segments were swapped).
    """

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = _as_config(config)
        c = self.config
        self.albert = AlbertModel(c, dtype=self.dtype_policy, name="albert")
        self.masked_lm = MaskedLMHead(c.vocab_size, c.embedding_size, hidden_act=c.hidden_act,
                                      initializer_range=c.initializer_range, dtype=self.dtype_policy,
                                      name="predictions")
        self.seq_relationship = keras.layers.Dense(
            2, kernel_initializer=truncated_normal(c.initializer_range), dtype=self.dtype_policy,
            name="seq_relationship")

    def build(self, inputs_shape):
        ids_shape = tuple(inputs_shape["input_ids"])
        self.albert.build(inputs_shape)
        self.masked_lm.build(ids_shape + (self.config.hidden_size,))
        self.seq_relationship.build((ids_shape[0], self.config.hidden_size))
        self.built = True

    def call(self, inputs, training=None):
        outputs = dict(self.albert(inputs, training=training))
        table = self.albert.embeddings.word_embeddings.embeddings
        outputs["mlm_logits"] = self.masked_lm(outputs["sequence_output"], inputs["masked_lm_positions"], table)
        outputs["sop_logits"] = ops.cast(self.seq_relationship(outputs["pooled_output"]), "float32")
        return outputs

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict()}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        return cls(AlbertConfig.from_dict(config.pop("config")), **config)


class _TaskModel(ClippedTrainStep, keras.Model):
    """Base of the fine-tuning models: an `AlbertModel` under `albert`, a head, the original's clipping in
    `train_step`, and serialisation through the config plus the head's arguments."""

    def __init__(self, config, dropout_prob=0.1, **kwargs):
        super().__init__(**kwargs)
        self.config = _as_config(config)
        self.dropout_prob = dropout_prob
        self.albert = AlbertModel(self.config, dtype=self.dtype_policy, name="albert")
        self.dropout = keras.layers.Dropout(dropout_prob, dtype=self.dtype_policy)

    def _head_args(self):
        return {}

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict(), "dropout_prob": self.dropout_prob,
                **self._head_args()}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        return cls(AlbertConfig.from_dict(config.pop("config")), **config)

    def _output_entries(self, num_outputs):
        from albert_tf.checkpoints.original import Entry  # pylint: disable=import-outside-toplevel

        dense = self.output_layer
        return [Entry("output_weights", dense.kernel, (num_outputs, self.config.hidden_size), transpose=True,
                      required=False),
                Entry("output_bias", dense.bias, (num_outputs,), required=False)]


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertClassifier(_TaskModel):
    """Sentence (pair) classification or regression: dropout + dense on the pooled output.

    As the original's `run_classifier` head (`output_weights` [num_labels, H], `output_bias`), with the
    dropout rate configurable (the original hard-codes 0.1). `num_labels=1` is regression (STS-B).

    Call args:
      inputs: dict with int `input_ids`, `input_mask`, `segment_ids` [B, T].
    Returns:
      float32 logits [B, num_labels] (the score [B, 1] for regression).
    """

    def __init__(self, config, num_labels, dropout_prob=0.1, **kwargs):
        super().__init__(config, dropout_prob=dropout_prob, **kwargs)
        self.num_labels = num_labels
        self.output_layer = keras.layers.Dense(
            num_labels, kernel_initializer=truncated_normal(self.config.initializer_range),
            dtype=self.dtype_policy, name="output")

    def _head_args(self):
        return {"num_labels": self.num_labels}

    def build(self, inputs_shape):
        self.albert.build(inputs_shape)
        self.output_layer.build((inputs_shape["input_ids"][0], self.config.hidden_size))
        self.built = True

    def call(self, inputs, training=None):
        pooled = self.albert(inputs, training=training)["pooled_output"]
        return ops.cast(self.output_layer(self.dropout(pooled, training=training)), "float32")

    def head_entries(self):
        return self._output_entries(self.num_labels)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertForMultipleChoice(_TaskModel):
    """Multiple choice (RACE): each (context, question + option) sequence is scored from its pooled output.

    As the original's RACE head (`output_weights` [1, H], `output_bias` [1]).

    Call args:
      inputs: dict with int `input_ids`, `input_mask`, `segment_ids` [B, num_choices, T].
    Returns:
      float32 logits [B, num_choices].
    """

    def __init__(self, config, num_choices=4, dropout_prob=0.1, **kwargs):
        super().__init__(config, dropout_prob=dropout_prob, **kwargs)
        self.num_choices = num_choices
        self.output_layer = keras.layers.Dense(
            1, kernel_initializer=truncated_normal(self.config.initializer_range), dtype=self.dtype_policy,
            name="output")

    def _head_args(self):
        return {"num_choices": self.num_choices}

    def build(self, inputs_shape):
        seq_length = tuple(inputs_shape["input_ids"])[-1]
        self.albert.build({k: (None, seq_length) for k in inputs_shape})
        self.output_layer.build((None, self.config.hidden_size))
        self.built = True

    def call(self, inputs, training=None):
        seq_length = ops.shape(inputs["input_ids"])[-1]
        flat = {k: ops.reshape(inputs[k], (-1, seq_length)) for k in ("input_ids", "input_mask", "segment_ids")}
        pooled = self.albert(flat, training=training)["pooled_output"]
        logits = self.output_layer(self.dropout(pooled, training=training))
        return ops.cast(ops.reshape(logits, (-1, self.num_choices)), "float32")

    def head_entries(self):
        return self._output_entries(1)
