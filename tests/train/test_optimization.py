"""The learning-rate schedule and the optimizers against numpy re-statements of the original release's rules
(albert/optimization.py and albert/lamb_optimizer.py), and the ways they differ from Keras' AdamW and Lamb."""

import copy
import math
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.train.optimization import LAMB, AdamWeightDecay, WarmupPolynomialDecay, create_optimizer

BETA_1, BETA_2, EPS, DECAY = 0.9, 0.999, 1e-6, 0.01
EXCLUDE = ("LayerNorm", "layer_norm", "bias")


# ----------------------------------------------------------------- the schedule
def _original_lr(step, lr, total, warmup, start, power):
    """The original's create_optimizer schedule: tf.train.polynomial_decay(end 0, cycle False) then the
    linear warmup, whose `is_warmup` compares (step - start_warmup_step) with num_warmup_steps."""
    decayed = lr * (1.0 - min(step, total) / total) ** power
    if not warmup:
        return decayed
    warm = step - start
    return lr * warm / warmup if warm < warmup else decayed


def _schedule_values(schedule, steps):
    return [float(schedule(tf.constant(s, tf.int64))) for s in steps]


def test_schedule_linear_warmup_then_linear_decay_to_zero():
    schedule = WarmupPolynomialDecay(0.1, num_train_steps=100, num_warmup_steps=10)
    values = _schedule_values(schedule, [0, 1, 5, 9, 10, 11, 50, 99, 100, 150])
    # warmup: lr * step / warmup; after it: lr * (1 - step / total), which is 0 at and after total
    expected = [0.0, 0.01, 0.05, 0.09, 0.09, 0.089, 0.05, 0.001, 0.0, 0.0]
    np.testing.assert_allclose(values, expected, rtol=1e-5, atol=1e-9)


def test_schedule_warmup_starts_at_start_warmup_step_and_decay_has_power():
    lr, total, warmup, start, power = 0.00176, 1000, 100, 300, 2.0
    schedule = WarmupPolynomialDecay(lr, total, num_warmup_steps=warmup, start_warmup_step=start, power=power)
    steps = [300, 301, 350, 399, 400, 401, 700, 999, 1000, 1200]
    values = _schedule_values(schedule, steps)
    np.testing.assert_allclose(values, [_original_lr(s, lr, total, warmup, start, power) for s in steps],
                               rtol=1e-5, atol=1e-12)
    # by hand: the warmup counts from start_warmup_step; the decay counts from 0 with power 2
    assert values[0] == 0.0
    assert values[2] == pytest.approx(lr * 50 / 100)
    assert values[4] == pytest.approx(lr * (1 - 400 / 1000) ** 2)
    assert values[6] == pytest.approx(lr * 0.3 ** 2)
    assert values[8] == 0.0 and values[9] == 0.0


def test_schedule_before_start_warmup_step_is_the_originals_formula():
    # The original applies `is_warmup = step - start < warmup` to every step, so before start_warmup_step the
    # warmup formula gives a negative rate; kept as is (the original's behaviour), documented by this test.
    schedule = WarmupPolynomialDecay(0.1, 100, num_warmup_steps=10, start_warmup_step=20)
    assert float(schedule(tf.constant(15))) == pytest.approx(_original_lr(15, 0.1, 100, 10, 20, 1.0))
    assert float(schedule(tf.constant(15))) == pytest.approx(-0.05)


def test_schedule_without_warmup_and_config_round_trip():
    schedule = WarmupPolynomialDecay(0.5, num_train_steps=8, power=0.5)
    np.testing.assert_allclose(_schedule_values(schedule, [0, 2, 8]), [0.5, 0.5 * 0.75 ** 0.5, 0.0], rtol=1e-6)
    # No warmup means none, wherever it would have started.
    late = WarmupPolynomialDecay(0.5, num_train_steps=8, start_warmup_step=4, power=0.5)
    np.testing.assert_allclose(_schedule_values(late, [0, 2, 8]), [0.5, 0.5 * 0.75 ** 0.5, 0.0], rtol=1e-6)
    # A run of one step (or none) still has finite rates: the full rate, then 0.
    for steps in (1, 0):
        np.testing.assert_allclose(_schedule_values(WarmupPolynomialDecay(0.5, steps), [0, 1, 5]), [0.5, 0.0, 0.0])
    again = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert isinstance(again, WarmupPolynomialDecay)
    assert again.get_config() == schedule.get_config()


# ----------------------------------------------------------------- numpy re-statements of the update rules
def _make_variables():
    """A kernel (decayed, adapted), a bias and a LayerNorm gamma (both excluded), a zero kernel (||w|| = 0)."""
    rng = np.random.RandomState(0)
    values = {
        "dense/kernel": rng.normal(0, 0.5, (4, 3)).astype("float32"),
        "dense/bias": rng.normal(0, 0.5, (3,)).astype("float32"),
        "LayerNorm/gamma": (1 + rng.normal(0, 0.1, (3,))).astype("float32"),
        "zero/kernel": np.zeros((2, 3), "float32"),
    }
    variables = []
    for path, value in values.items():
        scope, name = path.split("/")
        with keras.name_scope(scope):
            variables.append(keras.Variable(value, name=name))
    assert [v.path for v in variables] == list(values)
    return variables


def _gradients(step):
    rng = np.random.RandomState(100 + step)
    return {"dense/kernel": rng.normal(0, 1e-2, (4, 3)), "dense/bias": rng.normal(0, 1e-1, (3,)),
            "LayerNorm/gamma": rng.normal(0, 1e-3, (3,)), "zero/kernel": rng.normal(0, 1.0, (2, 3))}


def _excluded(path):
    return any(p in path for p in EXCLUDE)


def _original_step(state, grads, lr, lamb):
    """One step of the original's AdamWeightDecayOptimizer (lamb=False) or LAMBOptimizer (lamb=True), in numpy
    float64: no bias correction, decay added to the update, trust ratio over the update including decay."""
    new = {}
    for path, (w, m, v) in state.items():
        g = grads[path]
        m = BETA_1 * m + (1 - BETA_1) * g
        v = BETA_2 * v + (1 - BETA_2) * g * g
        update = m / (np.sqrt(v) + EPS)
        if not _excluded(path):
            update = update + DECAY * w
        ratio = 1.0
        if lamb and not _excluded(path):
            w_norm, u_norm = np.linalg.norm(w), np.linalg.norm(update)
            ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
        new[path] = (w - ratio * lr * update, m, v)
    return new


def _keras_step(state, grads, lr, t, lamb):
    """One step of keras.optimizers.AdamW (lamb=False) / keras.optimizers.Lamb (lamb=True), restated in numpy:
    the weights are first decayed by lr * decay (outside the trust ratio), then moved by the bias-corrected
    Adam direction (LAMB: times ||w_decayed|| / ||direction||, for every variable)."""
    new = {}
    for path, (w, m, v) in state.items():
        g = grads[path]
        if not _excluded(path):
            w = w - w * DECAY * lr
        m = BETA_1 * m + (1 - BETA_1) * g
        v = BETA_2 * v + (1 - BETA_2) * g * g
        if lamb:
            update = (m / (1 - BETA_1 ** t)) / (np.sqrt(v / (1 - BETA_2 ** t)) + EPS)
            w_norm, u_norm = np.linalg.norm(w), np.linalg.norm(update)
            ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
            new[path] = (w - ratio * lr * update, m, v)
        else:
            alpha = lr * math.sqrt(1 - BETA_2 ** t) / (1 - BETA_1 ** t)
            new[path] = (w - alpha * m / (np.sqrt(v) + EPS), m, v)
    return new


def _run(optimizer, steps):
    variables = _make_variables()
    for step in range(steps):
        grads = _gradients(step)
        optimizer.apply([tf.constant(grads[v.path], tf.float32) for v in variables], variables)
    return {v.path: np.asarray(v.numpy(), np.float64) for v in variables}


def _expected(step_fn, steps, lr, **kwargs):
    state = {v.path: (np.asarray(v.numpy(), np.float64), 0.0, 0.0) for v in _make_variables()}
    for step in range(steps):
        if step_fn is _keras_step:
            kwargs["t"] = step + 1
        state = step_fn(state, _gradients(step), lr, **kwargs)
    return {path: w for path, (w, _, _) in state.items()}


def _assert_weights(actual, expected, atol=1e-6):
    for path in expected:
        np.testing.assert_allclose(actual[path], expected[path], rtol=1e-5, atol=atol, err_msg=path)


def _ours(cls, lr=0.01):
    return cls(learning_rate=lr, weight_decay_rate=DECAY, beta_1=BETA_1, beta_2=BETA_2, epsilon=EPS)


def _keras(cls, lr):
    """Keras' own optimizer `cls` with the same hyperparameters and the same variables kept out of decay."""
    optimizer = cls(learning_rate=lr, weight_decay=DECAY, beta_1=BETA_1, beta_2=BETA_2, epsilon=EPS)
    optimizer.exclude_from_weight_decay(var_names=list(EXCLUDE))
    return optimizer


@pytest.mark.parametrize("steps", [1, 2])
def test_adam_weight_decay_matches_the_original_update_rule(steps):
    actual = _run(_ours(AdamWeightDecay), steps)
    _assert_weights(actual, _expected(_original_step, steps, 0.01, lamb=False))


@pytest.mark.parametrize("steps", [1, 2])
def test_lamb_matches_the_original_update_rule(steps):
    actual = _run(_ours(LAMB), steps)
    _assert_weights(actual, _expected(_original_step, steps, 0.01, lamb=True))


def test_lamb_exclusions_and_zero_norm_by_hand():
    """One step, lr 0.01, checked variable by variable against the rule written out."""
    variables = _make_variables()
    before = {v.path: v.numpy().astype(np.float64) for v in variables}
    grads = _gradients(0)
    _ours(LAMB).apply([tf.constant(grads[v.path], tf.float32) for v in variables], variables)
    after = {v.path: v.numpy().astype(np.float64) for v in variables}
    # First step without bias correction: m = 0.1 g, v = 0.001 g^2, so the Adam direction is
    # 0.1 g / (sqrt(0.001) |g| + eps) ~ 3.162 sign(g).
    direction = {p: 0.1 * g / (math.sqrt(0.001) * np.abs(g) + EPS) for p, g in grads.items()}
    # bias and LayerNorm: no decay, no trust ratio: w - lr * direction
    for path in ("dense/bias", "LayerNorm/gamma"):
        np.testing.assert_allclose(after[path], before[path] - 0.01 * direction[path], rtol=1e-5, atol=1e-7)
    # kernel: decay inside the update, and the step has norm lr * ||w||
    w = before["dense/kernel"]
    update = direction["dense/kernel"] + DECAY * w
    np.testing.assert_allclose(after["dense/kernel"], w - 0.01 * np.linalg.norm(w) / np.linalg.norm(update) * update,
                               rtol=1e-5, atol=1e-7)
    assert np.linalg.norm(after["dense/kernel"] - w) == pytest.approx(0.01 * np.linalg.norm(w), rel=1e-4)
    # ||w|| = 0: ratio 1 (LAMB does not freeze zero-initialised weights)
    np.testing.assert_allclose(after["zero/kernel"], -0.01 * direction["zero/kernel"], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("cls", [AdamWeightDecay, LAMB])
def test_sparse_and_low_precision_gradients_update_as_their_dense_float32_values(cls):
    """An embedding's gradient arrives as `tf.IndexedSlices` (rows of the table), and under mixed precision a
    gradient may be float16: both take the step of the same dense float32 gradient."""
    table = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    rows = np.array([[1.0, -2.0, 0.5], [0.25, 0.5, -1.0]], np.float32)
    dense = np.zeros_like(table)
    dense[[3, 1]] = rows
    sparse = tf.IndexedSlices(tf.constant(rows), tf.constant([3, 1]), tf.constant([4, 3]))
    results = []
    for gradient in (tf.constant(dense), sparse, tf.constant(dense, tf.float16)):
        variable = keras.Variable(table, name="embeddings")
        cls(learning_rate=0.01).apply([gradient], [variable])
        results.append(variable.numpy())
    assert not np.allclose(results[0], table)
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)
    np.testing.assert_allclose(results[2], results[0], rtol=1e-6)


def test_lamb_layer_adaptation_exclusions_of_their_own():
    """`exclude_from_layer_adaptation` given: the trust ratio follows it, not the weight-decay exclusions; a zero
    update keeps ratio 1 (no 0 / 0)."""
    variables = _make_variables()
    before = {v.path: v.numpy().astype(np.float64) for v in variables}
    grads = _gradients(0)
    LAMB(learning_rate=0.01, weight_decay_rate=DECAY, epsilon=EPS, exclude_from_layer_adaptation=["kernel"]).apply(
        [tf.constant(grads[v.path], tf.float32) for v in variables], variables)
    direction = {p: 0.1 * g / (math.sqrt(0.001) * np.abs(g) + EPS) for p, g in grads.items()}
    for v in variables:
        w, update = before[v.path], direction[v.path]
        if "kernel" in v.path:  # decayed (the default exclusions), no trust ratio
            expected = w - 0.01 * (update + (0 if "zero" in v.path else DECAY * w))
        else:  # not decayed, under the trust ratio
            expected = w - 0.01 * np.linalg.norm(w) / np.linalg.norm(update) * update
        np.testing.assert_allclose(v.numpy(), expected, rtol=1e-5, atol=1e-7, err_msg=v.path)
    kernel = keras.Variable(np.ones((2, 2), np.float32), name="kernel")
    LAMB(learning_rate=0.01, weight_decay_rate=0.0).apply([tf.zeros((2, 2))], [kernel])
    np.testing.assert_array_equal(kernel.numpy(), np.ones((2, 2)))


def test_weight_decay_rate_zero_and_custom_exclusions():
    variables = _make_variables()
    grads = _gradients(0)
    before = {v.path: v.numpy().astype(np.float64) for v in variables}
    optimizer = AdamWeightDecay(learning_rate=0.01, weight_decay_rate=0.5, epsilon=EPS,
                                exclude_from_weight_decay=["kernel"])
    optimizer.apply([tf.constant(grads[v.path], tf.float32) for v in variables], variables)
    for v in variables:
        g = grads[v.path]
        update = 0.1 * g / (math.sqrt(0.001) * np.abs(g) + EPS)
        if "kernel" not in v.path:  # now the bias and LayerNorm ARE decayed, the kernels are not
            update = update + 0.5 * before[v.path]
        np.testing.assert_allclose(v.numpy(), before[v.path] - 0.01 * update, rtol=1e-5, atol=1e-7, err_msg=v.path)


# ----------------------------------------------------------------- the differences from Keras' optimizers
def test_differs_from_keras_adamw_by_bias_correction():
    """keras.optimizers.AdamW divides by (1 - beta^t) ("bias correction"); the original does not. Same inputs,
    measurably different weights, and the difference is exactly the predicted one:
    w_keras - w_ours = lr * (1 - sqrt(1 - beta_2^t) / (1 - beta_1^t)) * m / (sqrt(v) + eps) at step t."""
    lr = 0.01
    ours_opt = _ours(AdamWeightDecay, lr)
    keras_opt = _keras(keras.optimizers.AdamW, lr)
    ours, theirs = _run(ours_opt, 1), _run(keras_opt, 1)
    # each matches its own rule ...
    _assert_weights(ours, _expected(_original_step, 1, lr, lamb=False))
    _assert_weights(theirs, _expected(_keras_step, 1, lr, lamb=False))
    # ... and the difference is the bias correction: at t = 1 the Keras step is sqrt(0.001) / 0.1 = 0.316 of ours
    grads = _gradients(0)
    factor = 1 - math.sqrt(1 - BETA_2) / (1 - BETA_1)
    for path, g in grads.items():
        m, v = (1 - BETA_1) * g, (1 - BETA_2) * g * g
        predicted = lr * factor * m / (np.sqrt(v) + EPS)
        np.testing.assert_allclose(theirs[path] - ours[path], predicted, rtol=1e-3, atol=1e-7, err_msg=path)
        assert np.abs(theirs[path] - ours[path]).max() > 5e-3  # 0.684 * lr per weight: far from rounding


def test_differs_from_keras_lamb_by_where_the_decay_goes():
    """keras.optimizers.Lamb decays the weights outside the trust ratio (and for every variable not excluded
    from decay, with the ratio applied to all variables, LayerNorm and biases included); the original adds the
    decay to the update whose norm forms the ratio, and exempts LayerNorm/bias from the ratio."""
    lr = 0.05
    ours_opt = _ours(LAMB, lr)
    keras_opt = _keras(keras.optimizers.Lamb, lr)
    ours, theirs = _run(ours_opt, 2), _run(keras_opt, 2)
    expected_ours = _expected(_original_step, 2, lr, lamb=True)
    expected_theirs = _expected(_keras_step, 2, lr, lamb=True)
    _assert_weights(ours, expected_ours)
    _assert_weights(theirs, expected_theirs)
    for path in ours:
        np.testing.assert_allclose(theirs[path] - ours[path], expected_theirs[path] - expected_ours[path],
                                   rtol=1e-3, atol=1e-6, err_msg=path)
    # The decayed kernel: both steps have norm ~ lr * ||w|| but different directions (far above float32 rounding).
    assert np.abs(theirs["dense/kernel"] - ours["dense/kernel"]).max() > 3e-4
    # The bias: Keras scales its step by ||b|| / ||direction||, the original does not.
    assert np.abs(theirs["dense/bias"] - ours["dense/bias"]).max() > 1e-2


def test_without_decay_lamb_bias_correction_cancels_in_the_trust_ratio():
    """For a variable under the trust ratio the step is lr * ||w|| * u / ||u||, and bias correction scales u by
    one scalar per step, which cancels: with no weight decay and a negligible epsilon, Keras' Lamb and the
    original agree on such variables. What remains is where the decay goes (previous test) and where epsilon
    acts (on sqrt(v) here, on the bias-corrected sqrt(v) in Keras; with epsilon 1e-6 that moves this kernel by
    ~1e-4)."""
    lr = 0.05
    ours, theirs = (_run(LAMB(learning_rate=lr, weight_decay_rate=0.0, epsilon=1e-12), 2),
                    _run(keras.optimizers.Lamb(learning_rate=lr, epsilon=1e-12), 2))
    np.testing.assert_allclose(theirs["dense/kernel"], ours["dense/kernel"], rtol=1e-6, atol=1e-6)
    ours, theirs = (_run(LAMB(learning_rate=lr, weight_decay_rate=0.0, epsilon=EPS), 2),
                    _run(keras.optimizers.Lamb(learning_rate=lr, epsilon=EPS), 2))
    assert 2e-5 < np.abs(theirs["dense/kernel"] - ours["dense/kernel"]).max() < 1e-3


# ----------------------------------------------------------------- factory, config, checkpoints
def test_create_optimizer_builds_the_originals_defaults():
    lamb = create_optimizer("lamb", 0.00176, 125000, 3125)
    adamw = create_optimizer("adamw", 1e-4, 10, 0)
    assert isinstance(lamb, LAMB) and isinstance(adamw, AdamWeightDecay)
    for opt in (lamb, adamw):
        assert (opt.beta_1, opt.beta_2, opt.epsilon, opt.weight_decay_rate) == (0.9, 0.999, 1e-6, 0.01)
        assert opt.weight_decay_exclusions == EXCLUDE
    assert isinstance(lamb._learning_rate, WarmupPolynomialDecay)  # pylint: disable=protected-access
    assert float(lamb.learning_rate) == 0.0  # step 0 of the warmup
    assert float(adamw.learning_rate) == pytest.approx(1e-4)
    late = create_optimizer("adamw", 1e-4, 10, start_warmup_step=5)  # no warmup asked: none, wherever it starts
    assert float(late.learning_rate) == pytest.approx(1e-4)
    with pytest.raises(ValueError, match="lamb"):
        create_optimizer("sgd", 0.1, 10)


@pytest.mark.parametrize("cls", [LAMB, AdamWeightDecay])
def test_get_config_round_trip(cls):
    optimizer = cls(learning_rate=WarmupPolynomialDecay(0.1, 100, 10, 5, 2.0), weight_decay_rate=0.02,
                    beta_1=0.8, beta_2=0.99, epsilon=1e-5, exclude_from_weight_decay=["bias"])
    config = optimizer.get_config()
    again = cls.from_config(copy.deepcopy(config))  # from_config deserialises the schedule in place
    assert again.get_config() == config
    assert (again.weight_decay_rate, again.beta_1, again.beta_2, again.epsilon) == (0.02, 0.8, 0.99, 1e-5)
    assert again.weight_decay_exclusions == ("bias",)
    if cls is LAMB:
        adapted = LAMB.from_config(LAMB(exclude_from_layer_adaptation=["kernel"]).get_config())
        assert adapted.exclude_from_layer_adaptation == ("kernel",)
    # and through Keras' own (de)serialisation, as model.save / load_model use it
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert type(restored) is cls and restored.get_config() == config
    if cls is LAMB:
        assert restored.exclude_from_layer_adaptation == ("bias",)


def test_checkpoint_round_trip_of_the_optimizer_state(tmp_path):
    """Two steps, save (slots m and v, the step), restore into fresh variables and a fresh optimizer: the third
    step is identical to that of the optimizer that never stopped."""
    schedule = WarmupPolynomialDecay(0.05, 10, num_warmup_steps=2)
    variables = _make_variables()
    optimizer = LAMB(learning_rate=schedule)
    for step in range(2):
        optimizer.apply([tf.constant(_gradients(step)[v.path], tf.float32) for v in variables], variables)
    prefix = tf.train.Checkpoint(optimizer=optimizer, weights=variables).write(str(tmp_path / "ckpt"))

    fresh = _make_variables()
    restored = LAMB(learning_rate=WarmupPolynomialDecay(0.05, 10, num_warmup_steps=2))
    restored.build(fresh)
    tf.train.Checkpoint(optimizer=restored, weights=fresh).read(prefix).assert_consumed()
    assert int(restored.iterations) == 2
    for a, b in zip(optimizer.variables, restored.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert float(restored.learning_rate) == float(optimizer.learning_rate) == pytest.approx(0.05 * (1 - 2 / 10))

    grads = _gradients(2)
    optimizer.apply([tf.constant(grads[v.path], tf.float32) for v in variables], variables)
    restored.apply([tf.constant(grads[v.path], tf.float32) for v in fresh], fresh)
    for a, b in zip(variables, fresh):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


# ----------------------------------------------------------------- which variables are excluded, and Keras' method
def _decayed_by_one_step(optimizer, variables):
    """The variables a step with zero gradients moves: with m = v = 0 the Adam direction is 0, so only the
    weight decay (lr * rate * w) changes a variable, and exactly the decayed ones change."""
    before = [v.numpy().copy() for v in variables]
    optimizer.apply([tf.zeros_like(v) for v in variables], variables)
    return {v.path for v, old in zip(variables, before) if not np.array_equal(v.numpy(), old)}


def _original_rule_decays(name, patterns=EXCLUDE):
    """The original's `_do_use_weight_decay`: decay unless `re.search(pattern, name)` for some pattern."""
    return not any(re.search(p, name) is not None for p in patterns)


@pytest.mark.parametrize("make", ["pretrainer", "classifier", "squad_v2", "encoder"])
def test_exclusions_follow_the_originals_names_whatever_the_model_is_called(make):
    """Each model's variables, named "bias_..." (which the substring of a Keras path used to match everywhere):
    the decayed ones are exactly those whose TF1 name (the original checkpoint's, from the name tables) the
    original's rule decays."""
    from albert_tf.checkpoints.name_table import tf1_entries
    from albert_tf.model import AlbertClassifier, AlbertForPretraining, AlbertForSquad, AlbertModel, dummy_inputs
    from tests.helpers import tiny_config

    config = tiny_config(vocab_size=64)
    model = {"pretrainer": lambda: AlbertForPretraining(config, name="bias_model"),
             "classifier": lambda: AlbertClassifier(config, 3, name="bias_classifier"),
             "squad_v2": lambda: AlbertForSquad(config, version_2=True, name="bias_squad"),
             "encoder": lambda: AlbertModel(config, name="bias_encoder")}[make]()
    model(dummy_inputs(num_predictions=1 if make == "pretrainer" else None, seq_length=4), training=False)
    entries = tf1_entries(model)
    assert {id(e.variable) for e in entries} == {id(v) for v in model.trainable_variables}
    expected = {e.variable.path for e in entries if _original_rule_decays(e.name)}
    assert 0 < len(expected) < len(entries)
    decayed = _decayed_by_one_step(AdamWeightDecay(learning_rate=1.0, weight_decay_rate=0.5),
                                   model.trainable_variables)
    assert decayed == expected
    # LAMB's trust ratio skips the same variables: a zero-gradient step moves a decayed kernel by exactly
    # lr * ||w|| (ratio ||w|| / ||decay * w||), whatever the decay rate
    lamb = LAMB(learning_rate=0.01, weight_decay_rate=0.5)
    kernel = next(e.variable for e in entries if e.name == "bert/pooler/dense/kernel")
    before = kernel.numpy().copy()
    lamb.apply([tf.zeros_like(v) for v in model.trainable_variables], model.trainable_variables)
    assert np.linalg.norm(kernel.numpy() - before) == pytest.approx(0.01 * np.linalg.norm(before), rel=1e-4)


def test_patterns_are_regular_expressions_searched_in_layer_and_variable_name():
    variables = _make_variables()[:3]  # dense/kernel, dense/bias, LayerNorm/gamma (non-zero: decay shows)
    patterns = ["LayerNorm|layer_norm", "^dense/b"]
    optimizer = AdamWeightDecay(learning_rate=1.0, weight_decay_rate=0.5, exclude_from_weight_decay=patterns)
    # a substring test would look for the literal "LayerNorm|layer_norm" and decay the LayerNorm gamma
    assert _decayed_by_one_step(optimizer, variables) == {"dense/kernel"}
    assert [_original_rule_decays(v.path, patterns) for v in variables] == [True, False, False]


@pytest.mark.parametrize("cls", [AdamWeightDecay, LAMB])
def test_keras_exclude_from_weight_decay_method_still_works(cls):
    """Keras' `exclude_from_weight_decay(var_list=..., var_names=...)` is a method again (the constructor's
    patterns live in `weight_decay_exclusions`); what it excludes is excluded on top of the patterns, from the
    decay and (LAMB, by default) from the trust ratio; after `build` Keras refuses it."""
    variables = _make_variables()[:3]  # dense/kernel, dense/bias, LayerNorm/gamma
    optimizer = cls(learning_rate=0.5, weight_decay_rate=0.5, exclude_from_weight_decay=["LayerNorm"])
    assert _decayed_by_one_step(optimizer, variables) == {"dense/kernel", "dense/bias"}
    variables = _make_variables()[:3]
    optimizer = cls(learning_rate=0.5, weight_decay_rate=0.5, exclude_from_weight_decay=["LayerNorm"])
    optimizer.exclude_from_weight_decay(var_list=[variables[1]])  # dense/bias
    assert _decayed_by_one_step(optimizer, variables) == {"dense/kernel"}
    with pytest.raises(ValueError, match="before the optimizer is built"):
        optimizer.exclude_from_weight_decay(var_names=["kernel"])

    variables = _make_variables()
    optimizer = cls(learning_rate=0.01, weight_decay_rate=0.5)
    optimizer.exclude_from_weight_decay(var_names=["kernel"])  # Keras matches the variable's own name
    grads = _gradients(0)
    before = {v.path: v.numpy().astype(np.float64) for v in variables}
    optimizer.apply([tf.constant(grads[v.path], tf.float32) for v in variables], variables)
    for v in variables:  # nothing is decayed or trust-ratio scaled any more: w - lr * m / (sqrt(v) + eps)
        g = grads[v.path]
        expected = before[v.path] - 0.01 * 0.1 * g / (math.sqrt(0.001) * np.abs(g) + EPS)
        np.testing.assert_allclose(v.numpy(), expected, rtol=1e-5, atol=1e-7, err_msg=v.path)
