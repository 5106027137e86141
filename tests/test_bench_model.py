"""`bench/bench_model.py`'s matmul accounting against the model itself: the products its peak times
(`step_matmuls`) and the dependency chain it times for batch 1 (`ForwardChain`) are the matmuls the model's
own graph computes, counted op by op from the traced graph."""

import importlib.util
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.model import AlbertForPretraining, AlbertModel, dummy_inputs, set_heads_only
from tests.helpers import REPO

CONFIG = AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                      intermediate_size=64, max_position_embeddings=32)
BATCH, SEQ, PREDS = 2, 16, 3
BACKWARD = (" dX", " dW", " dA", " dB")


@pytest.fixture(scope="module")
def bench_model():
    spec = importlib.util.spec_from_file_location("bench_model", os.path.join(REPO, "bench", "bench_model.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


@pytest.mark.parametrize("heads_only", [False, True])
def test_step_matmuls_are_the_pretraining_models_forward(bench_model, heads_only):
    model = set_heads_only(AlbertForPretraining(CONFIG), heads_only)
    batch = bench_model.make_batch(CONFIG, BATCH, SEQ, PREDS)
    counted = graph_matmul_flops(tf.function(lambda: model(batch, training=False)))
    shapes = bench_model.step_matmuls(CONFIG, BATCH, SEQ, PREDS, train=True, heads_only=heads_only)
    forward = [s for s in shapes if not s[0].endswith(BACKWARD)]
    sop = 2 * BATCH * CONFIG.hidden_size * 2  # the 2-way SOP classifier, left out of the benchmark's list
    assert bench_model.MatmulPeak.flops(forward) + sop == counted
    # every forward product has its two backward products, of the same size
    assert bench_model.MatmulPeak.flops(shapes) == 3 * bench_model.MatmulPeak.flops(forward)


def test_inference_matmuls_and_forward_chain_are_the_encoders(bench_model):
    encoder = AlbertModel(CONFIG)
    inputs = dummy_inputs(batch_size=1, seq_length=SEQ)
    counted = graph_matmul_flops(tf.function(lambda: encoder(inputs, training=False)))
    shapes = bench_model.step_matmuls(CONFIG, 1, SEQ, PREDS, train=False)
    assert bench_model.MatmulPeak.flops(shapes) == counted
    layers = [s for s in shapes if s[0] not in ("embedding_projection", "pooler")]
    chain = bench_model.ForwardChain(CONFIG, SEQ)
    assert graph_matmul_flops(chain.fns[False]) == bench_model.MatmulPeak.flops(layers)
    out = chain.fns[False]().numpy()
    assert out.shape == (SEQ, CONFIG.hidden_size) and 0.5 < out.std() < 2  # values of order 1, not growing
