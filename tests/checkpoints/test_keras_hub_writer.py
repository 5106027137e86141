"""The keras-hub preset writer in-process (albert_tf/checkpoints/keras_hub_writer.py): a classifier preset's head,
preprocessor length and files as keras-hub reads them back, and the errors for a head, tokenizer or backbone that
does not fit. The converter's end-to-end runs: tests/checkpoints/test_keras_hub_out.py."""

import json
import os

import keras_hub
import numpy as np
import pytest

from albert_tf import fileio
from albert_tf.checkpoints import keras_hub_writer, model_arrays
from albert_tf.checkpoints.errors import CheckpointMismatchError
from albert_tf.model import AlbertModel, dummy_inputs
from tests.helpers import SPM, randomize, tiny_config


@pytest.fixture(name="arrays", scope="module")
def _arrays():
    config = tiny_config()
    model = AlbertModel(config)
    model(dummy_inputs(), training=False)
    randomize(model, seed=5)
    rng = np.random.default_rng(0)
    head = {"output_weights": rng.normal(size=(3, config.hidden_size)).astype(np.float32),
            "output_bias": rng.normal(size=(3,)).astype(np.float32)}
    return config, {**model_arrays(model), **head}


def test_a_classifier_preset_holds_the_head_the_length_and_its_files(arrays, tmp_path):
    config, weights = arrays
    output = keras_hub_writer.write_preset(str(tmp_path / "cls"), config, weights, SPM, num_labels=3)
    assert output == str(tmp_path / "cls")
    written = {os.path.relpath(os.path.join(d, f), output) for d, _, fs in os.walk(output) for f in fs}
    assert {name for name in written if not name.startswith(".albert_tf")} == {  # less the project's own manifest
        "config.json", "model.weights.h5", "metadata.json", "tokenizer.json", "assets/tokenizer/vocabulary.spm",
        "task.json", "task.weights.h5", "preprocessor.json", keras_hub_writer.CONFIG_NAME}
    task = keras_hub.models.AlbertTextClassifier.from_preset(output)
    np.testing.assert_array_equal(task.output_dense.kernel.numpy(), weights["output_weights"].T)
    np.testing.assert_array_equal(task.output_dense.bias.numpy(), weights["output_bias"])
    table = task.backbone.get_layer("token_embedding").embeddings.numpy()
    np.testing.assert_array_equal(table, weights["bert/embeddings/word_embeddings"])
    assert task.preprocessor.sequence_length == 128  # the smaller of 512 and max_position_embeddings
    with open(os.path.join(output, keras_hub_writer.CONFIG_NAME), encoding="utf-8") as f:
        assert json.load(f) == json.loads(config.to_json_string())
    with pytest.raises(fileio.OutputError, match=r"cannot write .*cls: it exists already$"):  # kept by default
        keras_hub_writer.write_preset(output, config, weights, SPM)
    short = keras_hub_writer.write_preset(str(tmp_path / "short"), config, weights, SPM, num_labels=3,
                                          sequence_length=32)
    assert keras_hub.models.AlbertTextClassifier.from_preset(short).preprocessor.sequence_length == 32
    long_config = tiny_config(max_position_embeddings=600)
    long_model = AlbertModel(long_config)
    long_model(dummy_inputs(), training=False)
    longest = keras_hub_writer.write_preset(str(tmp_path / "long"), long_config,
                                            {**model_arrays(long_model), **{k: weights[k] for k in (
                                                "output_weights", "output_bias")}}, SPM, num_labels=3)
    assert keras_hub.models.AlbertTextClassifier.from_preset(longest).preprocessor.sequence_length == 512


def test_a_head_tokenizer_or_backbone_that_does_not_fit_is_one_error(arrays, tmp_path):
    config, weights = arrays
    backbone_only = {k: v for k, v in weights.items() if not k.startswith("output_")}
    with pytest.raises(CheckpointMismatchError, match="^the model has no classifier head"):
        keras_hub_writer.classifier_head(backbone_only, 3, config.hidden_size)
    with pytest.raises(CheckpointMismatchError, match="^the model has no classifier head"):
        keras_hub_writer.classifier_head({**backbone_only, "output_weights": weights["output_weights"]}, 3, 32)
    with pytest.raises(CheckpointMismatchError, match=r"output_weights has shape \[3, 32\], expected \[2, 32\] for "
                                                      r"2 labels$"):
        keras_hub_writer.classifier_head(weights, 2, config.hidden_size)
    with pytest.raises(CheckpointMismatchError, match=r"expected \[3, 32\]"):
        keras_hub_writer.classifier_head({**weights, "output_bias": np.zeros(4)}, 3, config.hidden_size)
    with pytest.raises(CheckpointMismatchError, match="has 30000 pieces but the model's vocab_size is 100"):
        keras_hub_writer.build_tokenizer(SPM, vocab_size=100)
    assert keras_hub_writer.build_tokenizer(SPM).vocabulary_size() == 30000
    assert keras_hub_writer.build_tokenizer(SPM, vocab_size=30000).vocabulary_size() == 30000
    with pytest.raises(CheckpointMismatchError, match="^the model lacks bert/embeddings/word_embeddings, which"):
        keras_hub_writer.build_backbone(config, {k: v for k, v in weights.items()
                                                 if k != "bert/embeddings/word_embeddings"})
    with pytest.raises(CheckpointMismatchError):
        keras_hub_writer.build_backbone(config, {**weights, "bert/embeddings/word_embeddings": np.zeros((3, 3))})
    assert not os.listdir(tmp_path)
