"""albert_tf: ALBERT (Lan et al., 2019) for TensorFlow 2 and Keras 3, compatible with the original release.

The public names, and the subpackages as attributes (`albert_tf.model`), are imported on first use, so tools
that need only the tokenizer or the data code (e.g. `create_pretraining_data.py`) do not pay for importing Keras.
"""

import importlib
import importlib.util
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

_PUBLIC = {
    "AlbertConfig": "albert_tf.config",
    "ConfigError": "albert_tf.config",
    "AlbertModel": "albert_tf.model",
    "AlbertForPretraining": "albert_tf.model",
    "AlbertClassifier": "albert_tf.model",
    "AlbertForMultipleChoice": "albert_tf.model",
    "AlbertForSquad": "albert_tf.model",
    "text_classifier": "albert_tf.tasks.classification",
    "FullTokenizer": "albert_tf.text.tokenization",
    "encode_pair": "albert_tf.text.tokenization",
    "load_checkpoint": "albert_tf.checkpoints",
    "save_checkpoint": "albert_tf.checkpoints",
}

__all__ = sorted(_PUBLIC)
__version__ = "0.2.0"


def __getattr__(name):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    # A subpackage or module (`albert_tf.model.set_remat` right after `import albert_tf`), imported on first use.
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'albert_tf' has no attribute {name!r}")
