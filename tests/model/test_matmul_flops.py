"""The matmuls the models' traced graphs compute are the ones the architecture calls for, no more: the encoder's
are `AlbertConfig.flops_per_token` per token plus the pooler, and `set_heads_only` takes off exactly the last
layer's work on the rows no head reads. Counted op by op from the graph (MatMul, BatchMatMul, Einsum), so an
extra or a larger product (a projection computed twice, attention over padded heads) fails here."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.model import AlbertForPretraining, AlbertModel, set_heads_only

CONFIG = AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                      intermediate_size=64, max_position_embeddings=32)
BATCH, SEQ, PREDS = 2, 16, 3


def graph_matmul_flops(fn):
    """2 m k n summed over the MatMul, BatchMatMul and Einsum ops of `fn`'s traced graph (static shapes)."""
    total = 0
    for op in fn.get_concrete_function().graph.get_operations():
        if op.type == "MatMul":
            a = op.inputs[0].shape
            k = a[0] if op.get_attr("transpose_a") else a[1]
            total += 2 * int(np.prod(op.outputs[0].shape)) * k
        elif op.type.startswith("BatchMatMul"):
            a = op.inputs[0].shape
            k = a[-2] if op.get_attr("adj_x") else a[-1]
            total += 2 * int(np.prod(op.outputs[0].shape)) * k
        elif op.type == "Einsum":
            sizes = {}
            for spec, tensor in zip(op.get_attr("equation").decode().split("->")[0].split(","), op.inputs):
                sizes.update(zip(spec, tensor.shape))
            total += 2 * int(np.prod(list(sizes.values())))
    return total


def inputs(batch, seq, preds=None):
    rng = np.random.RandomState(0)
    features = {"input_ids": tf.constant(rng.randint(5, CONFIG.vocab_size, (batch, seq)), tf.int32),
                "input_mask": tf.ones((batch, seq), tf.int32), "segment_ids": tf.zeros((batch, seq), tf.int32)}
    if preds:
        positions = np.stack([np.sort(rng.choice(np.arange(1, seq), preds, replace=False)) for _ in range(batch)])
        features["masked_lm_positions"] = tf.constant(positions, tf.int32)
    return features


def encoder_flops(batch, seq):
    """Every position of every layer (`flops_per_token`), and the pooler's [B, H] x [H, H]."""
    return batch * seq * CONFIG.flops_per_token(seq) + 2 * batch * CONFIG.hidden_size ** 2


def test_encoder_computes_flops_per_token():
    encoder = AlbertModel(CONFIG)
    features = inputs(1, SEQ)
    assert graph_matmul_flops(tf.function(lambda: encoder(features, training=False))) == encoder_flops(1, SEQ)


@pytest.mark.slow
@pytest.mark.parametrize("heads_only", [False, True])
def test_pretraining_model_computes_the_encoder_and_heads_only(heads_only):
    h, e, i = CONFIG.hidden_size, CONFIG.embedding_size, CONFIG.intermediate_size
    model = set_heads_only(AlbertForPretraining(CONFIG), heads_only)
    features = inputs(BATCH, SEQ, PREDS)
    counted = graph_matmul_flops(tf.function(lambda: model(features, training=False)))
    heads = 2 * BATCH * PREDS * (h * e + e * CONFIG.vocab_size) + 2 * BATCH * h * 2  # MLM transform, tied logits; SOP
    expected = encoder_flops(BATCH, SEQ) + heads
    if heads_only:  # the last layer's queries, attention output and feed-forward only at position 0 and the masked
        skipped_rows = BATCH * (SEQ - 1 - PREDS)
        expected -= skipped_rows * (2 * (2 * h * h + 2 * h * i) + 4 * SEQ * h)
    assert counted == expected
