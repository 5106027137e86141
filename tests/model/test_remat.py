"""`SharedTransformerStack(remat=True)` (the scripts' `--remat`): blocks recomputed in the backward pass, same
gradients, same dropout masks."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.model import AlbertForPretraining, dummy_inputs, set_remat


def _model(dropout):
    config = AlbertConfig(vocab_size=60, embedding_size=8, hidden_size=16, num_hidden_layers=3,
                          num_hidden_groups=2, inner_group_num=2, num_attention_heads=2, intermediate_size=32,
                          max_position_embeddings=16, hidden_dropout_prob=dropout,
                          attention_probs_dropout_prob=dropout)
    model = AlbertForPretraining(config)
    model(dummy_inputs(num_predictions=1), training=False)
    rng = np.random.RandomState(0)
    for variable in model.trainable_variables:
        variable.assign(rng.normal(0, 0.3, tuple(variable.shape)).astype("float32")
                        + (1.0 if variable.path.endswith("gamma") else 0.0))
    return model


def _inputs():
    rng = np.random.RandomState(1)
    ids = rng.randint(0, 60, (2, 9)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    return {"input_ids": ids, "input_mask": mask, "segment_ids": (np.arange(9) >= 4).astype("int32")[None].repeat(2, 0),
            "masked_lm_positions": np.array([[1, 3, 5], [0, 2, 4]], "int32")}


def _gradient_fn(model, compile_mode):
    """loss and gradients of a training-mode pass (traced once: remat is read when tracing)."""
    def step(x):
        with tf.GradientTape() as tape:
            out = model(x, training=True)
            loss = tf.reduce_sum(tf.square(out["mlm_logits"])) + tf.reduce_sum(out["sop_logits"] ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        return [loss] + [tf.convert_to_tensor(g) for g in grads]

    if compile_mode != "eager":
        step = tf.function(step, jit_compile=compile_mode == "xla")
    return lambda x: [g.numpy() for g in step(x)]


def _seed_states(model):
    return [v for v in model.variables if v.path.endswith("seed_generator_state")]


@pytest.mark.parametrize("compile_mode", ["eager", "graph", pytest.param("xla", marks=pytest.mark.slow)])
def test_gradients_with_and_without_remat_are_identical(compile_mode):
    model = _model(dropout=0.2)
    inputs = _inputs()
    states = _seed_states(model)
    assert states  # dropout is on, so masks are drawn: a recomputation with other masks would show
    start = [s.numpy() for s in states]
    calls = []
    for group in model.albert.encoder.groups:
        for block in group:
            forward = block.forward
            block.forward = lambda *a, _f=forward, **k: (calls.append(1), _f(*a, **k))[1]

    plain = _gradient_fn(model, compile_mode)(inputs)
    plain_calls, after_plain = len(calls), [s.numpy() for s in states]
    for state, value in zip(states, start):
        state.assign(value)
    set_remat(model, True)
    recomputed_fn = _gradient_fn(model, compile_mode)
    recomputed = recomputed_fn(inputs)
    # Every block call but the last layer's ran once more (its recomputation in the backward pass) ...
    last_layer_calls = len(model.albert.encoder.groups[model.albert.encoder.group_of_layer(2)])
    assert len(calls) - plain_calls == 2 * plain_calls - last_layer_calls
    # ... drew the same masks, and advanced the seed generators as far as without remat.
    for a, b in zip(after_plain, [s.numpy() for s in states]):
        np.testing.assert_array_equal(a, b)
    # Equal up to float rounding (TF's graph optimiser arranges the two graphs' sums differently: observed
    # relative differences up to ~1e-5, with dropout 0 too) ...
    for i, (a, b) in enumerate(zip(plain, recomputed)):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-4 * max(1.0, np.abs(a).max()), err_msg=f"output {i}")
    # ... while other dropout masks (the next seeds) change them by orders of magnitude more.
    other = recomputed_fn(inputs)
    assert max(np.abs(a - b).max() / max(1.0, np.abs(a).max()) for a, b in zip(plain[1:], other[1:])) > 1e-2


def test_remat_changes_nothing_at_inference():
    model = _model(dropout=0.2)
    inputs = _inputs()
    expected = model(inputs, training=False)["sequence_output"].numpy()
    set_remat(model, True)
    np.testing.assert_array_equal(model(inputs, training=False)["sequence_output"].numpy(), expected)
    assert model.albert.encoder.get_config()["remat"] is True
