"""albert_tf: ALBERT (Lan et al., 2019) for TensorFlow 2 and Keras 3, compatible with the original release."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from albert_tf.config import AlbertConfig, ConfigError  # noqa: E402
from albert_tf.modeling import AlbertForPretraining, AlbertModel  # noqa: E402

__all__ = ["AlbertConfig", "ConfigError", "AlbertModel", "AlbertForPretraining"]
__version__ = "0.1.0"
