"""The one train and test step of every model here: the original's gradient clipping, done across replicas.

`TrainStep` is a mixin put before a model class (`class TrainablePretraining(TrainStep, AlbertForPretraining)`);
the model supplies its loss through Keras' `compute_loss` (and, where it reports more than the loss, its
`metrics` / `compute_metrics`), so `fit`, `evaluate`, `train_on_batch` and `test_on_batch` take what Keras hands
them: a batch of features, or `(x, y)` / `(x, y, sample_weight)` (for models whose labels are features, a labels
dict `y` is merged into `x` first: `model.feature_labels`).

Keras would clip each replica's gradient separately; the original clips the gradient of the global batch to
global norm 1.0. Here the norm is taken of the gradient summed over replicas, so a step on N replicas equals a
step on one device with the same global batch.
"""

import keras
import tensorflow as tf

from albert_tf import keras_internals
from albert_tf.model.feature_labels import LabelsInFeatures


def clip_gradients_across_replicas(grads, clip_norm=1.0, loss_scale=1.0):
    """Scales each replica's gradients so that their sum has global norm at most `clip_norm`.

    The norm is taken of the summed gradient (divided by the loss scale under float16). Dense copies are taken
    of sparse (embedding) gradients; `None` gradients (weights a head does not use, such as the pooler under a
    span head) stay `None`.
    """
    grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
    present = [g for g in grads if g is not None]
    context = tf.distribute.get_replica_context()
    summed = present
    if context is not None and context.num_replicas_in_sync > 1:
        summed = context.all_reduce(tf.distribute.ReduceOp.SUM, present)
    norm = tf.linalg.global_norm(summed) / tf.cast(loss_scale, tf.float32)
    factor = clip_norm / tf.maximum(norm, clip_norm)
    return [None if g is None else g * tf.cast(factor, g.dtype) for g in grads]


def loss_scale_of(optimizer):
    """The factor `optimizer.scale_loss` applies: 1 unless the optimizer is a `LossScaleOptimizer`, whose
    dynamic scale exists once it is built (before that, e.g. in a first `train_on_batch`, its initial scale)."""
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return optimizer.dynamic_scale if optimizer.built else optimizer.initial_scale
    return 1.0


def multi_worker_logs(logs):
    """Step logs in a shape Keras can reduce across workers.

    Under MultiWorkerMirroredStrategy, Keras 3.15 averages every log with `strategy.reduce("MEAN", value,
    axis=0)`, which fails on scalars ("Invalid reduction dimension 0 for input with 0 dimensions";
    tensorflow/tensorflow#72388); there each log gets a length-1 axis, which that reduce removes.
    """
    if not keras_internals.in_multi_worker_mode(tf.distribute.get_strategy()):
        return logs
    return {name: tf.reshape(value, [1]) for name, value in logs.items()}


class TrainStep(keras_internals.LocalBatchSymbolicBuild):
    """`train_step` / `test_step` with the original's clipping (global norm `clip_norm`, 1.0) across replicas.

    The loss is the model's `compute_loss` (Keras' contract under a strategy: this replica's share of the
    global-batch loss); the logs are the model's metrics plus `learning_rate` while training.

    `head_only_steps` (> 0, for a task model whose encoder is `self.albert`): the first that many steps train the
    task head alone, the encoder's gradients zeroed (a linear probe on the frozen features, then fine-tuning of the
    whole model: LP-FT, Kumar et al. 2022), so that a small labelled set does not distort pretrained features
    through a random head. A decoupled weight decay (AdamW) still applies to the encoder in those steps.
    """

    def __init__(self, *args, clip_norm=1.0, head_only_steps=0, **kwargs):
        super().__init__(*args, **kwargs)
        self.clip_norm = clip_norm
        self.head_only_steps = head_only_steps

    def get_config(self):
        return {**super().get_config(), "clip_norm": self.clip_norm, "head_only_steps": self.head_only_steps}

    def _encoder_held(self, grads, variables):
        """`grads` with the encoder's zeroed while the optimizer's step is below `head_only_steps`."""
        encoder = {id(v) for v in self.albert.trainable_variables}
        open_ = tf.cast(self.optimizer.iterations >= self.head_only_steps, tf.float32)
        return [g if g is None or id(v) not in encoder else g * tf.cast(open_, g.dtype)
                for g, v in zip(grads, variables)]

    def _unpack(self, data):
        if isinstance(self, LabelsInFeatures):
            data = self.merge_labels(data)
        return keras.utils.unpack_x_y_sample_weight(data)

    def train_step(self, data):
        x, y, sample_weight = self._unpack(data)
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = keras_internals.compute_step_loss(self, x, y, y_pred, sample_weight, training=True)
            scaled = self.optimizer.scale_loss(loss)
        variables = self.trainable_variables
        grads = tape.gradient(scaled, variables)
        if self.head_only_steps:
            grads = self._encoder_held(grads, variables)
        grads = clip_gradients_across_replicas(grads, self.clip_norm, loss_scale_of(self.optimizer))
        used = [(g, v) for g, v in zip(grads, variables) if g is not None]
        self.optimizer.apply([g for g, _ in used], [v for _, v in used])
        logs = dict(self.compute_metrics(x, y, y_pred, sample_weight=sample_weight))
        logs["learning_rate"] = tf.cast(self.optimizer.learning_rate, tf.float32)
        return multi_worker_logs(logs)

    def test_step(self, data):
        x, y, sample_weight = self._unpack(data)
        y_pred = self(x, training=False)
        keras_internals.compute_step_loss(self, x, y, y_pred, sample_weight, training=False)
        return multi_worker_logs(dict(self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)))
