"""Heads on the pooled output: sentence (pair) classification and regression, and multiple choice (RACE).

Both are the original's heads (`output_weights` [num_outputs, H], `output_bias`) with its losses: mean softmax
cross-entropy, or mean squared error for regression. A loss given to `compile` replaces the original's.
"""

import keras
import tensorflow as tf
from keras import ops

from albert_tf.model import losses
from albert_tf.model.layers import truncated_normal
from albert_tf.model.task_model import TaskModel


def _mean(values, sample_weight):
    """The (sample-weighted) mean over the global batch, as this replica's share (`losses.global_mean`)."""
    if sample_weight is not None:
        values = values * tf.cast(tf.reshape(sample_weight, tf.shape(values)), values.dtype)
    return losses.global_mean(values)


def cross_entropy(labels, logits):
    """Per-example softmax cross-entropy of float logits [B, C] against int labels [B]."""
    labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=tf.cast(logits, tf.float32))


def pooled_output(albert, inputs, training):
    """The encoder's pooled output [B, H], its last layer computed at position 0 only (all this head reads)."""
    no_positions = ops.zeros((ops.shape(inputs["input_ids"])[0], 0), "int32")
    return albert(inputs, training=training, output_positions=no_positions)["pooled_output"]


class _OriginalLoss:
    """`compute_loss` with the original's loss, unless `compile` was given one."""

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if getattr(self, "loss", None) is not None:
            return super().compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=training)
        if y is None:
            raise ValueError(f"{type(self).__name__} needs labels: give (x, y) with y the label ids [batch] "
                             "(the scores for regression)")
        return _mean(self.per_example_loss(y, y_pred), sample_weight)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertClassifier(_OriginalLoss, TaskModel):
    """Sentence (pair) classification or regression: dropout + dense on the pooled output.

    As the original's `run_classifier` head, with the dropout rate configurable (the original hard-codes 0.1).
    `num_labels=1` is regression (STS-B).

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
        pooled = pooled_output(self.albert, inputs, training)
        return ops.cast(self.output_layer(self.dropout(pooled, training=training)), "float32")

    def per_example_loss(self, labels, logits):
        """[B] cross-entropy, or squared error of the score (regression)."""
        if self.num_labels == 1:
            return tf.square(tf.cast(logits, tf.float32)[:, 0] - tf.reshape(tf.cast(labels, tf.float32), [-1]))
        return cross_entropy(labels, logits)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertForMultipleChoice(_OriginalLoss, TaskModel):
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
        pooled = pooled_output(self.albert, flat, training)
        logits = self.output_layer(self.dropout(pooled, training=training))
        return ops.cast(ops.reshape(logits, (-1, self.num_choices)), "float32")

    def per_example_loss(self, labels, logits):
        """[B] cross-entropy over the choices."""
        return cross_entropy(labels, logits)
