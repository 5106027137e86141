"""`TaskModel`: what every fine-tuning model shares (the encoder under `albert`, head dropout, serialisation)."""

import keras

from albert_tf.model.encoder import AlbertModel, as_config


class TaskModel(keras.Model):
    """Base of the fine-tuning models: an `AlbertModel` under `albert`, a dropout before the head, and
    serialisation through the config plus the head's arguments (`_head_args`)."""

    def __init__(self, config, dropout_prob=0.1, **kwargs):
        super().__init__(**kwargs)
        self.config = as_config(config)
        self.dropout_prob = dropout_prob
        self.albert = AlbertModel(self.config, dtype=self.dtype_policy, name="albert")
        self.dropout = keras.layers.Dropout(dropout_prob, dtype=self.dtype_policy)

    def _head_args(self):
        return {}

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict(), "dropout_prob": self.dropout_prob,
                **self._head_args()}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        return cls(as_config(config.pop("config")), **config)
