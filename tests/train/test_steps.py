"""Training machinery: the fit plan, gradient clipping, output-dir checks, stopping on a non-finite loss, the
atomic results file, and every model under what Keras hands its train/test step."""

import math
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import fileio
from albert_tf.config import AlbertConfig
from albert_tf.data import records
from albert_tf.train import steps
from albert_tf.train.callbacks import NonFiniteLossError, StopOnNonFiniteLoss
from albert_tf.train.runner import check_output_dir, plan_steps, record_config
from tests.helpers import json_on_two_cpus


# ----------------------------------------------------------------- plan_steps
@pytest.mark.parametrize("total,save,per_loop,done,expected", [
    (10, 4, 2, 0, (4, 3, 0, 2)),        # 3 epochs of 4 steps cover 10, stopped at 10 by StopAtStep
    (10, 4, 2, 4, (4, 3, 1, 2)),        # resumed at the first checkpoint: starts at epoch 1
    (10, 5, 1000, 0, (5, 2, 0, 5)),     # iterations_per_loop larger than an interval: one call per interval
    (7, 10, 3, 0, (7, 1, 0, 1)),        # fewer steps than the save interval: one epoch; gcd(3, 7) = 1
    (100, 30, 20, 60, (30, 4, 2, 10)),  # per_loop 20 does not divide the interval 30: gcd 10
    (125000, 5000, 1000, 0, (5000, 25, 0, 1000)),  # the original's defaults
    (125000, 5000, 1000, 45000, (5000, 25, 9, 1000)),
    (10, 2, 2, 3, (2, 5, 1, 1)),        # resumed from step 3, saved at another interval: one step per call
    (10, 4, 2, 1, (4, 3, 0, 1)),        # likewise from step 1, before this interval's first checkpoint
])
def test_plan_steps_cases(total, save, per_loop, done, expected):
    assert plan_steps(total, save, per_loop, done) == expected


@pytest.mark.parametrize("total", [1, 6, 7, 12, 100])
@pytest.mark.parametrize("save", [1, 2, 5, 30])
@pytest.mark.parametrize("per_loop", [1, 3, 4, 1000])
def test_plan_steps_invariants(total, save, per_loop):
    """For every checkpoint step a run can resume from: the epochs cover the remaining steps, resuming starts
    at an epoch boundary, and steps_per_execution divides the epoch, the total and the resume point (so every
    checkpoint step and the last step are reached exactly)."""
    for done in range(0, total, save):
        steps_per_epoch, epochs, initial_epoch, per_execution = plan_steps(total, save, per_loop, done)
        assert steps_per_epoch * epochs >= total
        assert initial_epoch * steps_per_epoch == done
        assert steps_per_epoch % per_execution == 0 and total % per_execution == 0 and done % per_execution == 0
        assert per_execution <= max(per_loop, 1)


# ----------------------------------------------------------------- clipping
def _grads():
    rng = np.random.RandomState(0)
    return [tf.constant(rng.normal(0, s, shape), tf.float32) for s, shape in ((1.0, (3, 4)), (0.5, (4,)),
                                                                               (2.0, (2, 2, 2)))]


@pytest.mark.parametrize("scale", [1.0, 0.05])  # global norm ~6 (clipped) and ~0.3 (left alone)
def test_clip_on_one_replica_matches_clip_by_global_norm(scale):
    grads = [g * scale for g in _grads()]
    expected, norm = tf.clip_by_global_norm(grads, 1.0)
    assert (float(norm) > 1.0) == (scale == 1.0)
    clipped = steps.clip_gradients_across_replicas(grads, 1.0)
    for a, b in zip(clipped, expected):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)


def test_clip_under_loss_scaling_clips_the_unscaled_norm_and_keeps_the_scale():
    grads = _grads()
    expected, _ = tf.clip_by_global_norm(grads, 1.0)
    scaled = steps.clip_gradients_across_replicas([g * 1024.0 for g in grads], 1.0, loss_scale=1024.0)
    for a, b in zip(scaled, expected):
        np.testing.assert_allclose(a.numpy() / 1024.0, b.numpy(), rtol=1e-6, atol=1e-7)


def test_clip_densifies_sparse_gradients():
    dense = tf.constant([[3.0, 0.0], [0.0, 0.0], [0.0, 4.0]])
    sparse = tf.IndexedSlices(tf.constant([[3.0, 0.0], [0.0, 4.0]]), tf.constant([0, 2]), tf.constant([3, 2]))
    (clipped,) = steps.clip_gradients_across_replicas([sparse], 1.0)
    np.testing.assert_allclose(clipped.numpy(), dense.numpy() / 5.0, rtol=1e-6)
    # a token seen twice: its rows add up before the norm (6, not the rows' sqrt(3^2 + 3^2))
    repeated = tf.IndexedSlices(tf.constant([[3.0, 0.0], [3.0, 0.0]]), tf.constant([1, 1]), tf.constant([3, 2]))
    (clipped,) = steps.clip_gradients_across_replicas([repeated], 1.0)
    np.testing.assert_allclose(clipped.numpy(), [[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]], rtol=1e-6)


def test_clip_inside_a_one_replica_strategy_step():
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    grads = _grads()
    expected, _ = tf.clip_by_global_norm(grads, 1.0)
    result = strategy.run(tf.function(lambda: steps.clip_gradients_across_replicas(grads, 1.0)))
    for a, b in zip(result, expected):
        np.testing.assert_allclose(np.asarray(a), b.numpy(), rtol=1e-6, atol=1e-7)


TWO_REPLICAS = """
import json
from albert_tf.train import steps
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
grads = {0: [tf.constant([3.0, 0.0]), None], 1: [tf.constant([0.0, 4.0]), None]}
def step():
    replica = tf.distribute.get_replica_context().replica_id_in_sync_group
    mine = [tf.where(replica == 0, a, b) for a, b in zip(grads[0][:1], grads[1][:1])] + [None]
    return steps.clip_gradients_across_replicas(mine, 1.0)[0]
result = strategy.run(tf.function(step))
print(json.dumps([strategy.experimental_local_results(result)[i].numpy().tolist() for i in range(2)]))
"""


def test_clip_across_two_replicas_takes_the_norm_of_their_sum():
    """Replica 0's gradient [3, 0] and replica 1's [0, 4] sum to norm 5: each is scaled by 1/5 (alone each
    would be scaled by 1/3 and 1/4)."""
    first, second = json_on_two_cpus(TWO_REPLICAS)
    np.testing.assert_allclose(first, [0.6, 0.0], rtol=1e-6)
    np.testing.assert_allclose(second, [0.0, 0.8], rtol=1e-6)


# ----------------------------------------------------------------- check_output_dir
def test_check_output_dir_records_the_config_and_refuses_another(tmp_path, tiny_config):
    out = tmp_path / "run"
    check_output_dir(str(out), tiny_config)
    record_config(str(out), tiny_config)
    assert AlbertConfig.from_json_file(str(out / "albert_config.json")).to_dict() == tiny_config.to_dict()
    check_output_dir(str(out), AlbertConfig.from_dict(tiny_config.to_dict()))  # same model: resumable
    other = AlbertConfig.from_dict({**tiny_config.to_dict(), "hidden_size": 64, "num_hidden_layers": 3})
    check_output_dir(str(out), other)  # no checkpoint yet: nothing was trained with the recorded config
    (out / "ckpt-1.index").write_text("")
    (out / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    with pytest.raises(ValueError, match=r"different model.*hidden_size.*num_hidden_layers|"
                                         r"different model.*num_hidden_layers.*hidden_size") as err:
        check_output_dir(str(out), other)
    assert str(out) in str(err.value) and "--albert_config_file" in str(err.value)
    # the recorded config is untouched
    assert AlbertConfig.from_json_file(str(out / "albert_config.json")).hidden_size == tiny_config.hidden_size


# ----------------------------------------------------------------- write_results
def test_write_results_format_and_atomic_replacement(tmp_path):
    path = str(tmp_path / "eval_results.txt")
    fileio.write_results(path, {"masked_lm_loss": 2.5, "global_step": 10, "masked_lm_accuracy": 0.25})
    with open(path) as f:
        assert f.read() == "global_step = 10\nmasked_lm_accuracy = 0.25\nmasked_lm_loss = 2.5\n"
    assert os.listdir(tmp_path) == ["eval_results.txt"]

    class Unprintable:
        def __format__(self, spec):
            raise RuntimeError("cannot format")

    with pytest.raises(RuntimeError):
        fileio.write_results(path, {"a": 1.0, "z": Unprintable()})
    with open(path) as f:  # a failed write leaves the previous results whole
        assert f.read() == "global_step = 10\nmasked_lm_accuracy = 0.25\nmasked_lm_loss = 2.5\n"
    fileio.write_results(path, {"loss": 1.0})
    with open(path) as f:
        assert f.read() == "loss = 1.0\n"


# ----------------------------------------------------------------- stopping on a non-finite loss
def test_non_finite_loss_stops_naming_the_step_and_keeps_the_last_good_checkpoint(
        tmp_path, monkeypatch, tiny_config, pretraining_records):
    """The records' masked_lm_weights become NaN from the 4th batch on (step 4, a checkpoint step): the run
    stops with NonFiniteLossError naming step 4, ckpt-4 is never written and ckpt-2 holds finite weights."""
    from albert_tf.checkpoints import native
    from albert_tf.tasks.pretraining import PretrainingParams, run_pretraining

    bad_from_batch = 3  # 0-based batch index consumed by step 4
    original_dataset = records.pretraining_dataset

    def poisoned(*args, **kwargs):
        dataset = original_dataset(*args, **kwargs)
        if not kwargs.get("is_training"):
            return dataset

        def poison(index, batch):
            batch = dict(batch)
            weights = batch["masked_lm_weights"]
            batch["masked_lm_weights"] = tf.where(index >= bad_from_batch, tf.fill(tf.shape(weights), np.nan),
                                                  weights)
            return batch

        return dataset.enumerate().map(poison)

    monkeypatch.setattr(records, "pretraining_dataset", poisoned)
    path, seq, preds = pretraining_records
    out = str(tmp_path / "run")
    params = PretrainingParams(albert_config=tiny_config, input_file=path, output_dir=out, max_seq_length=seq,
                               max_predictions_per_seq=preds, train_batch_size=8, eval_batch_size=8,
                               num_train_steps=8, num_warmup_steps=0, learning_rate=1e-3,
                               save_checkpoints_steps=2, iterations_per_loop=1, do_eval=False, log_every=0)
    with pytest.raises(NonFiniteLossError, match=r"non-finite loss \(nan\) at step 4\b"):
        run_pretraining(params)
    assert tf.train.latest_checkpoint(out).endswith("ckpt-2")
    assert not os.path.exists(os.path.join(out, "ckpt-4.index"))
    weights, _ = native.read_native(os.path.join(out, "ckpt-2"))
    assert weights and all(np.isfinite(w).all() for w in weights.values())
    assert int(tf.train.load_checkpoint(os.path.join(out, "ckpt-2")).get_tensor(
        "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE")) == 2


def test_non_finite_loss_callback_on_infinite_loss():
    class Model:
        class optimizer:  # noqa: N801  (a stand-in with the attribute the callback reads)
            iterations = tf.Variable(17, dtype=tf.int64)

    callback = StopOnNonFiniteLoss()
    callback.set_model(Model())
    callback.on_train_batch_end(0, {"loss": np.float32(3.0)})
    with pytest.raises(NonFiniteLossError, match="at step 17"):
        callback.on_train_batch_end(0, {"loss": np.float32(math.inf)})


# ----------------------------------------------------------------- what Keras hands train_step / test_step
def _keras_models():
    """name -> (factory(dropout 0), batch maker) for every model, plain and with `TrainStep`; the batch maker
    returns (x, y, labels_are_features)."""
    from albert_tf.model import AlbertClassifier, AlbertForMultipleChoice, AlbertForPretraining, AlbertForSquad
    from albert_tf.tasks.classification import TrainableClassifier
    from albert_tf.tasks.pretraining import TrainablePretraining
    from albert_tf.tasks.race import TrainableMultipleChoice
    from albert_tf.tasks.squad import TrainableSquad
    from tests.helpers import tiny_config

    config = tiny_config(vocab_size=100)
    rng = np.random.RandomState(0)
    batch, seq = 4, 8

    def ids(shape):
        return {"input_ids": rng.randint(5, 100, shape).astype(np.int32), "input_mask": np.ones(shape, np.int32),
                "segment_ids": (np.arange(shape[-1]) >= shape[-1] // 2).astype(np.int32) * np.ones(shape, np.int32)}

    def pretraining():
        x = {**ids((batch, seq)), "masked_lm_positions": rng.randint(1, seq, (batch, 3)).astype(np.int32)}
        y = {"masked_lm_ids": rng.randint(5, 100, (batch, 3)).astype(np.int32),
             "masked_lm_weights": np.array([[1, 1, 0.5]] * 2 + [[1, 0, 0]] * 2, np.float32),
             "next_sentence_labels": np.array([[0], [1], [1], [0]], np.int32)}
        return x, y, True

    def squad(version_2):
        def make():
            x = ids((batch, seq))
            # context pieces at 4..6 (segment 1; 7 is the final [SEP]), and [CLS] for the impossible one
            y = {"start_positions": np.array([5, 4, 6, 0], np.int32), "end_positions": np.array([6, 4, 6, 0], np.int32)}
            if version_2:
                y["is_impossible"] = np.array([0, 0, 0, 1], np.int32)
            return x, y, True
        return make

    def classes(num, shape):
        return lambda: (ids(shape), rng.randint(0, num, (batch,)).astype(np.int32), False)

    return {
        "AlbertForPretraining": (lambda: AlbertForPretraining(config), pretraining),
        "TrainablePretraining": (lambda: TrainablePretraining(config), pretraining),
        "AlbertForSquad": (lambda: AlbertForSquad(config), squad(False)),
        "TrainableSquad": (lambda: TrainableSquad(config), squad(False)),
        "AlbertForSquad_v2": (lambda: AlbertForSquad(config, version_2=True, dropout_prob=0.0), squad(True)),
        "TrainableSquad_v2": (lambda: TrainableSquad(config, version_2=True, dropout_prob=0.0), squad(True)),
        "AlbertClassifier": (lambda: AlbertClassifier(config, 3, dropout_prob=0.0), classes(3, (batch, seq))),
        "TrainableClassifier": (lambda: TrainableClassifier(config, 3, dropout_prob=0.0), classes(3, (batch, seq))),
        "AlbertForMultipleChoice": (lambda: AlbertForMultipleChoice(config, dropout_prob=0.0),
                                    classes(4, (batch, 4, seq))),
        "TrainableMultipleChoice": (lambda: TrainableMultipleChoice(config, num_choices=4, dropout_prob=0.0),
                                    classes(4, (batch, 4, seq))),
    }


KERAS_MODELS = sorted(_keras_models())


def _compiled(make, run_eagerly=True):
    model = make()
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), run_eagerly=run_eagerly)
    return model


def _take(data, rows):
    if isinstance(data, dict):
        return {k: v[rows] for k, v in data.items()}
    return data[rows]


@pytest.mark.slow
@pytest.mark.parametrize("name", KERAS_MODELS)
def test_every_model_takes_features_x_y_and_sample_weights(name):
    """`train_on_batch` / `test_on_batch` / `evaluate` / `fit` on plain numpy dicts, in each form Keras hands a
    step: one feature dict (models whose labels are features), `(x, y)`, `(x, y, sample_weight)`. Same batch,
    same weights: the same results whatever the form; zero sample weights drop examples (the weighted-mean
    models: results of the other examples alone; the classifiers, Keras' sum over the batch: half of them)."""
    make, batch = _keras_models()[name]
    x, y, labels_are_features = batch()
    keras.utils.set_random_seed(0)
    model = _compiled(make)  # built by its first batch, not beforehand
    forms = {"x_y": lambda m: m.test_on_batch(x, y, return_dict=True)}
    if labels_are_features:
        forms["features"] = lambda m: m.test_on_batch({**x, **y}, return_dict=True)
        forms["evaluate"] = lambda m: m.evaluate({**x, **y}, batch_size=4, return_dict=True, verbose=0)
    else:
        forms["evaluate"] = lambda m: m.evaluate(x, y, batch_size=4, return_dict=True, verbose=0)
    results = {form: run(model) for form, run in forms.items()}
    reference = results["x_y"]
    assert "loss" in reference and 0 < reference["loss"] < 20
    for form, result in results.items():
        assert result.keys() == reference.keys(), form
        for key in reference:
            assert result[key] == pytest.approx(reference[key], rel=1e-6), (form, key)

    ones = model.test_on_batch(x, y, sample_weight=np.ones(4, np.float32), return_dict=True)
    assert ones["loss"] == pytest.approx(reference["loss"], rel=1e-6)
    weighted = model.test_on_batch(x, y, sample_weight=np.array([1, 1, 0, 0], np.float32), return_dict=True)
    first_two = model.test_on_batch(_take(x, slice(0, 2)), _take(y, slice(0, 2)), return_dict=True)
    factor = 1.0 if labels_are_features else 0.5
    assert weighted["loss"] == pytest.approx(factor * first_two["loss"], rel=1e-5)
    assert abs(weighted["loss"] - reference["loss"]) > 1e-4  # the weights changed something

    # one training step from the same weights: the same weights after it, whatever the form
    steps = {"x_y": lambda m: m.train_on_batch(x, y),
             "x_y_w": lambda m: m.train_on_batch(x, y, sample_weight=np.ones(4, np.float32))}
    if labels_are_features:
        steps["features"] = lambda m: m.train_on_batch({**x, **y})
    after = {}
    for form, step in steps.items():
        trained = _compiled(make)
        trained.test_on_batch(x, y)  # build
        trained.set_weights(model.get_weights())
        step(trained)
        after[form] = trained.get_weights()
    for form, weights in after.items():
        for a, b in zip(weights, after["x_y"]):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7, err_msg=form)
    assert any(not np.allclose(a, b) for a, b in zip(after["x_y"], model.get_weights()))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["AlbertForSquad_v2", "TrainableSquad_v2"])
def test_fit_on_x_y_in_a_graph_equals_it_run_eagerly(name):
    """The steps above run eagerly (quicker); here `fit` traces them, through Keras' step and `TrainStep`, with
    the v2.0 head, whose forward pass needs the gold starts that `y` holds: the same weights as run eagerly."""
    make, batch = _keras_models()[name]
    x, y, _ = batch()
    graph, eager = _compiled(make, run_eagerly=False), _compiled(make)
    eager.test_on_batch(x, y)  # build
    graph.test_on_batch(x, y)
    graph.set_weights(eager.get_weights())
    start = eager.get_weights()
    logs = {}
    for kind, model in (("graph", graph), ("eager", eager)):
        logs[kind] = model.fit(x, y, batch_size=2, epochs=1, shuffle=False, verbose=0).history
    assert set(logs["graph"]) >= {"loss", "start_loss", "end_loss", "cls_loss"}
    assert logs["graph"]["loss"][0] == pytest.approx(logs["eager"]["loss"][0], rel=1e-5)
    for a, b, s in zip(graph.get_weights(), eager.get_weights(), start):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert any(not np.allclose(a, s) for a, s in zip(graph.get_weights(), start))

def test_labels_in_two_places_or_of_the_wrong_kind_are_named():
    from albert_tf.model import dummy_inputs
    from albert_tf.model.feature_labels import merge_labels

    make, batch = _keras_models()["TrainablePretraining"]
    x, y, _ = batch()
    for built in (False, True):  # unbuilt, and built on other shapes as the pretraining task builds it
        model = _compiled(make)
        if built:
            model(dummy_inputs(num_predictions=1), training=False)
        assert np.isfinite(model.train_on_batch({**x, **y}, return_dict=True)["loss"])
    with pytest.raises(ValueError, match="masked_lm_ids given in both x and y"):
        model.train_on_batch({**x, "masked_lm_ids": y["masked_lm_ids"]}, y)
    with pytest.raises(TypeError, match="TrainablePretraining reads its labels as named features"):
        model.test_on_batch(x, y["masked_lm_ids"])
    assert merge_labels("m", x, None) is x
    make, batch = _keras_models()["TrainableClassifier"]
    x, _, _ = batch()
    with pytest.raises(ValueError, match="TrainableClassifier needs labels"):
        _compiled(make).train_on_batch(x)


def test_head_only_steps_hold_the_encoder_then_train_it(tiny_config):
    """LP-FT: with head_only_steps=2 the first two steps move the classifier only; the third moves the encoder
    too. Without it the first step moves both. (Adam without weight decay, so a held weight stays exact.)"""
    from albert_tf.model import dummy_inputs  # pylint: disable=import-outside-toplevel
    from albert_tf.tasks.classification import build_classifier  # pylint: disable=import-outside-toplevel

    features = dummy_inputs(batch_size=4, seq_length=8)
    labels = np.array([0, 1, 1, 0])

    def snapshot(model):
        return ([v.numpy().copy() for v in model.albert.trainable_variables],
                [v.numpy().copy() for v in model.output_layer.trainable_variables])

    def changed(before, after):
        return [not np.array_equal(a, b) for a, b in zip(before, after)]

    keras.utils.set_random_seed(1)
    model = build_classifier(tiny_config, 2, head_only_steps=2)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    assert model.get_config()["head_only_steps"] == 2
    start = snapshot(model)
    for _ in range(2):
        model.train_on_batch(features, labels)
    held = snapshot(model)
    assert not any(changed(start[0], held[0])) and all(changed(start[1], held[1]))
    model.train_on_batch(features, labels)
    assert sum(changed(held[0], snapshot(model)[0])) > len(held[0]) // 2

    keras.utils.set_random_seed(1)
    plain = build_classifier(tiny_config, 2)
    plain.compile(optimizer=keras.optimizers.Adam(1e-2))
    before = snapshot(plain)
    plain.train_on_batch(features, labels)
    assert sum(changed(before[0], snapshot(plain)[0])) > len(before[0]) // 2


def test_the_loss_scale_is_the_optimizers_own_before_and_after_it_is_built():
    assert steps.loss_scale_of(keras.optimizers.SGD(0.1)) == 1.0
    scaled = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1), initial_scale=256.0)
    assert steps.loss_scale_of(scaled) == 256.0  # before any step: the initial scale
    weight = keras.Variable(np.ones(2, np.float32))
    scaled.build([weight])
    scaled.dynamic_scale.assign(64.0)
    assert float(steps.loss_scale_of(scaled)) == 64.0


def test_logs_get_one_axis_under_multi_worker_training_only(monkeypatch):
    logs = {"loss": tf.constant(0.5), "accuracy": tf.constant(0.25)}
    assert steps.multi_worker_logs(logs) is logs
    monkeypatch.setattr(steps.keras_internals, "in_multi_worker_mode", lambda strategy: True)
    reshaped = steps.multi_worker_logs(logs)
    assert {k: v.numpy().tolist() for k, v in reshaped.items()} == {"loss": [0.5], "accuracy": [0.25]}


def test_a_task_model_trains_its_encoder_from_the_first_step(tiny_config):
    """`head_only_steps` defaults to 0 for every task model (SQuAD's passes none)."""
    from albert_tf.model import dummy_inputs  # pylint: disable=import-outside-toplevel
    from albert_tf.tasks.squad import TrainableSquad  # pylint: disable=import-outside-toplevel

    model = TrainableSquad(tiny_config)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    x = dummy_inputs(batch_size=2, seq_length=8)
    model(x)
    before = [v.numpy().copy() for v in model.albert.trainable_variables]
    model.train_on_batch(x, {"start_positions": np.array([1, 2]), "end_positions": np.array([2, 3])})
    moved = [not np.array_equal(a, v.numpy()) for a, v in zip(before, model.albert.trainable_variables)]
    assert sum(moved) > len(moved) // 2


def _classifier_step(tiny_config, **kwargs):
    from albert_tf.model import dummy_inputs  # pylint: disable=import-outside-toplevel
    from albert_tf.tasks.classification import build_classifier  # pylint: disable=import-outside-toplevel

    keras.utils.set_random_seed(3)
    model = build_classifier(tiny_config, 2, **kwargs)
    x = dummy_inputs(batch_size=4, seq_length=8)
    model(x)
    return model, x, np.array([0, 1, 1, 0])


def test_a_train_step_clips_the_update_and_logs_the_learning_rate(tiny_config):
    """SGD at rate 1 moves the weights by exactly the clipped gradient: global norm `clip_norm`."""
    model, x, y = _classifier_step(tiny_config, dropout_prob=0.0)
    model.clip_norm = 1e-3
    model.compile(optimizer=keras.optimizers.SGD(1.0))
    before = [v.numpy().copy() for v in model.trainable_variables]
    logs = model.train_on_batch(x, y, return_dict=True)
    moved = np.sqrt(sum(np.sum((v.numpy() - b) ** 2) for v, b in zip(model.trainable_variables, before)))
    assert moved == pytest.approx(1e-3, rel=1e-3)
    assert logs["learning_rate"] == pytest.approx(1.0)


def test_a_train_step_runs_the_model_in_training_mode(tiny_config):
    """With dropout, the loss of a train step (before its update) differs from the same batch's evaluation."""
    model, x, y = _classifier_step(tiny_config, dropout_prob=0.5)
    model.compile(optimizer=keras.optimizers.SGD(0.0))
    evaluated = model.test_on_batch(x, y, return_dict=True)["loss"]
    trained = [model.train_on_batch(x, y, return_dict=True)["loss"] for _ in range(3)]
    assert all(abs(loss - evaluated) > 1e-6 for loss in trained)


def test_a_step_merges_labels_given_apart_into_the_features():
    """SQuAD v2.0's end logits are conditioned on the gold start in training: a step given `(x, y)` must feed
    `y`'s `start_positions` to the model's forward pass, as one dict of features does."""
    from albert_tf.model import dummy_inputs  # pylint: disable=import-outside-toplevel
    from albert_tf.tasks.squad import TrainableSquad  # pylint: disable=import-outside-toplevel
    from tests.helpers import tiny_config  # pylint: disable=import-outside-toplevel

    x = dummy_inputs(batch_size=2, seq_length=8)
    y = {"start_positions": np.array([5, 0], np.int32), "end_positions": np.array([6, 0], np.int32),
         "is_impossible": np.array([0, 1], np.int32)}
    keras.utils.set_random_seed(0)
    model = TrainableSquad(tiny_config(vocab_size=100), version_2=True, dropout_prob=0.0)
    model.compile(optimizer=keras.optimizers.SGD(0.0))
    assert model.train_on_batch(x, y) == pytest.approx(model.train_on_batch({**x, **y}), rel=1e-6)


def test_an_evaluation_step_scores_the_model_in_inference_mode(tiny_config):
    """`test_step`: the loss is the mean cross-entropy of the logits with dropout off, the same every time, and
    the compiled metrics score the predictions against the labels."""
    model, x, y = _classifier_step(tiny_config, dropout_prob=0.5)
    model.compile(optimizer=keras.optimizers.SGD(0.0), metrics=["accuracy"])
    logits = model(x, training=False)
    expected = float(tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)))
    accuracy = float(np.mean(np.argmax(logits, -1) == y))
    for _ in range(2):
        logs = model.test_on_batch(x, y, return_dict=True)
        assert logs["loss"] == pytest.approx(expected, rel=1e-5)
        assert logs["accuracy"] == pytest.approx(accuracy)
