"""`AlbertForSquad`: extractive question answering heads of the original release (SQuAD v1.1 and v2.0).

v1.1 (`version_2=False`), as the original's `create_v1_model`: one dense layer [H -> 2] over every position of the
sequence output gives the start and end logits (TF1 names `cls/squad/output_weights` [2, H], `cls/squad/output_bias`
[2]); the loss is the mean of the start and end cross-entropies against the gold positions.

v2.0 (`version_2=True`), as the original's `create_v2_model` (XLNet's answer verifier):

* start: dense [H -> 1] per position (`start_logits/dense`), positions with `p_mask` = 1 set to -1e30, log-softmax;
* end, conditioned on a start: each position's representation concatenated with the start position's, dense
  [2H -> H] + tanh (`end_logits/dense_0`), LayerNorm (`end_logits/LayerNorm`, epsilon 1e-12), dense [H -> 1]
  (`end_logits/dense_1`), masked, log-softmax. In training the gold start is used; at inference a beam: the
  `start_n_top` best starts, and for each the `end_n_top` best ends;
* answerability: the [CLS] representation and the start-probability-weighted sum of the representations,
  concatenated as [start, cls], dense [2H -> H] + tanh (`answer_class/dense_0`), dropout (`dropout_prob`), dense
  [H -> 1] without bias (`answer_class/dense_1`) -> `cls_logits` (high = unanswerable);
* loss: (start + end cross-entropy) / 2 + 0.5 x the sigmoid cross-entropy of `cls_logits` against `is_impossible`.

The masking and softmaxes run in float32 under mixed precision. Losses are normalised by the global batch (summed
over replicas, `losses.global_mean`), so a distributed step equals a single-device step on the same batch. Keras'
sample weights ([B]) make each of the three losses (and the reported ones) a weighted mean over the examples.
"""

import keras
import tensorflow as tf
from keras import ops

from albert_tf.model import losses
from albert_tf.model.feature_labels import LabelsInFeatures, example_weights, merge_labels
from albert_tf.model.layers import truncated_normal
from albert_tf.model.normalization import LayerNorm
from albert_tf.model.task_model import TaskModel

NEG_INF = 1e30


def default_p_mask(input_mask, segment_ids):
    """The original's `p_mask` for `[CLS] question [SEP] context [SEP]` inputs: 0 on [CLS] and the context pieces,
    1 on the question, both [SEP]s and padding (the last real token is the final [SEP])."""
    input_mask = tf.cast(input_mask, tf.int32)
    segment_ids = tf.cast(segment_ids, tf.int32)
    length = tf.reduce_sum(input_mask, axis=1, keepdims=True)
    positions = tf.range(tf.shape(input_mask)[1])[None, :]
    context = (segment_ids == 1) & (input_mask == 1) & (positions < length - 1)
    return tf.where(context | (positions == 0), 0, 1)


def _masked(logits, p_mask):
    p_mask = tf.cast(p_mask, tf.float32)
    return logits * (1.0 - p_mask) - NEG_INF * p_mask


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertForSquad(LabelsInFeatures, TaskModel):
    """ALBERT with the original's SQuAD head (see module docstring).

    Args:
      config: an `AlbertConfig` (or its dict).
      version_2: the v2.0 head (answerability, beam over start/end) instead of v1.1's start/end logits.
      start_n_top, end_n_top: v2.0 beam sizes at inference.
      dropout_prob: v2.0: dropout in the answerability layer (v1.1 has no head dropout, as the original).

    Call args:
      inputs: dict with int `input_ids`, `input_mask`, `segment_ids` [B, T]; v2.0 also `p_mask` [B, T] (derived
        from `input_mask`/`segment_ids` when absent, see `default_p_mask`) and, to get the training outputs,
        `start_positions` [B] (the gold start the end is conditioned on).
    Returns (float32, int32 indices):
      v1.1: `start_logits`, `end_logits` [B, T].
      v2.0 with `start_positions`: `start_log_probs`, `end_log_probs` [B, T], `cls_logits` [B].
      v2.0 otherwise: `start_log_probs` [B, T], `start_top_log_probs`/`start_top_index` [B, start_n_top],
        `end_top_log_probs`/`end_top_index` [B, start_n_top * end_n_top] (ends of start i at i * end_n_top + j),
        `cls_logits` [B].

    `fit` takes batches of feature dicts: the inputs plus `start_positions`, `end_positions` and (v2.0)
    `is_impossible`, in one dict or as `(x, y)` with those in `y`; it reports `loss`, `start_loss`, `end_loss`
    (and `cls_loss`).
    """

    def __init__(self, config, version_2=False, start_n_top=5, end_n_top=5, dropout_prob=0.1, **kwargs):
        super().__init__(config, dropout_prob=dropout_prob, **kwargs)
        self.version_2 = bool(version_2)
        self.start_n_top = int(start_n_top)
        self.end_n_top = int(end_n_top)
        c = self.config
        init = truncated_normal(c.initializer_range)
        dtype = self.dtype_policy
        if not self.version_2:
            self.output_layer = keras.layers.Dense(2, kernel_initializer=init, dtype=dtype, name="squad_output")
        else:
            self.start_dense = keras.layers.Dense(1, kernel_initializer=init, dtype=dtype, name="start_dense")
            self.end_dense_0 = keras.layers.Dense(c.hidden_size, activation="tanh", kernel_initializer=init,
                                                  dtype=dtype, name="end_dense_0")
            self.end_layer_norm = LayerNorm(epsilon=1e-12, dtype=dtype, name="end_LayerNorm")
            self.end_dense_1 = keras.layers.Dense(1, kernel_initializer=init, dtype=dtype, name="end_dense_1")
            self.answer_dense_0 = keras.layers.Dense(c.hidden_size, activation="tanh", kernel_initializer=init,
                                                     dtype=dtype, name="answer_class_dense_0")
            self.answer_dense_1 = keras.layers.Dense(1, use_bias=False, kernel_initializer=init, dtype=dtype,
                                                     name="answer_class_dense_1")
        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.start_loss_tracker = keras.metrics.Mean(name="start_loss")
        self.end_loss_tracker = keras.metrics.Mean(name="end_loss")
        self.cls_loss_tracker = keras.metrics.Mean(name="cls_loss") if self.version_2 else None

    def _head_args(self):
        return {"version_2": self.version_2, "start_n_top": self.start_n_top, "end_n_top": self.end_n_top}

    def build(self, inputs_shape):
        self.albert.build(inputs_shape)
        h = self.config.hidden_size
        if not self.version_2:
            self.output_layer.build((None, None, h))
        else:
            self.start_dense.build((None, None, h))
            self.end_dense_0.build((None, None, 2 * h))
            self.end_layer_norm.build((None, None, h))
            self.end_dense_1.build((None, None, h))
            self.answer_dense_0.build((None, 2 * h))
            self.answer_dense_1.build((None, h))
        self.built = True

    # -- forward ----------------------------------------------------------------------------------------------------

    def call(self, inputs, training=None):
        encoder_inputs = {k: inputs[k] for k in ("input_ids", "input_mask", "segment_ids") if k in inputs}
        sequence = self.albert(encoder_inputs, training=training)["sequence_output"]
        if not self.version_2:
            logits = ops.cast(self.output_layer(sequence), "float32")
            return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}
        return self._v2_head(sequence, inputs, training)

    def _end_log_probs(self, sequence, start_features, p_mask):
        """End log-probs [B, K, T] for K start representations [B, K, H] (K = 1 in training)."""
        seq_len = tf.shape(sequence)[1]
        num_starts = tf.shape(start_features)[1]
        tokens = tf.tile(sequence[:, None, :, :], tf.stack([1, num_starts, 1, 1]))
        starts = tf.tile(start_features[:, :, None, :], tf.stack([1, 1, seq_len, 1]))
        hidden = self.end_dense_0(tf.concat([tokens, starts], axis=-1))
        hidden = self.end_layer_norm(hidden)
        logits = tf.cast(tf.squeeze(self.end_dense_1(hidden), -1), tf.float32)
        return tf.nn.log_softmax(_masked(logits, p_mask[:, None, :]), axis=-1)

    def _v2_head(self, sequence, inputs, training):
        p_mask = inputs.get("p_mask")
        if p_mask is None:
            p_mask = default_p_mask(inputs["input_mask"], inputs["segment_ids"])
        p_mask = tf.cast(p_mask, tf.float32)
        start_logits = _masked(tf.cast(tf.squeeze(self.start_dense(sequence), -1), tf.float32), p_mask)
        start_log_probs = tf.nn.log_softmax(start_logits, axis=-1)
        outputs = {"start_log_probs": start_log_probs}

        if "start_positions" in inputs:
            start_positions = tf.reshape(tf.cast(inputs["start_positions"], tf.int32), [-1])
            start_features = tf.gather(sequence, start_positions[:, None], batch_dims=1)  # [B, 1, H]
            outputs["end_log_probs"] = self._end_log_probs(sequence, start_features, p_mask)[:, 0, :]
        else:
            seq_len = tf.shape(sequence)[1]
            k_start = tf.minimum(self.start_n_top, seq_len)
            k_end = tf.minimum(self.end_n_top, seq_len)
            start_top_log_probs, start_top_index = tf.math.top_k(start_log_probs, k=k_start)
            start_features = tf.gather(sequence, start_top_index, batch_dims=1)  # [B, k, H]
            end_log_probs = self._end_log_probs(sequence, start_features, p_mask)  # [B, k, T]
            end_top_log_probs, end_top_index = tf.math.top_k(end_log_probs, k=k_end)
            batch = tf.shape(sequence)[0]
            outputs.update(
                start_top_log_probs=start_top_log_probs, start_top_index=start_top_index,
                end_top_log_probs=tf.reshape(end_top_log_probs, tf.stack([batch, -1])),
                end_top_index=tf.reshape(end_top_index, tf.stack([batch, -1])))

        cls_feature = sequence[:, 0, :]
        start_probs = tf.cast(tf.nn.softmax(start_logits, axis=-1), sequence.dtype)
        start_feature = tf.einsum("bt,bth->bh", start_probs, sequence)
        hidden = self.answer_dense_0(tf.concat([start_feature, cls_feature], axis=-1))
        hidden = self.dropout(hidden, training=training)
        outputs["cls_logits"] = tf.cast(tf.squeeze(self.answer_dense_1(hidden), -1), tf.float32)
        return outputs

    # -- loss and metrics ------------------------------------------------------------------------------------------

    def compute_losses(self, outputs, features):
        """Per-example (start, end, cls or None) losses [B] of the original's objective."""
        start_positions = tf.reshape(tf.cast(features["start_positions"], tf.int32), [-1])
        end_positions = tf.reshape(tf.cast(features["end_positions"], tf.int32), [-1])
        if not self.version_2:
            start = tf.nn.sparse_softmax_cross_entropy_with_logits(start_positions, outputs["start_logits"])
            end = tf.nn.sparse_softmax_cross_entropy_with_logits(end_positions, outputs["end_logits"])
            return start, end, None
        start = -tf.gather(outputs["start_log_probs"], start_positions[:, None], batch_dims=1)[:, 0]
        end = -tf.gather(outputs["end_log_probs"], end_positions[:, None], batch_dims=1)[:, 0]
        labels = tf.reshape(tf.cast(features["is_impossible"], tf.float32), [-1])
        cls = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=outputs["cls_logits"])
        return start, end, cls

    @staticmethod
    def total_loss(start, end, cls, weights=None):
        """(start + end) / 2 (+ 0.5 x cls), each the (`weights`-weighted) mean over the global batch (this
        replica's share)."""
        loss = (losses.global_mean(start, weights) + losses.global_mean(end, weights)) / 2.0
        if cls is not None:
            loss += 0.5 * losses.global_mean(cls, weights)
        return loss

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        features = merge_labels(type(self).__name__, x, y)
        return self.total_loss(*self.compute_losses(y_pred, features), weights=example_weights(sample_weight))

    @property
    def metrics(self):
        trackers = [self.loss_tracker, self.start_loss_tracker, self.end_loss_tracker]
        return trackers + ([self.cls_loss_tracker] if self.cls_loss_tracker is not None else [])

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        start, end, cls = self.compute_losses(y_pred, merge_labels(type(self).__name__, x, y))
        weights = example_weights(sample_weight)
        per_example = (start + end) / 2.0 + (0.5 * cls if cls is not None else 0.0)
        self.loss_tracker.update_state(per_example, sample_weight=weights)
        self.start_loss_tracker.update_state(start, sample_weight=weights)
        self.end_loss_tracker.update_state(end, sample_weight=weights)
        if cls is not None:
            self.cls_loss_tracker.update_state(cls, sample_weight=weights)
        return {m.name: m.result() for m in self.metrics}
