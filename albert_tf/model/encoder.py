"""The ALBERT encoder (`AlbertModel`): factorized embedding, grouped shared blocks, pooler.

Inputs use the original release's names: `input_ids`, `input_mask`, `segment_ids` (int [B, T]). Outputs are
dicts. Dropout is active only with `training=True`. Every model here is a Keras 3 model that serialises through
`get_config()` (the config dict).
"""

import keras
from keras import ops

from albert_tf.config import AlbertConfig
from albert_tf.model.layers import FactorizedEmbedding, SharedTransformerStack, truncated_normal


def as_config(config):
    if isinstance(config, AlbertConfig):
        return config
    if isinstance(config, dict):
        return AlbertConfig.from_dict(config)
    raise TypeError(f"expected an AlbertConfig or a dict, got {type(config).__name__}")


def set_remat(model, enabled=True):
    """Makes the encoder of `model` (an `AlbertModel` or any model holding one under `albert`) recompute each
    Transformer block's activations in the backward pass (`SharedTransformerStack.remat`; the scripts' `--remat`).

    A run-time choice, not part of the model: it changes memory and time, never a value, so it is set on a
    built model (before its train step is traced) rather than stored in the config.
    """
    getattr(model, "albert", model).encoder.remat = bool(enabled)
    return model


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
      output_positions: None, or int [B, P]: compute the last layer only at these positions (and position 0,
        for the pooler), as a pretraining or classification head needs; every position still attends and is
        attended to in every layer, so the values there are the full model's.
    Returns:
      dict with `sequence_output` [B, T, H], `pooled_output` [B, H] (dense + tanh on position 0),
      `embedding_output` [B, T, H] and `encoder_outputs` (a list of num_hidden_layers [B, T, H] tensors).
      With `output_positions`, `sequence_output` is [B, P, H] (row p at `output_positions[:, p]`) and the
      last of `encoder_outputs` is [B, 1 + P, H] (position 0, then those).
    """

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = as_config(config)
        c = self.config
        self.embeddings = FactorizedEmbedding(
            c.vocab_size, c.embedding_size, c.hidden_size, c.max_position_embeddings, c.type_vocab_size,
            dropout=c.hidden_dropout_prob, initializer_range=c.initializer_range, dtype=self.dtype_policy,
            name="embeddings")
        self.encoder = SharedTransformerStack(
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

    def call(self, inputs, training=None, output_positions=None):
        input_ids = inputs["input_ids"]
        input_mask = inputs.get("input_mask")
        segment_ids = inputs.get("segment_ids")
        if input_mask is None:
            input_mask = ops.ones_like(input_ids)
        if segment_ids is None:
            segment_ids = ops.zeros_like(input_ids)
        embedding_output = self.embeddings(input_ids, segment_ids, training=training)
        if output_positions is not None:
            output_positions = ops.cast(output_positions, "int32")
            first = ops.zeros((ops.shape(output_positions)[0], 1), "int32")
            output_positions = ops.concatenate([first, output_positions], axis=1)
        encoder_outputs = self.encoder(embedding_output, padding_mask=ops.cast(input_mask, "bool"),
                                       training=training, output_positions=output_positions)
        sequence_output = encoder_outputs[-1]
        pooled_output = self.pooler(sequence_output[:, 0, :])
        if output_positions is not None:
            sequence_output = sequence_output[:, 1:]
        return {"sequence_output": sequence_output, "pooled_output": pooled_output,
                "embedding_output": embedding_output, "encoder_outputs": encoder_outputs}

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict()}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        return cls(AlbertConfig.from_dict(config.pop("config")), **config)
