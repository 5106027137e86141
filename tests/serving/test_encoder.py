"""The encoder SavedModel in-process (albert_tf/serving/encoder.py): each signature serves what the Keras model
computes, the ids are checked in the graph, and the preprocessing export refuses what it cannot serve. The export
loaded by a fresh process and by TF Serving's REST rules: tests/serving/test_export.py (slow)."""

import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.model import AlbertForPretraining, AlbertModel, dummy_inputs
from albert_tf.serving.encoder import export_encoder, export_preprocessing
from albert_tf.serving.savedmodel import ExportError
from tests.helpers import SPM, tiny_config

FEATURES = {"input_ids": [[2, 40, 41, 42, 3, 0], [2, 50, 3, 60, 61, 3]],
            "input_mask": [[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]],
            "segment_ids": [[0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1]]}


def _ids(features):
    return {k: tf.constant(v, tf.int32) for k, v in features.items()}


@pytest.fixture(name="pretraining", scope="module")
def _pretraining(tmp_path_factory):
    model = AlbertForPretraining(tiny_config())
    model(dummy_inputs(num_predictions=1), training=False)
    export_dir = export_encoder(model, str(tmp_path_factory.mktemp("export") / "encoder"), tokenizer_file=SPM,
                                do_lower_case=False)
    return model, export_dir, tf.saved_model.load(export_dir)


def test_each_signature_serves_the_models_outputs(pretraining):
    model, _, loaded = pretraining
    assert sorted(loaded.signatures) == ["mlm", "serving_default", "sop", "tokenization_info"]
    features = _ids(FEATURES)
    expected = model.albert(features, training=False)
    served = loaded.signatures["serving_default"](**features)
    assert sorted(served) == ["pooled_output", "sequence_output"]
    for name in served:
        assert served[name].dtype == tf.float32
        np.testing.assert_allclose(served[name].numpy(), expected[name].numpy(), atol=1e-5)
    positions = tf.constant([[1, 2], [3, 5]], tf.int32)
    mlm = loaded.signatures["mlm"](**features, masked_lm_positions=positions)["mlm_logits"]
    np.testing.assert_allclose(mlm.numpy(), model({**features, "masked_lm_positions": positions},
                                                  training=False)["mlm_logits"].numpy(), atol=1e-4)
    sop = loaded.signatures["sop"](**features)["sop_log_probs"]
    logits = model.seq_relationship(expected["pooled_output"])
    np.testing.assert_allclose(sop.numpy(), tf.nn.log_softmax(logits, axis=-1).numpy(), atol=1e-5)
    assert sop.shape == (2, 2)


def test_the_tokenizer_travels_with_the_export(pretraining):
    _, export_dir, loaded = pretraining
    info = loaded.signatures["tokenization_info"]()
    path = info["vocab_file"].numpy().decode()
    assert path.startswith(export_dir) and os.path.basename(path) == os.path.basename(SPM)
    with open(path, "rb") as copy, open(SPM, "rb") as original:
        assert copy.read() == original.read()
    assert bool(info["do_lower_case"].numpy()) is False


@pytest.mark.parametrize("signature", ["serving_default", "sop"])
def test_ids_are_checked_in_the_graph(pretraining, signature):
    _, _, loaded = pretraining
    serve = loaded.signatures[signature]
    too_long = {k: tf.ones([1, 129], tf.int32) for k in FEATURES}
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"sequence length exceeds max_position_embeddings "
                                                            r"\(128\)"):
        serve(**too_long)
    for bad in (tiny_config().vocab_size, -1):
        outside = {**FEATURES, "input_ids": [[2, bad, 3, 0, 0, 0], FEATURES["input_ids"][1]]}
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"input_ids outside the vocabulary \[0, "):
            serve(**_ids(outside))


def test_a_plain_encoder_has_no_pretraining_signatures_nor_tokenizer(tmp_path):
    model = AlbertModel(tiny_config())  # not built yet: the export builds it
    loaded = tf.saved_model.load(export_encoder(model, str(tmp_path / "encoder")))
    assert sorted(loaded.signatures) == ["serving_default"]
    features = _ids(FEATURES)
    np.testing.assert_allclose(loaded.serve(**features)["pooled_output"].numpy(),
                               model(features, training=False)["pooled_output"].numpy(), atol=1e-5)


def test_the_preprocessing_export_refuses_what_it_cannot_serve(tmp_path):
    with pytest.raises(ExportError, match="needs the tokenizer: spm_model_file"):
        export_preprocessing(str(tmp_path / "p"))
    with pytest.raises(ExportError, match="^max_seq_length 256 exceeds max_position_embeddings 128$"):
        export_preprocessing(str(tmp_path / "p"), spm_model_file=SPM, max_seq_length=256,
                             max_position_embeddings=128)
    assert not (tmp_path / "p").exists()


def test_every_signature_runs_the_encoder_in_inference_mode(tmp_path):
    """With dropout in the config, each signature serves the model without dropout: the same outputs on every
    call, equal to the Keras model's in inference mode; and the restored object keeps each function."""
    model = AlbertForPretraining(tiny_config(hidden_dropout_prob=0.5, attention_probs_dropout_prob=0.5))
    loaded = tf.saved_model.load(export_encoder(model, str(tmp_path / "encoder")))  # built by the export
    features = _ids(FEATURES)
    positions = tf.constant([[1, 2], [3, 5]], tf.int32)
    expected = model({**features, "masked_lm_positions": positions}, training=False)
    for _ in range(2):
        served = loaded.serve(**features)
        np.testing.assert_allclose(served["sequence_output"].numpy(), expected["sequence_output"].numpy(),
                                   atol=1e-5)
        mlm = loaded.mlm(**features, masked_lm_positions=positions)["mlm_logits"]
        np.testing.assert_allclose(mlm.numpy(), expected["mlm_logits"].numpy(), atol=1e-4)
        sop = loaded.sop(**features)["sop_log_probs"]
        np.testing.assert_allclose(sop.numpy(), tf.nn.log_softmax(expected["sop_logits"], -1).numpy(), atol=1e-5)


def test_the_mlm_signature_checks_its_ids(pretraining):
    _, _, loaded = pretraining
    outside = {**FEATURES, "input_ids": [[2, tiny_config().vocab_size, 3, 0, 0, 0], FEATURES["input_ids"][1]]}
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"input_ids outside the vocabulary \[0, "):
        loaded.signatures["mlm"](**_ids(outside), masked_lm_positions=tf.constant([[1], [1]], tf.int32))


def test_by_default_the_tokenizer_lowercases_and_an_export_is_not_overwritten(tmp_path):
    model = AlbertModel(tiny_config())
    model(dummy_inputs(), training=False)
    export_dir = export_encoder(model, str(tmp_path / "encoder"), tokenizer_file=SPM)
    info = tf.saved_model.load(export_dir).signatures["tokenization_info"]()
    assert bool(info["do_lower_case"].numpy()) is True
    with pytest.raises(ExportError, match="exists"):
        export_encoder(model, export_dir)
    assert export_encoder(model, export_dir, overwrite=True) == export_dir


def test_the_preprocessing_export_by_default_lowercases_into_rows_of_128(tmp_path):
    from albert_tf.text.tokenization import FullTokenizer  # pylint: disable=import-outside-toplevel

    loaded = tf.saved_model.load(export_preprocessing(str(tmp_path / "p"), spm_model_file=SPM))
    served = loaded.signatures["serving_default"](text=tf.constant(["Hello WORLD, Again."]))
    assert served["input_ids"].shape == (1, 128)
    tokenizer = FullTokenizer(spm_model_file=SPM, do_lower_case=True)
    ids = tokenizer.convert_tokens_to_ids(["[CLS]"] + tokenizer.tokenize("Hello WORLD, Again.") + ["[SEP]"])
    assert served["input_ids"].numpy()[0, :len(ids)].tolist() == ids
    assert not served["input_ids"].numpy()[0, len(ids):].any()
    with pytest.raises(ExportError, match="exists"):
        export_preprocessing(str(tmp_path / "p"), spm_model_file=SPM)


def test_the_preprocessing_export_may_fill_every_position(tmp_path):
    assert export_preprocessing(str(tmp_path / "p"), spm_model_file=SPM, max_seq_length=16,
                                max_position_embeddings=16) == str(tmp_path / "p")
