"""ALBERT as Keras models: the encoder, the pretraining model and the task models (forward pass and loss only).

This package knows no file format, training loop or data pipeline.
"""

from albert_tf.model.classifier import AlbertClassifier, AlbertForMultipleChoice
from albert_tf.model.encoder import AlbertModel, dummy_inputs, set_remat
from albert_tf.model.pretraining import AlbertForPretraining, set_heads_only
from albert_tf.model.squad import AlbertForSquad

__all__ = ["AlbertClassifier", "AlbertForMultipleChoice", "AlbertForPretraining", "AlbertForSquad", "AlbertModel",
           "dummy_inputs", "set_heads_only", "set_remat"]
