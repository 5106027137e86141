"""Which folders are keras-hub ALBERT presets (albert_tf/checkpoints/keras_hub_format.py): only a folder whose
config.json is a JSON object naming `AlbertBackbone`; a Hugging Face folder, a damaged or foreign config.json and
a file are not. A preset written is never written over an existing one unless asked."""

import json

import pytest

from albert_tf.checkpoints import keras_hub_format
from albert_tf.fileio import OutputError
from albert_tf.model import AlbertModel, dummy_inputs
from tests.helpers import SPM, tiny_config


@pytest.mark.parametrize("config, is_preset", [
    ({"class_name": "AlbertBackbone", "config": {}}, True),
    ({"class_name": "BertBackbone"}, False),
    ({"model_type": "albert", "architectures": ["AlbertModel"]}, False),  # a Hugging Face folder's
    (["AlbertBackbone"], False),
    (None, False),  # not JSON
])
def test_only_a_config_naming_albert_backbone_makes_a_preset(tmp_path, config, is_preset):
    path = tmp_path / "config.json"
    path.write_bytes(b"\xff\xfe not json" if config is None else json.dumps(config).encode())
    assert keras_hub_format.is_keras_hub_dir(str(tmp_path)) is is_preset
    assert keras_hub_format.is_keras_hub_dir(str(path)) is False  # the file itself
    assert keras_hub_format.is_keras_hub_dir(str(tmp_path / "absent")) is False


def test_writing_over_an_existing_preset_needs_overwrite(tmp_path):
    model = AlbertModel(tiny_config())
    model(dummy_inputs(), training=False)
    target = tmp_path / "preset"
    target.mkdir()
    (target / "config.json").write_text(json.dumps({"class_name": "AlbertBackbone"}))
    with pytest.raises(OutputError, match=f"^cannot write {target}: it exists already"):
        keras_hub_format.FORMAT.write(model, str(target), spm_model_file=SPM)
    assert json.loads((target / "config.json").read_text()) == {"class_name": "AlbertBackbone"}
