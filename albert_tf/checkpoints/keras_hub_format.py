"""keras-hub ALBERT (`keras_hub.models.AlbertBackbone`) weights and config, in terms of the TF1 names.

keras-hub presets are directories with a keras-hub `config.json` and `model.weights.h5`; they load offline
from a local directory. Its Transformer blocks are the same keras-hub layer this project uses, so the
mapping is one-to-one. `FORMAT` is the format: a preset directory or a live `AlbertBackbone` read, a preset
written (by `keras_hub_writer`).
"""

import json
import os

from albert_tf.checkpoints.errors import CorruptCheckpointError, reason
from albert_tf.checkpoints.keras_hub_names import backbone_arrays
from albert_tf.checkpoints.name_table import NamedFormat, model_arrays
from albert_tf.config import AlbertConfig


def is_keras_hub_dir(path):
    """True for a keras-hub preset directory holding an ALBERT backbone."""
    config_file = os.path.join(path, "config.json")
    if not (os.path.isdir(path) and os.path.isfile(config_file)):
        return False
    try:
        with open(config_file, "rb") as f:
            values = json.loads(f.read().decode("utf-8"))
    except (ValueError, OSError):  # not JSON (or not text): not a keras-hub preset
        return False
    return isinstance(values, dict) and values.get("class_name") == "AlbertBackbone"


def config_from_keras_hub(c):
    """The `AlbertConfig` equivalent of a keras-hub `AlbertBackbone`'s config `c` (its `get_config()`, as a
    preset's `config.json` holds it under "config")."""
    return AlbertConfig(
        vocab_size=c["vocabulary_size"], embedding_size=c["embedding_dim"], hidden_size=c["hidden_dim"],
        num_hidden_layers=c["num_layers"], num_hidden_groups=c["num_groups"],
        inner_group_num=c["num_inner_repetitions"], num_attention_heads=c["num_heads"],
        intermediate_size=c["intermediate_dim"], hidden_dropout_prob=c["dropout"],
        attention_probs_dropout_prob=c["dropout"], max_position_embeddings=c["max_sequence_length"],
        type_vocab_size=c["num_segments"])


def preset_config(path):
    """The `AlbertConfig` of the preset directory `path`, from its `config.json` (no weights are loaded). Raises
    `CorruptCheckpointError` naming the preset when that file does not describe an ALBERT backbone."""
    try:
        with open(os.path.join(path, "config.json"), "rb") as f:
            return config_from_keras_hub(json.loads(f.read().decode("utf-8"))["config"])
    except KeyError as err:
        raise CorruptCheckpointError(f"cannot read the keras-hub preset {path}: its config.json has no "
                                     f"{err.args[0]!r}") from None
    except (ValueError, OSError, TypeError) as err:
        raise CorruptCheckpointError(f"cannot read the keras-hub preset {path}: {reason(err)}") from None


def load_backbone(path):
    """Loads a keras-hub ALBERT backbone from a local preset directory (no network)."""
    import keras_hub  # pylint: disable=import-outside-toplevel

    try:
        return keras_hub.models.AlbertBackbone.from_preset(path)
    except (ValueError, OSError, KeyError, TypeError) as err:  # a damaged config.json or model.weights.h5
        raise CorruptCheckpointError(f"cannot read the keras-hub preset {path}: {reason(err)}") from None


class KerasHubFormat(NamedFormat):
    """keras-hub ALBERT presets (and live backbones), read and written by the original's names."""

    name = "keras_hub"
    description = "a keras-hub ALBERT preset directory, or a live keras_hub.models.AlbertBackbone"

    def detect(self, path):
        if not isinstance(path, str):
            return type(path).__name__ == "AlbertBackbone"
        return is_keras_hub_dir(path)

    def read_config(self, path):
        return config_from_keras_hub(path.get_config()) if not isinstance(path, str) else preset_config(path)

    def read(self, path, names=None, config=None):
        backbone = path if not isinstance(path, str) else load_backbone(path)
        return backbone_arrays(backbone)

    def write(self, model, path, exclude_ids=frozenset(), spm_model_file=None, num_labels=None, overwrite=False,
              what=None):
        """A preset of `model` with the tokenizer `spm_model_file` (and, with `num_labels`, its classifier head):
        `keras_hub_writer.write_preset`."""
        from albert_tf.checkpoints import keras_hub_writer  # pylint: disable=import-outside-toplevel  (keras-hub)

        return keras_hub_writer.write_preset(path, model.config, model_arrays(model, exclude_ids), spm_model_file,
                                             num_labels=num_labels, overwrite=overwrite, what=what)


FORMAT = KerasHubFormat()
