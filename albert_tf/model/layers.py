"""ALBERT's Keras layers: factorized embedding, the shared Transformer block, the grouped encoder, heads.

Layer and attribute names mirror the original checkpoint's scopes (`word_embeddings`,
`embedding_hidden_mapping_in`, `pooler`, `transform`, `output_bias`, ...) so that the converters in
`albert_tf.checkpoints` read as a name-to-name table. Every layer takes plain constructor arguments, returns
them from `get_config()`, and creates its weights lazily on first call.
"""

import math

import keras
import keras_hub
import tensorflow as tf
from keras import ops

from albert_tf import keras_internals
from albert_tf.config import layer_group
from albert_tf.model.normalization import LayerNorm, normalize

LAYER_NORM_EPSILON = 1e-12


@keras.saving.register_keras_serializable(package="albert_tf")
def gelu_tanh(x):
    """GELU, tanh approximation: what the original release (and its `"gelu"`) computes,
    0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). Computed by `tf.nn.gelu(approximate=True)`, the same
    formula, whose graph TF's optimiser fuses into the preceding matmul + bias at inference (oneDNN)."""
    return keras.activations.gelu(x, approximate=True)


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
        self.layer_norm = LayerNorm(
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


def mask_bias(padding_mask):
    """Additive float32 attention bias [B, 1, 1, T] from a [B, T] mask (1 = real key): 0 for real keys and
    -10000 for padding, as the original's `attention_layer` adds. Computed once per forward pass and shared
    by every layer."""
    mask = ops.cast(padding_mask, "float32")
    return (1.0 - mask[:, None, None, :]) * -10000.0


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTransformerBlock(keras_hub.layers.TransformerEncoder):
    """One post-LayerNorm Transformer block: keras-hub's `TransformerEncoder` weights, ALBERT's computation.

    The sublayers (and so every weight, its name and its checkpoint key) are keras-hub's; `call` computes the
    block itself, as the original's `attention_ffn_block` does, in fewer and larger ops than keras-hub's
    generic path: each projection is one [B*T, H] x [H, H] matmul with a fusable bias add (keras-hub's 3-D
    einsums run as batched matmuls), the padding mask arrives as an additive bias computed once for all layers
    (`mask_bias`), not rebuilt as a [B, T, T] mask in every layer, and 1/sqrt(head_size) is folded into the
    query kernel in training; at inference the scores are scaled and masked as the original computes them,
    `scores * scale + bias`, which TensorFlow fuses (float32, oneDNN) into the batched matmul that computes
    them. LayerNorm is one op (`normalization.layer_norm`). The attention softmax runs in float32 under mixed
    precision.
    The matmuls read their operands from `matmul_weights()`, which an encoder at inference computes once for
    every layer the block runs (`SharedTransformerStack`).

    ALBERT has separate `attention_probs_dropout_prob` and `hidden_dropout_prob` where keras-hub has one rate,
    so the attention-probability rate is set on the attention layer after the parent builds it. Dropout
    masks come from explicit seeds drawn from the three Dropout layers' seed generators
    (`draw_dropout_seeds`), so a recomputation of the block in the backward pass (`SharedTransformerStack(remat=True)`)
    draws exactly the masks of the forward pass.

    Weight layout (kernels of the attention projections are [H, heads, head_size], the output one
    [heads, head_size, H]); `albert_tf.checkpoints` reshapes to and from the original's [H, H].

    Call args:
      inputs: float [B, T, H].
      padding_mask: bool or int [B, T], 1 for keys to attend to (or pass `attention_bias`).
      attention_bias: float32 [B, 1, 1, T], as `mask_bias(padding_mask)` returns.
      dropout_seeds: None or the three int seeds of `draw_dropout_seeds` (drawn here when None).
      matmul_weights: None, or what `matmul_weights()` returned (computed here when None).
    Returns:
      float [B, T, H].
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

    def draw_dropout_seeds(self, training):
        """Seeds for the three dropouts of one call (advancing their generators), or None when no dropout
        applies (inference, or both rates 0)."""
        if not training or (self.dropout == 0 and self.attention_dropout == 0):
            return None
        layers = keras_internals.block_dropout_layers(self)
        return tuple(layers[k].seed_generator.next() for k in ("attention_probs", "attention_output", "output"))

    def matmul_weights(self, fold_scale=True):
        """The kernels and biases the block's matmuls use, by sublayer name: `(kernel, bias)` pairs in the
        compute dtype, the attention kernels as [H, H], the query's pair scaled by 1/sqrt(head_size) when
        `fold_scale`.

        They are the same for every layer that shares the block, so at inference `SharedTransformerStack` computes them
        once per forward pass instead of once per layer (under mixed precision a cast of every kernel per
        layer). In training each layer computes its own, so that each layer's weight gradient passes through its
        own cast and is summed over the layers in float32.

        Where the scale goes is a matter of cost: in training the query's [H, H] pair (scaling the [B, N, T, T]
        scores instead adds an op of that size to the forward and the backward pass); at inference the scores
        (`scale_scores`), since TensorFlow then fuses the scale and the mask into the product that computes
        them.
        """
        parts = keras_internals.transformer_block_parts(self)
        dtype = self.compute_dtype
        hidden = int(parts["query"].kernel.shape[0])
        scale = 1.0 / math.sqrt(hidden // self.num_heads)

        def pair(name):
            dense = parts[name]
            kernel, bias = ops.cast(dense.kernel, dtype), ops.cast(dense.bias, dtype)
            if name in ("intermediate", "output"):
                return kernel, bias
            kernel, bias = ops.reshape(kernel, (hidden, hidden)), ops.reshape(bias, (hidden,))
            return (kernel * scale, bias * scale) if name == "query" and fold_scale else (kernel, bias)

        return {name: pair(name) for name in ("query", "key", "value", "attention_output", "intermediate", "output")}

    def call(self, inputs, padding_mask=None, attention_mask=None, training=None, return_attention_scores=False,
             attention_bias=None, dropout_seeds=None, output_positions=None, matmul_weights=None,
             scale_scores=False):
        if self.normalize_first or attention_mask is not None or return_attention_scores:
            if output_positions is not None:
                raise ValueError("output_positions needs the block's own (post-LayerNorm, attention_bias) path")
            return super().call(inputs, padding_mask=padding_mask, attention_mask=attention_mask,
                                training=training, return_attention_scores=return_attention_scores)
        if attention_bias is None and padding_mask is not None:
            attention_bias = mask_bias(padding_mask)
        if dropout_seeds is None:
            dropout_seeds = self.draw_dropout_seeds(training)
        return self.forward(inputs, attention_bias, dropout_seeds, output_positions, matmul_weights, scale_scores)

    def forward(self, inputs, bias, seeds=None, positions=None, weights=None, scale_scores=False):
        """The block as a function of tensors only (`seeds`: None, or the three dropout seeds; `weights`: None,
        or `matmul_weights(fold_scale=not scale_scores)`), so that `tf.recompute_grad` can run it again in the
        backward pass. `scale_scores` scales the query-key products by 1/sqrt(head_size) rather than the query.

        With `positions` (int [B, P]) only those rows are computed: every position still serves as a key and
        value, but the queries, the attention output, both LayerNorms and the feed-forward network run on
        P rows instead of T, and the result is [B, P, H], row p being what the full block gives at
        `positions[:, p]`. Dropout masks are drawn at the full block's shapes and then gathered, so the rows
        equal the full block's rows under the same seeds too.
        """
        parts = keras_internals.transformer_block_parts(self)
        if weights is None:
            weights = self.matmul_weights(fold_scale=not scale_scores)
        dtype = self.compute_dtype
        hidden = int(inputs.shape[-1])
        heads = self.num_heads
        head_size = hidden // heads
        shape = ops.shape(inputs)
        batch, length = shape[0], shape[1]
        x = ops.reshape(inputs, (-1, hidden))
        rows = None
        if positions is not None:
            positions = ops.cast(positions, "int32")
            rows = ops.reshape(positions + ops.arange(batch, dtype="int32")[:, None] * length, (-1,))
            queries = ops.take(x, rows, axis=0)  # [B*P, H]
            out_length = ops.shape(positions)[1]
        else:
            queries, out_length = x, length

        def dense(name, inputs_):
            kernel, bias_ = weights[name]
            return tf.nn.bias_add(ops.matmul(inputs_, kernel), bias_)

        def project(name, inputs_, length_):
            y = ops.reshape(dense(name, inputs_), (batch, length_, heads, head_size))
            return ops.transpose(y, (0, 2, 1, 3))

        q = project("query", queries, out_length)  # [B, N, P or T, D]
        k = project("key", x, length)  # [B, N, T, D]
        v = project("value", x, length)
        scores = tf.matmul(q, k, transpose_b=True)  # [B, N, P or T, T]
        if scale_scores:
            scores = scores * (1.0 / math.sqrt(head_size))
        scores = ops.cast(scores, "float32")
        if bias is not None:  # (Keras casts float call arguments to the compute dtype)
            scores = scores + ops.cast(bias, "float32")
        probs = ops.cast(ops.softmax(scores, axis=-1), dtype)
        probs = _dropout(probs, self.attention_dropout, seeds, 0, positions=positions, full_rows=length)
        context = ops.reshape(ops.transpose(ops.matmul(probs, v), (0, 2, 1, 3)), (-1, hidden))
        attention = dense("attention_output", context)
        attention = _dropout(attention, self.dropout, seeds, 1, rows=rows, full_rows=batch * length)
        x = normalize(parts["attention_layer_norm"], queries + attention)
        intermediate = parts["intermediate"].activation(dense("intermediate", x))
        output = dense("output", intermediate)
        output = _dropout(output, self.dropout, seeds, 2, rows=rows, full_rows=batch * length)
        x = normalize(parts["output_layer_norm"], x + output)
        if positions is None:
            return ops.reshape(x, shape)
        return ops.reshape(x, (batch, out_length, hidden))

    def get_config(self):
        config = super().get_config()
        config["attention_dropout"] = self.attention_dropout
        return config


def _dropout(x, rate, seeds, index, rows=None, positions=None, full_rows=None):
    """Inverted dropout with an explicit seed (what Keras' Dropout computes with that seed).

    For a block computed at some positions only, `x` holds some rows of the full block's tensor: `rows`
    (int [R]) of a [full_rows, H] one, or `positions` (int [B, P]) along axis 2 of a [B, N, full_rows, T] one.
    The mask is then drawn at the full shape and those rows of it are applied.
    """
    if seeds is None or rate == 0:
        return x
    if rows is None and positions is None:
        return keras_internals.stateless_dropout(x, rate, seeds[index])
    shape = ops.shape(x)
    if rows is not None:
        full = (full_rows, shape[1])
        mask = ops.take(keras_internals.stateless_dropout(ops.ones(full, x.dtype), rate, seeds[index]), rows, axis=0)
    else:
        full = (shape[0], shape[1], full_rows, shape[3])
        mask = keras_internals.stateless_dropout(ops.ones(full, x.dtype), rate, seeds[index])
        mask = tf.gather(mask, positions, axis=2, batch_dims=1)
    return x * mask


@keras.saving.register_keras_serializable(package="albert_tf", name="AlbertEncoder")
class SharedTransformerStack(keras.layers.Layer):
    """`num_hidden_layers` layers computed by `num_hidden_groups` groups of `inner_group_num` shared blocks.

    Layer l (0-based) runs every block of group `config.layer_group(l, ...)`, in order, as the original does
    (any layer and group counts; `groups[g]` is empty for a group no layer runs, which has no weights, as in
    the original). With the released configs (one group of one block) a single block is reused for every
    layer, so the parameter count does not grow with depth while the compute does.

    With `remat=True` (the scripts' `--remat`) each block call but the last layer's is recomputed in the
    backward pass (`tf.recompute_grad`): only the block inputs stay in memory between the forward and the
    backward pass, at the cost of about one more forward pass. The last layer is not recomputed because the
    backward pass starts with it, so its activations would be rebuilt at once. Gradients are the same (the
    dropout seeds are drawn once, outside the recomputed function).

    At inference each block's `matmul_weights(fold_scale=False)` (its kernels in the compute dtype, as [H, H])
    are computed once per forward pass and passed to every layer that runs the block, which scales the
    scores.

    With `output_positions` the final block computes only those positions (`AlbertTransformerBlock.forward`),
    for heads that read a few positions (masked LM, the pooler): same values there, less work.

    Call args:
      hidden_states: float [B, T, H].
      padding_mask: bool or int [B, T], 1 for real tokens (keys at 0 are not attended to).
      output_positions: None, or int [B, P]: the positions the last layer's output is wanted at.
    Returns:
      a list of num_hidden_layers tensors [B, T, H], the output of each layer; with `output_positions` the
      last one is [B, P, H], the last layer's output at those positions.
    """

    def __init__(self, num_hidden_layers, num_hidden_groups, inner_group_num, num_attention_heads,
                 intermediate_size, hidden_act="gelu", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                 initializer_range=0.02, remat=False, **kwargs):
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
        self.remat = remat
        self.groups = []
        used = {self.group_of_layer(l) for l in range(num_hidden_layers)}
        for g in range(num_hidden_groups):
            group = []
            for i in range(inner_group_num if g in used else 0):
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
        """The group whose blocks compute layer `layer_index` (the original's formula, `config.layer_group`)."""
        return layer_group(layer_index, self.num_hidden_layers, self.num_hidden_groups)

    def build(self, hidden_states_shape, padding_mask_shape=None):
        for group in self.groups:
            for block in group:
                block.build(hidden_states_shape)
        self.built = True

    def call(self, hidden_states, padding_mask=None, training=None, output_positions=None):
        bias = None if padding_mask is None else mask_bias(padding_mask)
        shared = {}
        if not training:  # each block's weights cast and reshaped once, not once per layer it computes
            shared = {block.name: block.matmul_weights(fold_scale=False) for group in self.groups for block in group}
        outputs = []
        for layer_index in range(self.num_hidden_layers):
            last_layer = layer_index == self.num_hidden_layers - 1
            group = self.groups[self.group_of_layer(layer_index)]
            for i, block in enumerate(group):
                seeds = block.draw_dropout_seeds(training)
                if self.remat and training and not last_layer:
                    hidden_states = _recomputed(block, hidden_states, bias, seeds)
                else:
                    positions = output_positions if last_layer and i == len(group) - 1 else None
                    hidden_states = block(hidden_states, attention_bias=bias, dropout_seeds=seeds,
                                          training=training, output_positions=positions,
                                          matmul_weights=shared.get(block.name), scale_scores=not training)
            outputs.append(hidden_states)
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update(num_hidden_layers=self.num_hidden_layers, num_hidden_groups=self.num_hidden_groups,
                      inner_group_num=self.inner_group_num, num_attention_heads=self.num_attention_heads,
                      intermediate_size=self.intermediate_size, hidden_act=self.hidden_act,
                      hidden_dropout_prob=self.hidden_dropout_prob,
                      attention_probs_dropout_prob=self.attention_probs_dropout_prob,
                      initializer_range=self.initializer_range, remat=self.remat)
        return config


def _recomputed(block, hidden_states, bias, seeds):
    """`block.forward` under `tf.recompute_grad`: its activations are recomputed in the backward pass. The
    wrapped function takes tensors only (positional), as `tf.recompute_grad` requires in a graph."""
    tensors = [hidden_states] + ([] if bias is None else [bias]) + list(seeds or ())

    def run(x, *rest):
        b = rest[0] if bias is not None else None
        s = rest[1:] if bias is not None else rest
        return block.forward(x, b, tuple(s) or None)

    return tf.recompute_grad(run)(*tensors)


# The stack's earlier name (and still its registered Keras name, so saved `.keras` files load). Model Garden's
# `AlbertEncoder` is the whole network, which is `albert_tf.model.AlbertModel` here.
AlbertEncoder = SharedTransformerStack


@keras.saving.register_keras_serializable(package="albert_tf")
class MaskedLMHead(keras.layers.Layer):
    """Masked-LM head: gather positions, dense H→E with hidden_act, LayerNorm, logits tied to the word table.

    Call args:
      sequence_output: float [B, T, H].
      masked_lm_positions: int [B, P], positions to predict; None when `sequence_output` already holds just
        those, [B, P, H] (`AlbertModel(..., output_positions=...)`).
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
        self.layer_norm = LayerNorm(
            epsilon=LAYER_NORM_EPSILON, dtype=self.dtype_policy, name="LayerNorm")

    def build(self, sequence_output_shape, masked_lm_positions_shape=None, embedding_table_shape=None):
        self.transform.build(sequence_output_shape)
        self.layer_norm.build(tuple(sequence_output_shape[:-1]) + (self.embedding_size,))
        self.output_bias = self.add_weight(shape=(self.vocab_size,), initializer="zeros", name="output_bias")
        self.built = True

    def call(self, sequence_output, masked_lm_positions, embedding_table):
        gathered = sequence_output
        if masked_lm_positions is not None:
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
