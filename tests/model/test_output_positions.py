"""The last layer computed only where a head reads it (`output_positions`, `heads_only`, the classifiers):
the same values as the full model, against the Hugging Face references and against the full computation,
with dropout and remat, forward and backward."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.model import (
    AlbertClassifier,
    AlbertForMultipleChoice,
    AlbertForPretraining,
    AlbertModel,
    set_heads_only,
    set_remat,
)
from albert_tf.model.layers import AlbertTransformerBlock, mask_bias
from tests.model.test_modeling import (
    ATOL,
    REFERENCE_NAMES,
    _built,
    _inputs,
    _load_reference,
    _np,
    _randomize,
    _small_config,
)

DROPOUT = {"hidden_dropout_prob": 0.2, "attention_probs_dropout_prob": 0.3}


def _gathered(values, positions):
    return np.take_along_axis(values, positions[:, :, None], axis=1)


class _SeedStates:
    """The model's dropout seed-generator states, to replay one training call's masks exactly."""

    def __init__(self, model):
        self.variables = list(model.non_trainable_variables)
        self.values = [v.numpy() for v in self.variables]

    def restore(self):
        for variable, value in zip(self.variables, self.values):
            variable.assign(value)


@pytest.mark.parametrize("name", REFERENCE_NAMES)
def test_heads_only_matches_hugging_face_reference(name):
    _, model, inputs, reference = _load_reference(name)
    raw = set_heads_only(model)(inputs, training=False)
    out = _np({k: v for k, v in raw.items() if k != "encoder_outputs"})
    for key in ("mlm_logits", "sop_logits", "pooled_output"):
        np.testing.assert_allclose(out[key], reference[key], rtol=0, atol=ATOL, err_msg=f"{name}: {key}")
    positions = inputs["masked_lm_positions"]
    np.testing.assert_allclose(out["sequence_output"], _gathered(reference["sequence_output"], positions),
                               rtol=0, atol=ATOL)
    last = raw["encoder_outputs"][-1].numpy()  # position 0 (for the pooler), then the masked positions
    np.testing.assert_allclose(last[:, 0], reference["sequence_output"][:, 0], rtol=0, atol=ATOL)
    np.testing.assert_array_equal(last[:, 1:], out["sequence_output"])
    np.testing.assert_allclose(out["embedding_output"], reference["embedding_output"], rtol=0, atol=ATOL)


def test_output_positions_shapes_and_rows():
    config = _small_config(num_hidden_layers=3, num_hidden_groups=2, inner_group_num=2)
    model = _built(AlbertModel, config)
    inputs = _inputs(batch=3, seq=9)
    positions = np.array([[1, 4], [8, 2], [0, 0]], np.int32)
    full = _np(model({k: inputs[k] for k in ("input_ids", "input_mask", "segment_ids")}))
    part = model({k: inputs[k] for k in ("input_ids", "input_mask", "segment_ids")}, output_positions=positions)
    assert tuple(part["sequence_output"].shape) == (3, 2, config.hidden_size)
    assert tuple(part["encoder_outputs"][-1].shape) == (3, 3, config.hidden_size)
    for layer in range(config.num_hidden_layers - 1):  # only the last layer is narrowed
        np.testing.assert_array_equal(part["encoder_outputs"][layer].numpy(), full["encoder_outputs"][layer])
    np.testing.assert_allclose(part["sequence_output"].numpy(), _gathered(full["sequence_output"], positions),
                               atol=1e-6)
    np.testing.assert_allclose(part["pooled_output"].numpy(), full["pooled_output"], atol=1e-6)


@pytest.mark.parametrize("with_dropout", [False, True])
def test_block_rows_equal_the_full_blocks_rows(with_dropout):
    """Dropout masks are drawn at the full shapes, so the rows match under the same seeds too."""
    block = AlbertTransformerBlock(32, 2, dropout=0.2, attention_dropout=0.3)
    x = tf.random.stateless_normal((2, 7, 16), seed=(1, 2))
    block.build(x.shape)
    mask = np.ones((2, 7), np.int32)
    mask[1, 5:] = 0
    bias = mask_bias(mask)
    seeds = block.draw_dropout_seeds(training=True) if with_dropout else None
    positions = np.array([[0, 6, 3], [2, 2, 5]], np.int32)
    full = block.forward(x, bias, seeds).numpy()
    rows = block.forward(x, bias, seeds, positions).numpy()
    np.testing.assert_allclose(rows, _gathered(full, positions), atol=1e-6)
    if with_dropout:  # the masks are really applied
        assert np.abs(full - block.forward(x, bias, None).numpy()).max() > 1e-2


@pytest.mark.parametrize("remat", [False, True])
def test_heads_only_training_step_equals_the_full_one(remat):
    """Same loss and gradients in a training call with dropout (same seeds), with and without remat."""
    config = _small_config(num_hidden_layers=3, num_hidden_groups=2, inner_group_num=2, **DROPOUT)
    model = set_remat(_built(AlbertForPretraining, config), remat)
    inputs = _inputs(batch=3, seq=9, positions=4)
    seeds = _SeedStates(model)

    def loss_and_grads(heads_only):
        seeds.restore()
        set_heads_only(model, heads_only)
        with tf.GradientTape() as tape:
            out = model(inputs, training=True)
            loss = tf.reduce_sum(out["mlm_logits"] ** 2) + tf.reduce_sum(out["sop_logits"] ** 2)
        return loss.numpy(), tape.gradient(loss, model.trainable_variables)

    loss_full, grads_full = loss_and_grads(False)
    loss_part, grads_part = loss_and_grads(True)
    np.testing.assert_allclose(loss_part, loss_full, rtol=1e-5)
    assert [g is None for g in grads_part] == [g is None for g in grads_full]
    for variable, a, b in zip(model.trainable_variables, grads_part, grads_full):
        if b is not None:
            np.testing.assert_allclose(tf.convert_to_tensor(a).numpy(), tf.convert_to_tensor(b).numpy(),
                                       rtol=1e-4, atol=1e-5, err_msg=variable.path)
    seeds.restore()
    set_heads_only(model, False)
    dropped = model(inputs, training=True)["mlm_logits"].numpy()
    assert np.abs(dropped - model(inputs, training=False)["mlm_logits"].numpy()).max() > 1e-2


def test_classifiers_equal_their_heads_on_the_full_encoder():
    config = _small_config(num_hidden_layers=3)
    inputs = {k: v for k, v in _inputs(batch=3, seq=9).items() if k != "masked_lm_positions"}
    classifier = _built(AlbertClassifier, config, num_labels=3)
    pooled = classifier.albert(inputs)["pooled_output"]
    np.testing.assert_allclose(classifier(inputs).numpy(), classifier.output_layer(pooled).numpy(), atol=1e-6)

    choice = AlbertForMultipleChoice(config, num_choices=2)
    stacked = {k: np.stack([v, v[::-1]], axis=1) for k, v in inputs.items()}  # [B, 2, T]
    choice(stacked)
    _randomize(choice, seed=1)
    flat = {k: v.reshape(-1, v.shape[-1]) for k, v in stacked.items()}
    expected = choice.output_layer(choice.albert(flat)["pooled_output"]).numpy().reshape(-1, 2)
    np.testing.assert_allclose(choice(stacked).numpy(), expected, atol=1e-6)


def test_output_positions_need_the_blocks_own_path():
    block = AlbertTransformerBlock(32, 2, normalize_first=True)
    x = keras.ops.ones((1, 4, 16))
    block.build(x.shape)
    with pytest.raises(ValueError, match="output_positions"):
        block(x, output_positions=np.zeros((1, 1), np.int32))
