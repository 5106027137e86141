"""One harness for every model: build lazily, call (eagerly and in a tf.function), round-trip `get_config`,
`.keras` save/load and the checkpoint formats, each giving back the same outputs."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints import load_checkpoint, save_checkpoint
from albert_tf.model import AlbertClassifier, AlbertForMultipleChoice, AlbertForPretraining, AlbertForSquad, AlbertModel
from tests.helpers import randomize, tiny_config

MODELS = {
    "encoder": lambda c: AlbertModel(c),
    "pretraining": lambda c: AlbertForPretraining(c),
    "classifier": lambda c: AlbertClassifier(c, num_labels=3),
    "regression": lambda c: AlbertClassifier(c, num_labels=1),
    "multiple_choice": lambda c: AlbertForMultipleChoice(c, num_choices=4),
    "squad_v1": lambda c: AlbertForSquad(c),
    "squad_v2": lambda c: AlbertForSquad(c, version_2=True, start_n_top=3, end_n_top=2),
}


def _inputs(kind, batch=2, seq=12):
    rng = np.random.default_rng(1)
    ids = rng.integers(5, 30000, (batch, seq)).astype(np.int32)
    mask = np.ones((batch, seq), np.int32)
    mask[1, 9:] = 0
    segments = np.zeros((batch, seq), np.int32)
    segments[:, 6:] = 1
    inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": segments}
    if kind == "pretraining":
        inputs["masked_lm_positions"] = np.array([[1, 3, 5], [2, 4, 8]], np.int32)
    if kind == "multiple_choice":
        inputs = {k: np.stack([v, v[::-1]], axis=1) for k, v in inputs.items()}
    return {k: tf.constant(v) for k, v in inputs.items()}


def _flat(outputs):
    if isinstance(outputs, dict):
        return {k: _flat(v) for k, v in outputs.items() if k != "encoder_outputs"}
    return np.asarray(outputs)


def _assert_same(a, b, atol=1e-6):
    a, b = _flat(a), _flat(b)
    if isinstance(a, dict):
        assert set(a) == set(b)
        for key in a:
            np.testing.assert_allclose(a[key], b[key], atol=atol, err_msg=key)
    else:
        np.testing.assert_allclose(a, b, atol=atol)


@pytest.fixture(params=sorted(MODELS))
def built(request):
    kind = request.param
    model = MODELS[kind](tiny_config())
    assert not model.weights  # weights are created lazily, on the first call
    inputs = _inputs(kind)
    model(inputs, training=False)
    randomize(model, seed=3)
    return kind, model, inputs, model(inputs, training=False)


@pytest.mark.slow
def test_call_is_deterministic_and_traceable(built):
    kind, model, inputs, outputs = built
    _assert_same(model(inputs, training=False), outputs)
    _assert_same(tf.function(lambda x: model(x, training=False))(inputs), outputs, atol=1e-5)


@pytest.mark.slow
def test_get_config_round_trip(built):
    kind, model, inputs, outputs = built
    clone = type(model).from_config(model.get_config())
    clone(inputs, training=False)
    clone.set_weights(model.get_weights())
    assert clone.get_config() == model.get_config()
    _assert_same(clone(inputs, training=False), outputs)


def test_keras_file_round_trip(built, tmp_path):
    kind, model, inputs, outputs = built
    path = str(tmp_path / f"{kind}.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    _assert_same(loaded(inputs, training=False), outputs)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["original", "native"])
def test_checkpoint_round_trip(built, tmp_path, fmt):
    kind, model, inputs, outputs = built
    path = save_checkpoint(model, str(tmp_path / fmt / "model.ckpt"), fmt)
    fresh = MODELS[kind](tiny_config())
    result = load_checkpoint(fresh, path)
    assert not result.missing and not result.unused, result
    _assert_same(fresh(inputs, training=False), outputs)
