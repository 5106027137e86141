"""`bench/bench_model.py`'s matmul accounting against the model itself: the products its peak times
(`step_matmuls`) and the dependency chain it times for batch 1 (`ForwardChain`) are the matmuls the model's
own graph computes, counted op by op from the traced graph. And `bench/bench_model_runs.py` tables the stored
runs like with like."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.model import AlbertForPretraining, AlbertModel, dummy_inputs, set_heads_only
from tests.helpers import bench_script

CONFIG = AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                      intermediate_size=64, max_position_embeddings=32)
BATCH, SEQ, PREDS = 2, 16, 3
BACKWARD = (" dX", " dW", " dA", " dB")


@pytest.fixture(scope="module")
def bench_model():
    return bench_script("bench_model")


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


def test_run_tables_compare_like_with_like():
    """A bfloat16 side's "x keras-hub" only against keras-hub in bfloat16, never the float32 one; cells of a
    batch-1 run are milliseconds and multiples of the matmul-only time."""
    runs_module = bench_script("bench_model_runs")
    figures = {"train/albert_tf/graph/b8": {"seconds": 3.0, "fraction_of_peak": 0.9, "keras_hub_ratio": 1.2},
               "train/albert_tf-bf16/graph/b8": {"seconds": 2.0, "fraction_of_peak": 1.35, "keras_hub_ratio": 1.8,
                                                 "float32_ratio": 1.5},
               "train/keras-hub/graph/b8": {"seconds": 3.6, "fraction_of_peak": 0.75, "keras_hub_ratio": 1.0},
               "infer/albert_tf/graph/b1": {"seconds": 0.15, "of_peak_time": 1.5}}
    runs = [{"figures": figures, "infer_chain_seconds": 0.11}]
    rows = runs_module.training_table(runs)[2:]
    assert rows == ["| 1 | 8 | albert_tf | 3.000 | 0.900 | 1.200 | – | – | – | – |",
                    "| 1 | 8 | albert_tf-bf16 | 2.000 | 1.350 | – | – | – | – | 1.500 |",
                    "| 1 | 8 | keras-hub | 3.600 | 0.750 | – | – | – | – | – |"]
    (row,) = runs_module.inference_table(runs)[2:]
    assert row.startswith("| 1 | 100.0 | 110.0 (1.100×) | 150.0 (1.500×) | – |")
