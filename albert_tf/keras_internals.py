"""Every use of Keras', keras-hub's and TensorFlow's private API, in one place (pinned by requirements.txt).

A Keras or keras-hub upgrade that moves one of these touches this file only. Each function says what it reaches
into and why the public API does not do.
"""

import keras
import tensorflow as tf

# ------------------------------------------------------------------------------------------------------------------
# keras-hub's TransformerEncoder (the shared ALBERT block).

def transformer_block_parts(block):
    """The sublayers of a built keras-hub `TransformerEncoder`, by role.

    keras-hub keeps them in private attributes; the checkpoint name tables need each Dense and LayerNorm.
    Returns a dict: `query`, `key`, `value`, `attention_output` (EinsumDense), `attention_layer_norm`,
    `intermediate`, `output` (Dense), `output_layer_norm`.
    """
    attention = block._self_attention_layer
    return {"query": attention._query_dense, "key": attention._key_dense, "value": attention._value_dense,
            "attention_output": attention._output_dense,
            "attention_layer_norm": block._self_attention_layer_norm,
            "intermediate": block._feedforward_intermediate_dense, "output": block._feedforward_output_dense,
            "output_layer_norm": block._feedforward_layer_norm}


def block_dropout_layers(block):
    """The three Dropout layers of a built `TransformerEncoder`: `attention_probs` (inside its
    MultiHeadAttention), `attention_output` and `output` (after the feed-forward)."""
    return {"attention_probs": block._self_attention_layer._dropout_layer,
            "attention_output": block._self_attention_dropout, "output": block._feedforward_dropout}


def stateless_dropout(x, rate, seed):
    """Keras' TF-backend dropout with an already drawn seed (`SeedGenerator.next()`): the mask Keras' `Dropout`
    draws from that state, here drawable again identically (a block recomputed in the backward pass).
    `keras.random.dropout` takes only an int or a generator; this repeats its TF backend's seed cast."""
    from keras.src.backend.tensorflow.random import _cast_seed  # pylint: disable=import-outside-toplevel

    return tf.nn.experimental.stateless_dropout(x, rate=rate, seed=_cast_seed(seed))


def set_block_dropouts(block, hidden_dropout, attention_dropout):
    """Gives a built `TransformerEncoder` separate hidden and attention-probability dropout rates, and a
    float32 attention softmax (keras-hub has one rate for both and no public setter)."""
    block._self_attention_dropout.rate = hidden_dropout
    block._feedforward_dropout.rate = hidden_dropout
    attention = block._self_attention_layer
    attention._dropout = attention_dropout
    attention._dropout_layer.rate = attention_dropout
    attention._softmax.dtype_policy = "float32"


# ------------------------------------------------------------------------------------------------------------------
# Keras' trainer: the loss bookkeeping of its own `train_step`, which the project's step reproduces.

def compute_step_loss(model, x, y, y_pred, sample_weight, training):
    """`model.compute_loss(...)` (through `Trainer._compute_loss`, which copes with overrides lacking the
    `training` argument), recorded in the model's `loss` tracker as Keras' own `train_step` does."""
    from keras.src import tree  # pylint: disable=import-outside-toplevel
    from keras.src.losses import loss as loss_module  # pylint: disable=import-outside-toplevel

    loss = model._compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=training)
    tracker = getattr(model, "_loss_tracker", None)
    if tracker is not None:
        batch = tf.shape(next(i for i in tree.flatten(x) if i is not None))[0]
        tracker.update_state(loss_module.unscale_loss_for_distribution(loss), sample_weight=batch)
    return loss


def excluded_by_keras_weight_decay(optimizer, variable):
    """True when Keras' `optimizer.exclude_from_weight_decay(var_list=..., var_names=...)` excludes `variable`.

    Keras records those exclusions in private state and tests them in `BaseOptimizer._use_weight_decay`; the
    project's optimizers apply their own decay rule but honour the public method through this.
    """
    return not optimizer._use_weight_decay(variable)


def in_multi_worker_mode(strategy):
    """True for a MultiWorkerMirroredStrategy that spans processes (TF has no public test for it)."""
    return (isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
            and strategy.extended._in_multi_worker_mode())


class LocalBatchSymbolicBuild:
    """Mixin making Keras 3.15's `fit`/`evaluate` work under MultiWorkerMirroredStrategy.

    Before `fit`/`evaluate`, Keras takes the first distributed batch and averages it across replicas with
    `strategy.reduce("MEAN", batch)`, only to learn its shapes. MultiWorkerMirroredStrategy's `reduce` does not
    accept a nested batch (a dict of features): "Attempt to convert a value ({'input_ids': PerReplica...}) with
    an unsupported type (<class 'dict'>) to a Tensor". Here each feature's local replica value is used instead:
    same shapes, no cross-worker traffic, any strategy. (It overrides `Trainer._maybe_symbolic_build`.)
    """

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        if iterator is not None and getattr(self, "_distribute_strategy", None) is not None:
            strategy = self._distribute_strategy
            for _, _, batches in iterator:
                data_batch = tf.nest.map_structure(
                    lambda v: strategy.experimental_local_results(v)[0]
                    if isinstance(v, tf.distribute.DistributedValues) else v, next(batches))
                break
            iterator = None
        return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)


# ------------------------------------------------------------------------------------------------------------------
# Trackable objects (checkpoints and SavedModels).

def plain_trackable():
    """An empty node of a checkpoint or SavedModel object graph (TF's `AutoTrackable`, under `tf.__internal__`)."""
    return tf.__internal__.tracking.AutoTrackable()


def is_trackable(obj):
    """Whether `obj` takes part in TF's object graphs."""
    return isinstance(obj, tf.__internal__.tracking.Trackable)


def trackable_children(obj):
    """`obj`'s checkpoint children by name (TF's `Trackable._trackable_children`)."""
    return obj._trackable_children(save_type="checkpoint")


def keras_trackable_types():
    """The types a SavedModel mirror replaces: Keras variables, and Keras layers plus the auto-trackable
    wrappers Keras puts around their attributes (`KerasAutoTrackable`)."""
    try:
        from keras.src.backend.tensorflow.trackable import KerasAutoTrackable  # pylint: disable=import-outside-toplevel
        objects = (KerasAutoTrackable, keras.layers.Layer)
    except ImportError:  # pragma: no cover - layout of a future Keras
        objects = (keras.layers.Layer,)
    return keras.Variable, objects
