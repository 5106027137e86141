"""The registry's formats describe themselves, and every list of formats is made from them: the error for a path no
format recognises, the table of docs/compatibility.md (which must agree with the registry), and what each format
says about the config it carries (`read_config`)."""

import json
import os
import re

import keras_hub
import pytest

from albert_tf.checkpoints import (CheckpointNotFoundError, CorruptCheckpointError, detect_format, registry,
                                   save_checkpoint)
from albert_tf.checkpoints.keras_hub_format import config_from_keras_hub
from albert_tf.config import AlbertConfig
from albert_tf.model import AlbertForPretraining, dummy_inputs
from tests.helpers import REPO

COMPATIBILITY = os.path.join(REPO, "docs", "compatibility.md")


def _config():
    return AlbertConfig(vocab_size=60, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)


def _model():
    model = AlbertForPretraining(_config())
    model(dummy_inputs(num_predictions=1), training=False)
    return model


def registry_rows():
    """The table of formats as the registry says it: (name, description, save_checkpoint, --output_format)."""
    return [(f"`{f.name}`", f.description, "yes" if f.saves_models else "no", "yes" if f.writable else "no")
            for f in registry.REGISTRY]


def docs_rows(text):
    """The rows of the table of formats under "## Checkpoint formats" (the first table there)."""
    section = text.split("\n## Checkpoint formats\n", 1)[1]
    lines = section.split("\n| format |", 1)[1].splitlines()[2:]
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append(tuple(cell.strip() for cell in line.strip("|").split(" | ")))
    return rows


def test_every_format_names_and_describes_itself():
    assert [f.name for f in registry.REGISTRY] == list(registry.FORMATS)
    assert len(set(registry.FORMATS)) == len(registry.FORMATS)
    for fmt in registry.REGISTRY:
        assert fmt.description and "\n" not in fmt.description and "|" not in fmt.description, fmt.name
    assert len({f.description for f in registry.REGISTRY}) == len(registry.REGISTRY)  # each its own
    assert [f.name for f in registry.REGISTRY if f.writable] == ["huggingface", "keras_hub", "native", "original"]


def test_the_docs_table_of_formats_is_the_registry():
    with open(COMPATIBILITY, encoding="utf-8") as f:
        documented = docs_rows(f.read())
    table = "\n".join("| " + " | ".join(row) + " |" for row in registry_rows())
    assert documented == registry_rows(), f"docs/compatibility.md's table of formats should read:\n{table}"


def test_the_docs_check_sees_a_disagreement():
    with open(COMPATIBILITY, encoding="utf-8") as f:
        text = f.read()
    fmt = registry.REGISTRY[2]
    changed = text.replace(f"| `{fmt.name}` | {fmt.description} |", f"| `{fmt.name}` | {fmt.description}. |")
    assert changed != text and docs_rows(changed) != registry_rows()
    dropped = re.sub(rf"\n\| `{fmt.name}` \|[^\n]*", "", text)
    assert docs_rows(dropped) != registry_rows()


def test_a_path_no_format_recognises_lists_every_format_in_order(tmp_path):
    path = str(tmp_path / "nowhere")
    with pytest.raises(CheckpointNotFoundError) as err:
        detect_format(path)
    message = str(err.value)
    assert message.startswith(f"no checkpoint found at {path!r} (expected ") and "\n" not in message
    places = [message.index(f"{f.description} ({f.name})") for f in registry.REGISTRY]
    assert places == sorted(places)


def test_only_huggingface_and_keras_hub_carry_their_config(tmp_path):
    model = _model()
    for name in ("original", "native", "huggingface"):
        save_checkpoint(model, str(tmp_path / name / "ckpt"), name)
        assert registry.get(name).read_config(str(tmp_path / name / "ckpt")) == (
            _config() if name == "huggingface" else None), name
    backbone = keras_hub.models.AlbertBackbone(vocabulary_size=60, num_layers=4, num_heads=2, embedding_dim=8,
                                               hidden_dim=16, intermediate_dim=32, num_groups=2,
                                               max_sequence_length=16)
    fmt = registry.get("keras_hub")
    expected = config_from_keras_hub(backbone.get_config())
    assert (expected.num_hidden_layers, expected.num_hidden_groups, expected.hidden_size) == (4, 2, 16)
    assert fmt.read_config(backbone) == expected
    preset = str(tmp_path / "preset")
    backbone.save_to_preset(preset)
    os.remove(os.path.join(preset, "model.weights.h5"))  # the config is read without the weights
    assert fmt.read_config(preset) == expected


def test_a_keras_hub_config_that_is_no_albert_backbone_names_the_preset(tmp_path):
    preset = tmp_path / "preset"
    preset.mkdir()
    (preset / "config.json").write_text(json.dumps({"class_name": "AlbertBackbone", "config": {"num_layers": 2}}))
    assert detect_format(str(preset)) == "keras_hub"
    with pytest.raises(CorruptCheckpointError, match=rf"keras-hub preset {re.escape(str(preset))}: its config.json "
                                                     r"has no 'vocabulary_size'"):
        registry.get("keras_hub").read_config(str(preset))


def test_a_load_summary_counts_and_names_up_to_five_missing_weights():
    from albert_tf.checkpoints.format import LoadResult  # pylint: disable=import-outside-toplevel

    assert str(LoadResult("original", ["a", "b"], [], ["u"])) == ("original checkpoint: 2 weights loaded, 0 missing, "
                                                                 "1 unused")
    five = [f"w{i}" for i in range(5)]
    assert str(LoadResult("native", [], five, [])) == ("native checkpoint: 0 weights loaded, 5 missing "
                                                      "(w0, w1, w2, w3, w4), 0 unused")
    assert str(LoadResult("native", [], five + ["w5"], [])) == ("native checkpoint: 0 weights loaded, 6 missing "
                                                               "(w0, w1, w2, w3, w4...), 0 unused")


def test_a_model_without_weights_is_built_by_a_forward_pass_of_its_own_shape(tiny_config):
    from albert_tf.checkpoints.format import ensure_built  # pylint: disable=import-outside-toplevel
    from albert_tf.model import AlbertForMultipleChoice  # pylint: disable=import-outside-toplevel

    for model in (AlbertForMultipleChoice(tiny_config, dropout_prob=0.0), AlbertForPretraining(tiny_config)):
        assert not model.weights
        ensure_built(model)
        count = len(model.weights)
        assert count > 0
        ensure_built(model)  # built already: nothing changes
        assert len(model.weights) == count
