"""The Keras ALBERT model: numerics against Hugging Face references, sharing, groups, serialisation,
dropout, tf.function / XLA, mixed precision and default inputs."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints import load_checkpoint
from albert_tf.config import AlbertConfig
from albert_tf.model import AlbertForPretraining, AlbertModel, dummy_inputs
from albert_tf.model.layers import (
    AlbertTransformerBlock,
    FactorizedEmbedding,
    MaskedLMHead,
    SharedTransformerStack,
    gelu_erf,
    gelu_tanh,
)
from tests.helpers import FIXTURES_DIR

REFERENCE = os.path.join(FIXTURES_DIR, "reference")
REFERENCE_NAMES = ("single_group", "groups2_inner2", "exact_gelu")
INPUT_KEYS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
OUTPUT_KEYS = ("sequence_output", "pooled_output", "embedding_output", "mlm_logits", "sop_logits")
ATOL = 1e-5


def _load_reference(name):
    """(config, model loaded from the Hugging Face fixture, inputs, reference outputs)."""
    directory = os.path.join(REFERENCE, name)
    config = AlbertConfig.from_json_file(os.path.join(directory, "albert_config.json"))
    model = AlbertForPretraining(config)
    result = load_checkpoint(model, directory)
    assert not result.missing and not result.unused, result
    reference = dict(np.load(os.path.join(directory, "reference.npz")))
    inputs = {k: reference[k] for k in INPUT_KEYS}
    return config, model, inputs, reference


@pytest.fixture(scope="module")
def grouped():
    """The groups2_inner2 fixture (2 groups of 2 blocks, 4 layers), loaded once for this module."""
    return _load_reference("groups2_inner2")


def _array(value):
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value).astype(np.float32)


def _np(outputs):
    """Outputs as float32 numpy arrays; `encoder_outputs` stacked to [L, B, T, H]."""
    return {key: np.stack([_array(v) for v in value]) if key == "encoder_outputs" else _array(value)
            for key, value in outputs.items()}


def _inputs(batch=2, seq=7, vocab=50, positions=3, seed=0):
    rng = np.random.RandomState(seed)
    ids = rng.randint(0, vocab, (batch, seq)).astype("int32")
    mask = np.ones_like(ids)
    mask[1:, seq - 2:] = 0
    segments = np.zeros_like(ids)
    segments[:, seq // 2:] = 1
    lm_positions = rng.randint(0, seq, (batch, positions)).astype("int32")
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments, "masked_lm_positions": lm_positions}


def _small_config(**overrides):
    values = dict(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=32, max_position_embeddings=16)
    values.update(overrides)
    return AlbertConfig(**values)


def _randomize(model, seed=0):
    """Random values for every weight (LayerNorm gammas near 1, biases non-zero), so nothing is trivial."""
    rng = np.random.RandomState(seed)
    for variable in model.weights:
        shape = tuple(variable.shape)
        value = rng.normal(0.0, 0.2, shape)
        if variable.path.endswith("gamma"):
            value += 1.0
        variable.assign(value.astype(np.dtype(variable.dtype)))


def _built(cls, config, seed=0, **kwargs):
    model = cls(config, **kwargs)
    model(dummy_inputs(num_predictions=1 if cls is AlbertForPretraining else None), training=False)
    _randomize(model, seed)
    return model


# ---------------------------------------------------------------- numerics
@pytest.mark.parametrize("name", REFERENCE_NAMES)
def test_matches_hugging_face_reference(name):
    config, model, inputs, reference = _load_reference(name)
    out = _np(model(inputs, training=False))
    for key in OUTPUT_KEYS + ("encoder_outputs",):
        np.testing.assert_allclose(out[key], reference[key], rtol=0, atol=ATOL, err_msg=f"{name}: {key}")
    assert out["encoder_outputs"].shape[0] == config.num_hidden_layers
    np.testing.assert_array_equal(out["encoder_outputs"][-1], out["sequence_output"])


@pytest.mark.parametrize("name", REFERENCE_NAMES)
def test_weights_equal_hugging_face_tensors(name):
    """The attention key bias cancels in the softmax, so no output can show it: compare weights directly."""
    from safetensors.numpy import load_file

    _, model, _, _ = _load_reference(name)
    tensors = load_file(os.path.join(REFERENCE, name, "model.safetensors"))
    for g, group in enumerate(model.albert.encoder.groups):
        for i, block in enumerate(group):
            prefix = f"albert.encoder.albert_layer_groups.{g}.albert_layers.{i}.attention."
            attention = block._self_attention_layer  # pylint: disable=protected-access
            for part, dense in (("key", attention._key_dense), ("query", attention._query_dense),
                                ("value", attention._value_dense)):
                np.testing.assert_array_equal(dense.bias.numpy().reshape(-1), tensors[prefix + part + ".bias"])
                np.testing.assert_array_equal(dense.kernel.numpy().reshape(model.config.hidden_size, -1),
                                              tensors[prefix + part + ".weight"].T)
    np.testing.assert_array_equal(model.albert.embeddings.word_embeddings.embeddings.numpy(),
                                  tensors["albert.embeddings.word_embeddings.weight"])


def test_key_bias_is_invisible_in_outputs(grouped):
    """Why the direct comparison above is needed: zeroing every key bias leaves the outputs unchanged."""
    _, model, inputs, reference = grouped
    saved = []
    for group in model.albert.encoder.groups:
        for block in group:
            bias = block._self_attention_layer._key_dense.bias  # pylint: disable=protected-access
            saved.append((bias, bias.numpy()))
            bias.assign(np.zeros(bias.shape, np.float32))
    try:
        out = _np(model(inputs, training=False))
        np.testing.assert_allclose(out["sequence_output"], reference["sequence_output"], atol=ATOL)
    finally:
        for variable, value in saved:
            variable.assign(value)


# ---------------------------------------------------------- sharing, groups
def test_weights_do_not_grow_with_depth():
    counts = set()
    for groups in (1, 2):
        counts.clear()
        for layers in (2, 4, 8):
            model = _built(AlbertForPretraining, _small_config(num_hidden_layers=layers, num_hidden_groups=groups))
            counts.add((len(model.weights), model.count_params(), len(model.albert.encoder.weights)))
            assert len(model(_inputs())["encoder_outputs"]) == layers
        assert len(counts) == 1, counts
    # ... while each extra group or inner block adds exactly one block's weights.
    one = _built(AlbertModel, _small_config(num_hidden_layers=4))
    two = _built(AlbertModel, _small_config(num_hidden_layers=4, num_hidden_groups=2))
    inner = _built(AlbertModel, _small_config(num_hidden_layers=4, inner_group_num=2))
    block = one.count_params() - one.embeddings.count_params() - one.pooler.count_params()
    assert two.count_params() == inner.count_params() == one.count_params() + block


@pytest.mark.parametrize("layers,groups", [(4, 2), (6, 3), (6, 2), (12, 4), (3, 3), (5, 1)])
def test_group_selection_rule(layers, groups):
    encoder = SharedTransformerStack(layers, groups, 1, 2, 8)
    assert [encoder.group_of_layer(l) for l in range(layers)] == [int(l * groups / layers) for l in range(layers)]


def test_encoder_runs_each_layers_group_blocks_in_order():
    layers, groups, inner = 6, 3, 2
    encoder = SharedTransformerStack(layers, groups, inner, 2, 16, hidden_act="gelu")
    x = np.random.RandomState(0).normal(size=(2, 5, 8)).astype("float32")
    mask = np.array([[1] * 5, [1, 1, 1, 0, 0]], bool)
    outputs = encoder(x, padding_mask=mask)
    _randomize(encoder)
    outputs = [o.numpy() for o in encoder(x, padding_mask=mask)]
    assert len(outputs) == layers
    hidden = x
    for l in range(layers):
        for block in encoder.groups[int(l * groups / layers)]:
            hidden = block(hidden, padding_mask=mask)
        np.testing.assert_allclose(outputs[l], hidden.numpy(), atol=1e-6, err_msg=f"layer {l}")
    # The groups really differ, so running the wrong one would have been caught.
    other = encoder.groups[1][0](x, padding_mask=mask).numpy()
    assert np.abs(other - encoder.groups[0][0](x, padding_mask=mask).numpy()).max() > 1e-2


# ------------------------------------------------------------ serialisation
def _layer_round_trip(layer, call):
    expected = call(layer)
    config = layer.get_config()
    for clone in (type(layer).from_config(config),
                  keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))):
        call(clone)
        clone.set_weights(layer.get_weights())
        assert clone.get_config() == config
        actual = call(clone)
        for a, b in zip(tf.nest.flatten(actual), tf.nest.flatten(expected)):
            np.testing.assert_array_equal(_array(a), _array(b))
    return clone


def test_layers_get_config_round_trip():
    rng = np.random.RandomState(0)
    ids = rng.randint(0, 50, (2, 6)).astype("int32")
    segments = np.array([[0, 0, 0, 1, 1, 1]] * 2, "int32")
    hidden = rng.normal(size=(2, 6, 16)).astype("float32")
    mask = np.array([[1] * 6, [1, 1, 1, 1, 0, 0]], bool)

    embedding = FactorizedEmbedding(50, 8, 16, 12, 2, dropout=0.1, initializer_range=0.05)
    embedding(ids, segments)
    _randomize(embedding)
    _layer_round_trip(embedding, lambda layer: layer(ids, segments))

    block = AlbertTransformerBlock(32, 2, dropout=0.1, attention_dropout=0.2, activation=gelu_tanh,
                                   layer_norm_epsilon=1e-12)
    block(hidden)
    _randomize(block)
    clone = _layer_round_trip(block, lambda layer: layer(hidden, padding_mask=mask))
    assert clone._self_attention_layer._dropout_layer.rate == 0.2  # pylint: disable=protected-access
    assert clone.dropout == 0.1 and clone.activation is gelu_tanh

    encoder = SharedTransformerStack(4, 2, 2, 2, 32, hidden_act="gelu_exact", hidden_dropout_prob=0.1,
                            attention_probs_dropout_prob=0.1)
    encoder(hidden, padding_mask=mask)
    _randomize(encoder)
    clone = _layer_round_trip(encoder, lambda layer: layer(hidden, padding_mask=mask))
    assert clone.groups[1][1].activation is gelu_erf

    head = MaskedLMHead(50, 8, hidden_act="gelu")
    table = rng.normal(size=(50, 8)).astype("float32")
    positions = np.array([[0, 3], [5, 1]], "int32")
    head(hidden, positions, table)
    _randomize(head)
    _layer_round_trip(head, lambda layer: layer(hidden, positions, table))


@pytest.mark.parametrize("cls", [AlbertModel, AlbertForPretraining])
def test_models_get_config_round_trip(cls):
    config = _small_config(num_hidden_layers=4, num_hidden_groups=2, hidden_act="gelu_exact")
    model = _built(cls, config)
    inputs = _inputs()
    expected = _np(model(inputs))
    serialized = model.get_config()
    assert serialized["config"] == config.to_dict()
    for clone in (cls.from_config(serialized),
                  keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(model))):
        assert isinstance(clone, cls) and clone.config == config
        clone(inputs)
        clone.set_weights(model.get_weights())
        actual = _np(clone(inputs))
        for key in expected:
            np.testing.assert_array_equal(actual[key], expected[key], err_msg=key)


def test_keras_file_save_and_load(grouped, tmp_path):
    _, model, inputs, _ = grouped
    path = str(tmp_path / "albert.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, AlbertForPretraining) and restored.config == model.config
    expected, actual = _np(model(inputs)), _np(restored(inputs))
    for key in expected:
        np.testing.assert_array_equal(actual[key], expected[key], err_msg=key)


# ------------------------------------------------------------------ dropout

def _with_dropout(config, model, inputs):
    """`model`'s weights in an `AlbertForPretraining` of `config` with dropout 0.1 (hidden and attention)."""
    dropout_config = AlbertConfig.from_dict({**config.to_dict(), "hidden_dropout_prob": 0.1,
                                             "attention_probs_dropout_prob": 0.1})
    dropout_model = AlbertForPretraining(dropout_config)
    dropout_model(inputs)
    dropout_model.set_weights(model.get_weights())
    return dropout_model


def test_dropout_only_when_training(grouped):
    config, model, inputs, reference = grouped
    dropout_model = _with_dropout(config, model, inputs)
    first = _np(dropout_model(inputs, training=False))
    second = _np(dropout_model(inputs))  # training defaults to inference
    for key in ("sequence_output", "mlm_logits", "sop_logits"):
        np.testing.assert_array_equal(first[key], second[key])
        np.testing.assert_allclose(first[key], reference[key], atol=ATOL)  # no dropout at all
    trained = _np(dropout_model(inputs, training=True))
    trained_again = _np(dropout_model(inputs, training=True))
    assert np.abs(trained["sequence_output"] - first["sequence_output"]).max() > 1e-2
    assert np.abs(trained["sequence_output"] - trained_again["sequence_output"]).max() > 1e-2
    # With v2 (dropout 0) training=True changes nothing.
    np.testing.assert_allclose(_np(model(inputs, training=True))["sequence_output"], reference["sequence_output"],
                               atol=ATOL)


def test_attention_dropout_rate_is_separate():
    config = _small_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.3)
    model = _built(AlbertModel, config)
    for group in model.encoder.groups:
        for block in group:
            assert block._self_attention_layer._dropout_layer.rate == 0.3  # pylint: disable=protected-access
            assert block.dropout == 0.0
    inputs = _inputs()
    inference = _np(model(inputs))["sequence_output"]
    assert np.abs(_np(model(inputs, training=True))["sequence_output"] - inference).max() > 1e-3


# ------------------------------------------------------ graph, XLA, inputs
@pytest.mark.slow
def test_tf_function_and_xla_give_the_same_outputs(grouped):
    _, model, inputs, reference = grouped
    eager = _np(model(inputs, training=False))
    graph = _np(tf.function(lambda x: model(x, training=False))(inputs))
    xla = _np(tf.function(lambda x: model(x, training=False), jit_compile=True)(inputs))
    for key in OUTPUT_KEYS + ("encoder_outputs",):
        np.testing.assert_allclose(graph[key], eager[key], rtol=0, atol=ATOL, err_msg=f"tf.function {key}")
        np.testing.assert_allclose(xla[key], eager[key], rtol=0, atol=ATOL, err_msg=f"XLA {key}")
        np.testing.assert_allclose(xla[key], reference[key], rtol=0, atol=ATOL, err_msg=f"XLA vs reference {key}")


@pytest.mark.slow
def test_xla_gradients_with_dropout():
    """A compiled training-mode pass (dropout on, gradients through the shared blocks) runs and is finite."""
    config = _small_config(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    model = _built(AlbertForPretraining, config)
    inputs = _inputs()

    @tf.function(jit_compile=True)
    def gradients(x):
        with tf.GradientTape() as tape:
            out = model(x, training=True)
            loss = tf.reduce_mean(tf.square(out["mlm_logits"])) + tf.reduce_mean(tf.square(out["sop_logits"]))
        return loss, tape.gradient(loss, model.trainable_variables)

    loss, grads = gradients(inputs)
    assert np.isfinite(loss.numpy())
    assert len(grads) == len(model.trainable_variables)
    assert all(g is not None and np.isfinite(tf.convert_to_tensor(g).numpy()).all() for g in grads)


def test_missing_mask_and_segments_default_to_ones_and_zeros():
    model = _built(AlbertForPretraining, _small_config())
    inputs = _inputs()
    ids = inputs["input_ids"]
    explicit = _np(model({"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids),
                          "masked_lm_positions": inputs["masked_lm_positions"]}))
    implicit = _np(model({"input_ids": ids, "masked_lm_positions": inputs["masked_lm_positions"]}))
    for key in explicit:
        np.testing.assert_array_equal(implicit[key], explicit[key], err_msg=key)
    # and they are really used when given
    assert np.abs(_np(model(inputs))["sequence_output"] - explicit["sequence_output"]).max() > 1e-3


def test_output_shapes_and_padding():
    config = _small_config(num_hidden_layers=3)
    model = _built(AlbertForPretraining, config)
    inputs = _inputs(batch=3, seq=9, positions=4)
    out = model(inputs)
    assert tuple(out["sequence_output"].shape) == (3, 9, 16)
    assert tuple(out["pooled_output"].shape) == (3, 16)
    assert len(out["encoder_outputs"]) == 3
    assert tuple(out["mlm_logits"].shape) == (3, 4, 50)
    assert tuple(out["sop_logits"].shape) == (3, 2)
    # Padded keys are not attended to: changing the ids at padded positions leaves real positions unchanged.
    changed = dict(inputs)
    changed["input_ids"] = inputs["input_ids"].copy()
    changed["input_ids"][1:, -2:] = 7
    before, after = _np(model(inputs)), _np(model(changed))
    np.testing.assert_allclose(after["sequence_output"][:, :-2], before["sequence_output"][:, :-2], atol=1e-6)


# --------------------------------------------------------- mixed precision
@pytest.fixture(params=["mixed_bfloat16", "mixed_float16"])
def policy(request):
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(request.param)
    try:
        yield request.param
    finally:
        keras.mixed_precision.set_global_policy(previous)


@pytest.mark.slow
def test_mixed_precision(policy, grouped):
    config, float_model, inputs, _ = grouped
    expected = _np(float_model(inputs))
    model = AlbertForPretraining(config)
    load_checkpoint(model, os.path.join(REFERENCE, "groups2_inner2"))
    assert model.dtype_policy.name == policy
    compute = "bfloat16" if policy == "mixed_bfloat16" else "float16"
    out = model(inputs, training=False)
    assert out["sequence_output"].dtype == compute
    assert out["mlm_logits"].dtype == "float32" and out["sop_logits"].dtype == "float32"
    gammas = [v for v in model.weights if v.path.endswith("gamma")]
    assert len(gammas) == 2 * 4 + 2  # embeddings, MLM head, 2 per block
    assert all(v.dtype == "float32" for v in model.weights)  # variables stay float32
    # LayerNorm statistics are computed in float32 (Keras upcasts inside): values whose squares overflow
    # float16 still normalise correctly.
    block = model.albert.encoder.groups[0][0]
    x = (300.0 + np.random.RandomState(0).normal(size=(2, 3, config.hidden_size)) * 30).astype(np.float32)
    for norm in (block._self_attention_layer_norm, block._feedforward_layer_norm,  # pylint: disable=protected-access
                 model.albert.embeddings.layer_norm):
        if norm is model.albert.embeddings.layer_norm:
            x = x[..., :config.embedding_size]
        normed = _array(norm(keras.ops.cast(x, compute)))
        gamma, beta = norm.gamma.numpy(), norm.beta.numpy()
        exact = (x - x.mean(-1, keepdims=True)) / x.std(-1, keepdims=True) * gamma + beta
        assert np.isfinite(normed).all()
        assert np.abs(normed - exact).max() <= 0.1 * np.abs(exact).max()
    # Attention probabilities are computed in float32 too.
    assert block._self_attention_layer._softmax.compute_dtype == "float32"  # pylint: disable=protected-access
    tolerance = 0.05 if compute == "bfloat16" else 0.01
    out = _np(out)
    for key in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
        assert np.isfinite(out[key]).all(), key
        scale = max(1.0, np.abs(expected[key]).max())
        assert np.abs(out[key] - expected[key]).max() <= tolerance * scale, key
    # With dropout configured (the attention then takes the explicit-softmax path).
    dropout_model = _with_dropout(config, model, inputs)
    inference = _np(dropout_model(inputs, training=False))
    assert np.abs(inference["mlm_logits"] - out["mlm_logits"]).max() <= tolerance * np.abs(out["mlm_logits"]).max()
    assert all(np.isfinite(v).all() for v in _np(dropout_model(inputs, training=True)).values())


def _block_kernel_casts(model, inputs, training):
    """How many Cast ops of `model`'s traced forward read a Transformer-block kernel variable."""
    shapes = set()
    for group in model.encoder.groups:
        for block in group:
            shapes.update(tuple(w.shape) for w in block.trainable_weights if w.path.endswith("kernel"))
    graph = tf.function(lambda x: model(x, training=training)).get_concrete_function(inputs).graph
    return sum(1 for op in graph.get_operations()
               if op.type == "Cast" and op.inputs[0].op.type == "ReadVariableOp"
               and tuple(op.inputs[0].shape) in shapes)


@pytest.mark.slow
@pytest.mark.parametrize("hidden_size, heads", [(32, 2), (36, 3)])
def test_shared_block_weights_are_cast_once_per_forward_at_inference(policy, hidden_size, heads):
    """At inference each shared block's kernels are cast once per forward, not once per layer; in training
    once per layer (each layer's gradient then passes through its own cast into float32). The two give the
    same outputs: with head size 16 the attention scale 1/4 gives bit-identical values whether training folds it
    into the query kernel or inference applies it to the scores; with head size 12 (a scale 1/sqrt(12) that
    rounds) they agree to the 16-bit policy's precision."""
    config = _small_config(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2, hidden_size=hidden_size,
                           num_attention_heads=heads, intermediate_size=64)
    model = _built(AlbertModel, config)
    inputs = {k: tf.constant(v) for k, v in _inputs().items() if k != "masked_lm_positions"}
    kernels_per_block = 6  # query, key, value, attention output, intermediate, output
    assert _block_kernel_casts(model, inputs, training=False) == 4 * kernels_per_block
    assert _block_kernel_casts(model, inputs, training=True) == 4 * 2 * kernels_per_block
    inference, training = model(inputs, training=False), model(inputs, training=True)
    for key in ("sequence_output", "pooled_output"):
        if hidden_size // heads == 16:
            np.testing.assert_array_equal(_array(inference[key]), _array(training[key]), err_msg=key)
        else:
            np.testing.assert_allclose(_array(inference[key]), _array(training[key]), rtol=0, atol=0.05,
                                       err_msg=key)
            assert np.abs(_array(inference[key]) - _array(training[key])).max() > 0  # not the bit-identical case


def test_stack_keeps_its_registered_keras_name():
    """The stack was `AlbertEncoder`: `.keras` files saved then name it so, and must still load."""
    assert keras.saving.get_registered_name(SharedTransformerStack) == "albert_tf>AlbertEncoder"
    assert keras.saving.get_registered_object("albert_tf>AlbertEncoder") is SharedTransformerStack
