"""LayerNorm as one op: the formula (float64 reference, epsilon as given), Keras' LayerNormalization with the
same weights (outputs and gradients, graph and XLA, mixed precision), and the fused kernel TensorFlow runs for
it at inference."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.model import AlbertModel, dummy_inputs
from albert_tf.model.normalization import LayerNorm, layer_norm
from tests.helpers import executed_op_types, onednn_enabled, randomize, tiny_config


def _reference(x, gamma, beta, epsilon):
    x = x.astype(np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon) * gamma + beta


@pytest.mark.parametrize("shape", [(5, 16), (2, 3, 16)])
def test_layer_norm_is_the_formula_with_the_epsilon_given(shape):
    rng = np.random.default_rng(0)
    x = rng.normal(2.0, 3.0, shape).astype(np.float32)
    x[..., 0, :] = 1.0 + 1e-4 * np.where(np.arange(16) % 2, 1.0, -1.0)  # variance 1e-8: epsilon decides the scale
    gamma = rng.uniform(0.5, 1.5, 16).astype(np.float32)
    beta = rng.normal(0, 1, 16).astype(np.float32)
    for epsilon in (1e-12, 1e-3):
        out = layer_norm(tf.constant(x), tf.constant(gamma), tf.constant(beta), epsilon).numpy()
        np.testing.assert_allclose(out, _reference(x, gamma, beta, epsilon), rtol=1e-5, atol=2e-5)
    # With 1e-12 the near-constant row is normalised to +-1; an epsilon raised to 1e-5 would give +-0.03.
    low_variance = layer_norm(tf.constant(x), tf.ones(16), tf.zeros(16), 1e-12).numpy()[..., 0, :]
    np.testing.assert_allclose(np.abs(low_variance), 1.0, atol=1e-3)


def _pair(seed=0, **kwargs):
    """A LayerNorm and a Keras LayerNormalization with the same random weights."""
    ours, theirs = LayerNorm(epsilon=1e-12, **kwargs), keras.layers.LayerNormalization(epsilon=1e-12, **kwargs)
    rng = np.random.default_rng(seed)
    for layer in (ours, theirs):
        layer.build((None, None, 24))
    for a, b in zip(ours.weights, theirs.weights):
        assert a.path.split("/")[-1] == b.path.split("/")[-1]
        value = rng.uniform(0.5, 1.5, a.shape) if "gamma" in a.path else rng.normal(0, 1, a.shape)
        a.assign(value.astype(np.float32))
        b.assign(value.astype(np.float32))
    return ours, theirs


@pytest.mark.parametrize("mode", ["eager", "graph", "xla"])
def test_layer_norm_layer_matches_keras_layer_normalization_with_its_gradients(mode):
    ours, theirs = _pair()
    x = tf.constant(np.random.default_rng(1).normal(0.5, 2.0, (3, 7, 24)).astype(np.float32))
    cotangent = tf.constant(np.random.default_rng(2).normal(0, 1, (3, 7, 24)).astype(np.float32))

    def value_and_grads(layer):
        def run(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = layer(x)
                loss = tf.reduce_sum(y * cotangent)
            return [y] + tape.gradient(loss, [x] + layer.trainable_weights)

        if mode != "eager":
            run = tf.function(run, jit_compile=mode == "xla")
        return [t.numpy() for t in run(x)]

    for a, b, what in zip(value_and_grads(ours), value_and_grads(theirs), ("output", "dx", "dgamma", "dbeta")):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4, err_msg=what)


def test_layer_norm_layer_config_and_mixed_precision():
    layer = LayerNorm(epsilon=1e-12, name="LayerNorm")
    clone = LayerNorm.from_config(layer.get_config())
    assert clone.epsilon == 1e-12 and clone.name == "LayerNorm"
    ours, theirs = _pair(dtype="mixed_bfloat16")
    x = tf.constant(np.random.default_rng(3).normal(0, 2, (2, 5, 24)), tf.bfloat16)
    out, expected = ours(x), theirs(x)
    assert out.dtype == tf.bfloat16 and ours.gamma.dtype == "float32"
    np.testing.assert_allclose(tf.cast(out, tf.float32).numpy(), tf.cast(expected, tf.float32).numpy(), atol=2e-2)


def test_layer_norm_refuses_other_axes():
    with pytest.raises(ValueError, match="last axis"):
        LayerNorm(axis=1)
    with pytest.raises(ValueError, match="last axis"):
        LayerNorm(center=False)


@pytest.mark.skipif(not onednn_enabled(), reason="hardware: the fusions are oneDNN's (x86 with AVX-512 or AVX2)")
@pytest.mark.parametrize("signature", [False, True], ids=["static_shapes", "none_none_signature"])
def test_inference_runs_one_fused_kernel_per_layer_norm_and_fuses_the_attention_scores(signature):
    """Every LayerNorm of a forward (embeddings, two per layer) runs as one oneDNN LayerNorm kernel, whether the
    function is traced at static shapes or through the `[None, None]` signature of an export; and each layer's
    scaled, masked scores are one fused batched matmul."""
    config = tiny_config(num_hidden_layers=3)
    model = AlbertModel(config)
    model(dummy_inputs(), training=False)
    randomize(model)
    inputs = {"input_ids": tf.constant([[5, 6, 7, 8, 9, 0]]), "input_mask": tf.constant([[1, 1, 1, 1, 1, 0]]),
              "segment_ids": tf.constant([[0, 0, 0, 1, 1, 0]])}
    spec = [{k: tf.TensorSpec([None, None], tf.int32) for k in inputs}] if signature else None
    forward = tf.function(lambda x: model(x, training=False)["sequence_output"], input_signature=spec)
    ops = executed_op_types(forward, inputs)
    assert ops["_MklLayerNorm"] == 1 + 2 * config.num_hidden_layers, ops
    assert ops["_MklFusedBatchMatMulV2"] == config.num_hidden_layers, ops
    assert not ops["Rsqrt"] and not ops["FusedBatchNormV3"] and not ops["_MklNativeFusedBatchNormV3"], ops
