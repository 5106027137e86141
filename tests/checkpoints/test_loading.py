"""`load_checkpoint` and `save_checkpoint` themselves (albert_tf/checkpoints/loading.py): weights left at their
initial values are logged by name, a damaged TF checkpoint given by its folder is named by the prefix read, the
values reach variables of another dtype, and a format that cannot save a model is refused naming those that can."""

import logging

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints import CheckpointError, CorruptCheckpointError, load_checkpoint, save_checkpoint
from albert_tf.model import AlbertForPretraining, AlbertModel, dummy_inputs
from tests.helpers import tiny_config


def _built(model_class, dtype=None):
    model = model_class(tiny_config(), dtype=dtype) if dtype else model_class(tiny_config())
    model(dummy_inputs(num_predictions=1) if model_class is AlbertForPretraining else dummy_inputs(), training=False)
    return model


def test_weights_the_checkpoint_lacks_are_logged_by_name(tmp_path, caplog):
    prefix = str(tmp_path / "encoder")
    save_checkpoint(_built(AlbertModel), prefix, "original")
    with caplog.at_level(logging.WARNING):
        result = load_checkpoint(_built(AlbertForPretraining), prefix)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert result.missing and warned == [f"Not in {prefix}, left at their initial values: "
                                         f"{', '.join(result.missing)}"]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        load_checkpoint(_built(AlbertModel), prefix)  # nothing missing: nothing logged
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize("fmt, prefix_name", [("original", "model.ckpt"), ("native", "ckpt-3")])
def test_a_damaged_checkpoint_given_by_its_folder_names_the_prefix_read(tmp_path, fmt, prefix_name):
    prefix = str(tmp_path / "run" / prefix_name)
    save_checkpoint(_built(AlbertModel), prefix, fmt)
    data = tf.io.gfile.glob(prefix + ".data-*")[0]
    with open(data, "r+b") as f:
        f.truncate(100)
    with pytest.raises(CorruptCheckpointError, match=f"^checkpoint {prefix} is (truncated|corrupt)"):
        load_checkpoint(_built(AlbertModel), str(tmp_path / "run"))


def test_values_reach_variables_of_another_dtype(tmp_path):
    source = _built(AlbertModel)
    prefix = str(tmp_path / "model.ckpt")
    save_checkpoint(source, prefix, "original")
    half = _built(AlbertModel, dtype="bfloat16")
    load_checkpoint(half, prefix)
    kernel = half.embeddings.word_embeddings.embeddings
    assert kernel.dtype == tf.bfloat16
    np.testing.assert_allclose(kernel.numpy().astype(np.float32),
                               source.embeddings.word_embeddings.embeddings.numpy(), rtol=1e-2, atol=1e-3)


def test_a_format_that_cannot_save_a_model_is_refused_naming_those_that_can(tmp_path):
    for fmt in ("keras_hub", "model_garden", "pytorch"):
        with pytest.raises(CheckpointError, match=f"^unknown checkpoint format '{fmt}'; known: huggingface, native, "
                                                  "original$"):
            save_checkpoint(_built(AlbertModel), str(tmp_path / fmt), fmt)
    assert not list(tmp_path.iterdir())
