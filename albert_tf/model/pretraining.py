"""`AlbertForPretraining`: the encoder with the masked-LM head (tied to the word embeddings) and the
sentence-order head, and the original's pretraining loss.

The loss is the original's: masked-LM cross-entropy weighted by `masked_lm_weights`,
sum / (sum of weights + 1e-5), plus the mean sentence-order cross-entropy. Both are normalised by their totals
over the global batch (`losses.global_mean`), which on one device is exactly the original's formula.

Keras' sample weights ([B], from `fit(..., sample_weight=...)` or `train_on_batch(x, y, w)`) multiply each
example's `masked_lm_weights` and weight its sentence-order loss; both terms stay weighted means, and the
reported losses and accuracies are the same weighted means.
"""

import keras
import tensorflow as tf
from keras import ops

from albert_tf.model import losses
from albert_tf.model.encoder import AlbertModel, as_config
from albert_tf.model.feature_labels import LabelsInFeatures, example_weights, merge_labels
from albert_tf.model.layers import MaskedLMHead, truncated_normal

MLM_EPSILON = 1e-5


def pretraining_losses(outputs, features):
    """Per-position MLM losses [B, P], per-example SOP losses [B], and the correctness of each prediction."""
    labels = tf.cast(features["masked_lm_ids"], tf.int32)
    mlm_logits = tf.cast(outputs["mlm_logits"], tf.float32)
    mlm_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=mlm_logits)
    mlm_correct = tf.cast(tf.equal(tf.argmax(mlm_logits, -1, output_type=tf.int32), labels), tf.float32)
    sop_labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])
    sop_logits = tf.cast(outputs["sop_logits"], tf.float32)
    sop_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=sop_labels, logits=sop_logits)
    sop_correct = tf.cast(tf.equal(tf.argmax(sop_logits, -1, output_type=tf.int32), sop_labels), tf.float32)
    return mlm_loss, mlm_correct, sop_loss, sop_correct


def set_heads_only(model, enabled=True):
    """Makes an `AlbertForPretraining` compute its last layer only where the heads read it (`heads_only`).

    A run-time choice, as `set_remat`: the logits and losses keep their values (up to float rounding), only
    the work per step and the shape of `sequence_output` change, so it is not stored in the config.
    """
    model.heads_only = bool(enabled)
    return model


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertForPretraining(LabelsInFeatures, keras.Model):
    """ALBERT with the masked-LM head (tied to the word embeddings) and the sentence-order head.

    Call args:
      inputs: the `AlbertModel` inputs plus `masked_lm_positions` int [B, P].
    Returns:
      the `AlbertModel` outputs plus float32 `mlm_logits` [B, P, V] and `sop_logits` [B, 2]
      (label 1 = the two segments were swapped).

    With `heads_only` set (`set_heads_only`; the pretraining task sets it) the last layer is computed only
    where the heads read it, position 0 and `masked_lm_positions` (`AlbertModel`'s `output_positions`): same
    logits, less work per step. `sequence_output` is then [B, P, H], the states at the masked positions.

    Trained on batches of pretraining features (the inputs plus `masked_lm_ids`, `masked_lm_weights`,
    `next_sentence_labels`: one dict, or the inputs and a dict of those three as `(x, y)`), it reports the
    original's metrics: masked_lm_accuracy, masked_lm_loss, sentence_order_accuracy, sentence_order_loss, and loss
    (their sum).
    """

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = as_config(config)
        c = self.config
        self.albert = AlbertModel(c, dtype=self.dtype_policy, name="albert")
        self.masked_lm = MaskedLMHead(c.vocab_size, c.embedding_size, hidden_act=c.hidden_act,
                                      initializer_range=c.initializer_range, dtype=self.dtype_policy,
                                      name="predictions")
        self.seq_relationship = keras.layers.Dense(
            2, kernel_initializer=truncated_normal(c.initializer_range), dtype=self.dtype_policy,
            name="seq_relationship")
        self.masked_lm_accuracy = keras.metrics.Mean(name="masked_lm_accuracy")
        self.masked_lm_loss = keras.metrics.Mean(name="masked_lm_loss")
        self.sentence_order_accuracy = keras.metrics.Mean(name="sentence_order_accuracy")
        self.sentence_order_loss = keras.metrics.Mean(name="sentence_order_loss")
        self.heads_only = False

    def build(self, inputs_shape):
        ids_shape = tuple(inputs_shape["input_ids"])
        self.albert.build(inputs_shape)
        self.masked_lm.build(ids_shape + (self.config.hidden_size,))
        self.seq_relationship.build((ids_shape[0], self.config.hidden_size))
        self.built = True

    def call(self, inputs, training=None):
        positions = inputs["masked_lm_positions"]
        if self.heads_only:
            outputs = dict(self.albert(inputs, training=training, output_positions=positions))
            positions = None  # sequence_output holds just the masked positions
        else:
            outputs = dict(self.albert(inputs, training=training))
        table = self.albert.embeddings.word_embeddings.embeddings
        outputs["mlm_logits"] = self.masked_lm(outputs["sequence_output"], positions, table)
        outputs["sop_logits"] = ops.cast(self.seq_relationship(outputs["pooled_output"]), "float32")
        return outputs

    @staticmethod
    def _weights(features, sample_weight):
        """(MLM weights [B, P], SOP weights [B] or None) with the sample weights applied."""
        mlm_weights = tf.cast(features["masked_lm_weights"], tf.float32)
        sample_weight = example_weights(sample_weight)
        if sample_weight is None:
            return mlm_weights, None
        return mlm_weights * sample_weight[:, None], sample_weight

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        features = merge_labels(type(self).__name__, x, y)
        mlm_loss, _, sop_loss, _ = pretraining_losses(y_pred, features)
        mlm_weights, sop_weights = self._weights(features, sample_weight)
        return (losses.global_mean(mlm_loss, mlm_weights, epsilon=MLM_EPSILON)
                + losses.global_mean(sop_loss, sop_weights))

    @property
    def metrics(self):
        return [self.masked_lm_accuracy, self.masked_lm_loss, self.sentence_order_accuracy,
                self.sentence_order_loss]

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        features = merge_labels(type(self).__name__, x, y)
        mlm_loss, mlm_correct, sop_loss, sop_correct = pretraining_losses(y_pred, features)
        weights, sop_weights = self._weights(features, sample_weight)
        self.masked_lm_accuracy.update_state(mlm_correct, sample_weight=weights)
        self.masked_lm_loss.update_state(mlm_loss, sample_weight=weights)
        self.sentence_order_accuracy.update_state(sop_correct, sample_weight=sop_weights)
        self.sentence_order_loss.update_state(sop_loss, sample_weight=sop_weights)
        results = {m.name: m.result() for m in self.metrics}
        results["loss"] = results["masked_lm_loss"] + results["sentence_order_loss"]
        return results

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict()}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        return cls(as_config(config.pop("config")), **config)
