"""LayerNorm as one TensorFlow op: what every ALBERT LayerNorm (embeddings, both in each block, the MLM head)
computes, with the weights of a Keras `LayerNormalization`.

Keras 3's `LayerNormalization` runs about ten small ops per call (mean, squared difference, variance, rsqrt,
scale, shift, their broadcasts); at batch 1 a base model's 25 LayerNorms cost as much as a layer's matmuls. Here
the normalisation is one `FusedBatchNormV3` over a [1, rows, H, 1] view of the input: each row is a "channel",
normalised with its own mean and variance over its H values (batch statistics, as in training mode), followed
by the scale and shift. That is how Keras 2's `LayerNormalization` computed it, and the form TensorFlow's graph
optimiser replaces, at inference with oneDNN, by a single fused LayerNorm kernel. The fusion looks for `Fill`
ops as the unit scale and zero offset of the batch norm; their row count passes through a
`PlaceholderWithDefault`, which constant folding leaves alone, so that they stay `Fill` ops when every shape is
static too. In training the op's own gradient (`FusedBatchNormGradV3`) runs.

`epsilon` reaches the kernel as given (1e-12 for ALBERT): the raw op is used because
`tf.nn.fused_batch_norm` raises any epsilon below 1.001e-5 to that value.
"""

import keras
import tensorflow as tf


def layer_norm(inputs, gamma, beta, epsilon):
    """(x - mean) / sqrt(var + epsilon) * gamma + beta over the last axis, computed in float32.

    Args:
      inputs: float [..., H] (H static).
      gamma, beta: float32 [H].
      epsilon: float.
    Returns:
      float32 [..., H].
    """
    x = tf.cast(inputs, tf.float32)
    hidden = x.shape[-1]
    rows = tf.raw_ops.PlaceholderWithDefault(input=tf.reshape(tf.size(x) // hidden, [1]), shape=[1])
    normalized = tf.raw_ops.FusedBatchNormV3(
        x=tf.reshape(x, [1, -1, hidden, 1]), scale=tf.fill(rows, 1.0), offset=tf.fill(rows, 0.0),
        mean=tf.constant([], tf.float32), variance=tf.constant([], tf.float32), epsilon=epsilon,
        data_format="NCHW", is_training=True)[0]
    return tf.reshape(normalized, tf.shape(x)) * tf.cast(gamma, tf.float32) + tf.cast(beta, tf.float32)


def normalize(layer, inputs):
    """`layer(inputs)` for a built Keras `LayerNormalization` over the last axis with scale and offset (keras-hub's
    block has those), computed by `layer_norm` and returned in the layer's compute dtype."""
    return tf.cast(layer_norm(inputs, layer.gamma, layer.beta, layer.epsilon), layer.compute_dtype)


@keras.saving.register_keras_serializable(package="albert_tf")
class LayerNorm(keras.layers.LayerNormalization):
    """Keras' `LayerNormalization` (same weights, names and config) over the last axis, computed by `layer_norm`.

    Call args:
      inputs: float [..., H].
    Returns:
      [..., H] in the layer's compute dtype.
    """

    def __init__(self, epsilon=1e-12, **kwargs):
        super().__init__(epsilon=epsilon, **kwargs)
        if self.axis not in (-1, [-1]) or not (self.center and self.scale) or self.rms_scaling:
            raise ValueError("LayerNorm normalises the last axis with a scale and an offset")

    def call(self, inputs):
        return normalize(self, inputs)
