"""ALBERT's Keras layers: factorized embedding, the shared Transformer block, the grouped encoder, heads.

Layer and attribute names mirror the original checkpoint's scopes (`word_embeddings`,
`embedding_hidden_mapping_in`, `pooler`, `transform`, `output_bias`, ...) so that the converters in
`albert_tf.checkpoints` read as a name-to-name table. Every layer takes plain constructor arguments, returns
them from `get_config()`, and creates its weights lazily on first call.
"""

import math

import keras
import keras_hub
from keras import ops

from albert_tf import keras_internals

LAYER_NORM_EPSILON = 1e-12


@keras.saving.register_keras_serializable(package="albert_tf")
def gelu_tanh(x):
    """GELU, tanh approximation: what the original release (and its `"gelu"`) computes."""
    x = ops.convert_to_tensor(x)
    cdf = 0.5 * (1.0 + ops.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * ops.power(x, 3))))
    return x * ops.cast(cdf, x.dtype)


@keras.saving.register_keras_serializable(package="albert_tf")
def gelu_erf(x):
    """GELU, exact erf form (Hugging Face's `"gelu"`; `"gelu_exact"` in our configs)."""
    return keras.activations.gelu(x, approximate=False)


def get_activation(name):
    """Maps an `AlbertConfig.hidden_act` name to a Keras-serialisable callable."""
    table = {"gelu": gelu_tanh, "gelu_exact": gelu_erf, "relu": keras.activations.relu,
             "tanh": keras.activations.tanh, "linear": keras.activations.linear}
    if name not in table:
        raise ValueError(f"unknown hidden_act {name!r}; known: {', '.join(table)}")
    return table[name]


def truncated_normal(stddev):
    """The original's initializer for every kernel and embedding table."""
    return keras.initializers.TruncatedNormal(stddev=stddev)


@keras.saving.register_keras_serializable(package="albert_tf")
class FactorizedEmbedding(keras.layers.Layer):
    """Word + position + token-type embeddings in a small space E, then a projection E→H.

    ALBERT's first parameter saving: the vocabulary table is [V, E] with E (128) much smaller than H, and a
    single dense layer (`embedding_hidden_mapping_in`) lifts the normalised embedding to the hidden size.

    Call args:
      input_ids: int [B, T].
      segment_ids: int [B, T] token-type ids (0 for segment A, 1 for B).
    Returns:
      float [B, T, H].
    """

    def __init__(self, vocab_size, embedding_size, hidden_size, max_position_embeddings, type_vocab_size,
                 dropout=0.0, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.dropout = dropout
        self.initializer_range = initializer_range
        init = truncated_normal(initializer_range)
        self.word_embeddings = keras.layers.ReversibleEmbedding(
            vocab_size, embedding_size, embeddings_initializer=init, dtype=self.dtype_policy,
            name="word_embeddings")
        self.position_embeddings = keras_hub.layers.PositionEmbedding(
            max_position_embeddings, initializer=init, dtype=self.dtype_policy, name="position_embeddings")
        self.token_type_embeddings = keras.layers.Embedding(
            type_vocab_size, embedding_size, embeddings_initializer=init, dtype=self.dtype_policy,
            name="token_type_embeddings")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, dtype=self.dtype_policy, name="LayerNorm")
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.embedding_hidden_mapping_in = keras.layers.Dense(
            hidden_size, kernel_initializer=init, dtype=self.dtype_policy, name="embedding_hidden_mapping_in")

    def build(self, input_ids_shape, segment_ids_shape=None):
        e_shape = tuple(input_ids_shape) + (self.embedding_size,)
        self.word_embeddings.build(input_ids_shape)
        self.position_embeddings.build(e_shape)
        self.token_type_embeddings.build(input_ids_shape)
        self.layer_norm.build(e_shape)
        self.embedding_hidden_mapping_in.build(e_shape)
        self.built = True

    def call(self, input_ids, segment_ids, training=None):
        x = self.word_embeddings(input_ids)
        x = x + self.token_type_embeddings(segment_ids)
        x = x + self.position_embeddings(x)
        x = self.layer_norm(x)
        x = self.dropout_layer(x, training=training)
        return self.embedding_hidden_mapping_in(x)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, embedding_size=self.embedding_size,
                      hidden_size=self.hidden_size, max_position_embeddings=self.max_position_embeddings,
                      type_vocab_size=self.type_vocab_size, dropout=self.dropout,
                      initializer_range=self.initializer_range)
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTransformerBlock(keras_hub.layers.TransformerEncoder):
    """One post-LayerNorm Transformer block: keras-hub's `TransformerEncoder` with ALBERT's two dropouts.

    keras-hub applies a single dropout rate to both the attention probabilities and the hidden outputs; the
    original config has separate `attention_probs_dropout_prob` and `hidden_dropout_prob`, so this subclass
    sets the attention-probability rate on the attention layer after the parent builds it. It also computes
    the attention softmax in float32 under mixed precision (the parent's default path already does so when
    the attention dropout is zero).

    Weight layout (kernels of the attention projections are [H, heads, head_size], the output one
    [heads, head_size, H]); `albert_tf.checkpoints` reshapes to and from the original's [H, H].
    """

    def __init__(self, intermediate_dim, num_heads, dropout=0.0, attention_dropout=0.0, **kwargs):
        super().__init__(intermediate_dim, num_heads, dropout=dropout, **kwargs)
        self.attention_dropout = attention_dropout

    def build(self, inputs_shape):
        # The parent gives all three Dropout layers the rate `self.dropout`, and a Keras Dropout only gets its
        # seed generator when built with a positive rate; so build them all with the larger rate, then set
        # each to its own (a rate raised from 0 afterwards would fail in training).
        hidden_dropout = self.dropout
        self.dropout = max(hidden_dropout, self.attention_dropout)
        try:
            super().build(inputs_shape)
        finally:
            self.dropout = hidden_dropout
        keras_internals.set_block_dropouts(self, hidden_dropout, self.attention_dropout)

    def get_config(self):
        config = super().get_config()
        config["attention_dropout"] = self.attention_dropout
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertEncoder(keras.layers.Layer):
    """`num_hidden_layers` layers computed by `num_hidden_groups` groups of `inner_group_num` shared blocks.

    Layer l (0-based) runs every block of group int(l * num_hidden_groups / num_hidden_layers), in order, as
    the original does; with the released configs (one group of one block) a single block is reused for every
    layer, so the parameter count does not grow with depth while the compute does.

    Call args:
      hidden_states: float [B, T, H].
      padding_mask: bool or int [B, T], 1 for real tokens (keys at 0 are not attended to).
    Returns:
      a list of num_hidden_layers tensors [B, T, H], the output of each layer.
    """

    def __init__(self, num_hidden_layers, num_hidden_groups, inner_group_num, num_attention_heads,
                 intermediate_size, hidden_act="gelu", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_hidden_layers = num_hidden_layers
        self.num_hidden_groups = num_hidden_groups
        self.inner_group_num = inner_group_num
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.initializer_range = initializer_range
        self.groups = []
        for g in range(num_hidden_groups):
            group = []
            for i in range(inner_group_num):
                block = AlbertTransformerBlock(
                    intermediate_size, num_attention_heads, dropout=hidden_dropout_prob,
                    attention_dropout=attention_probs_dropout_prob, activation=get_activation(hidden_act),
                    layer_norm_epsilon=LAYER_NORM_EPSILON, kernel_initializer=truncated_normal(initializer_range),
                    dtype=self.dtype_policy, name=f"group_{g}_inner_group_{i}")
                # An attribute per block, so TF checkpoints track each one under a stable name.
                setattr(self, f"group_{g}_inner_group_{i}", block)
                group.append(block)
            self.groups.append(tuple(group))

    def group_of_layer(self, layer_index):
        """The group whose blocks compute layer `layer_index` (the original's formula)."""
        return int(layer_index * self.num_hidden_groups / self.num_hidden_layers)

    def build(self, hidden_states_shape, padding_mask_shape=None):
        for group in self.groups:
            for block in group:
                block.build(hidden_states_shape)
        self.built = True

    def call(self, hidden_states, padding_mask=None, training=None):
        outputs = []
        for layer_index in range(self.num_hidden_layers):
            for block in self.groups[self.group_of_layer(layer_index)]:
                hidden_states = block(hidden_states, padding_mask=padding_mask, training=training)
            outputs.append(hidden_states)
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update(num_hidden_layers=self.num_hidden_layers, num_hidden_groups=self.num_hidden_groups,
                      inner_group_num=self.inner_group_num, num_attention_heads=self.num_attention_heads,
                      intermediate_size=self.intermediate_size, hidden_act=self.hidden_act,
                      hidden_dropout_prob=self.hidden_dropout_prob,
                      attention_probs_dropout_prob=self.attention_probs_dropout_prob,
                      initializer_range=self.initializer_range)
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class MaskedLMHead(keras.layers.Layer):
    """Masked-LM head: gather positions, dense H→E with hidden_act, LayerNorm, logits tied to the word table.

    Call args:
      sequence_output: float [B, T, H].
      masked_lm_positions: int [B, P], positions to predict.
      embedding_table: float [V, E], the word embedding table (weights are tied, as in the original).
    Returns:
      float32 logits [B, P, V].
    """

    def __init__(self, vocab_size, embedding_size, hidden_act="gelu", initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.transform = keras.layers.Dense(
            embedding_size, activation=get_activation(hidden_act),
            kernel_initializer=truncated_normal(initializer_range), dtype=self.dtype_policy, name="transform")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, dtype=self.dtype_policy, name="LayerNorm")

    def build(self, sequence_output_shape, masked_lm_positions_shape=None, embedding_table_shape=None):
        self.transform.build(sequence_output_shape)
        self.layer_norm.build(tuple(sequence_output_shape[:-1]) + (self.embedding_size,))
        self.output_bias = self.add_weight(shape=(self.vocab_size,), initializer="zeros", name="output_bias")
        self.built = True

    def call(self, sequence_output, masked_lm_positions, embedding_table):
        positions = ops.cast(masked_lm_positions, "int32")
        gathered = ops.take_along_axis(sequence_output, positions[:, :, None], axis=1)
        x = self.layer_norm(self.transform(gathered))
        table = ops.cast(embedding_table, x.dtype)
        logits = ops.einsum("bpe,ve->bpv", x, table)
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, embedding_size=self.embedding_size,
                      hidden_act=self.hidden_act, initializer_range=self.initializer_range)
        return config
