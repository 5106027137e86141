"""MLM + SOP pretraining: the loss and metrics, a whole run (checkpoints, eval results, TensorBoard, SavedModel),
resuming after SIGKILL, MirroredStrategy and MultiWorkerMirroredStrategy equivalence with one device, the error
cases, mixed precision, and the `run_pretraining.py` script."""

import glob
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import checkpoints
from albert_tf.checkpoints import CheckpointError, native
from albert_tf.config import AlbertConfig
from albert_tf.data import records
from albert_tf.errors import DataError
from albert_tf.model import dummy_inputs
from albert_tf.tasks.pretraining import PretrainingParams, PretrainingTask, TrainablePretraining, run_pretraining
from albert_tf.train import distribution
from albert_tf.train.distribution import StrategyError
from albert_tf.train.optimization import LAMB, create_optimizer
from tests.helpers import REPO, TWO_CPUS, assert_one_line_error, flag_args, tree_snapshot

SCRIPT = os.path.join(REPO, "run_pretraining.py")
SEED = 12345  # PretrainingParams.random_seed and --random_seed default
EVAL_KEYS = {"masked_lm_accuracy", "masked_lm_loss", "sentence_order_accuracy", "sentence_order_loss"}


# ----------------------------------------------------------------- helpers
def _tiny():
    return AlbertConfig(vocab_size=30000, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64, max_position_embeddings=128)


@pytest.fixture(scope="module")
def tiny_config_file(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("config") / "albert_config.json")
    _tiny().to_json_file(path)
    return path


@pytest.fixture(scope="module")
def init_checkpoint(tmp_path_factory):
    """An original-format checkpoint of a randomly initialised tiny model: every strategy starts from it."""
    keras.utils.set_random_seed(3)
    model = TrainablePretraining(_tiny())
    model(dummy_inputs(num_predictions=1), training=False)
    return checkpoints.save_checkpoint(model, str(tmp_path_factory.mktemp("init") / "model.ckpt"), "original")


def _params(records_fixture, output_dir, **overrides):
    path, seq, preds = records_fixture
    values = dict(albert_config=_tiny(), input_file=path, output_dir=str(output_dir), max_seq_length=seq,
                  max_predictions_per_seq=preds, train_batch_size=8, eval_batch_size=8, num_train_steps=4,
                  num_warmup_steps=0, learning_rate=5e-3, save_checkpoints_steps=2, keep_checkpoint_max=5,
                  iterations_per_loop=1, max_eval_steps=1, do_eval=False, log_every=0)
    values.update(overrides)
    return PretrainingParams(**values)


def _script_flags(config_file, records_fixture, output_dir, **overrides):
    path, seq, preds = records_fixture
    values = dict(albert_config_file=config_file, input_file=path, output_dir=str(output_dir),
                  max_seq_length=seq, max_predictions_per_seq=preds, train_batch_size=8, eval_batch_size=8,
                  num_train_steps=4, num_warmup_steps=0, learning_rate=5e-3, save_checkpoints_steps=2,
                  keep_checkpoint_max=5, iterations_per_loop=1, max_eval_steps=1, log_every=1)
    values.update(overrides)
    return flag_args(**values)


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env.update(PYTHONPATH=REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
               TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="-1", **extra)
    return env


def _run_script(args, timeout=300, prelude=None, **env):
    """Runs run_pretraining.py (after `prelude`, Python run first in the same process) in a subprocess."""
    if prelude:
        code = prelude + textwrap.dedent(f"""
            import runpy, sys
            sys.argv = [{SCRIPT!r}] + sys.argv[1:]
            runpy.run_path({SCRIPT!r}, run_name="__main__")
            """)
        command = [sys.executable, "-c", code, *args]
    else:
        command = [sys.executable, SCRIPT, *args]
    return subprocess.run(command, cwd=REPO, env=_env(**env), capture_output=True, text=True, timeout=timeout)


def _weights(prefix):
    """{`model/...` path key: array} of a checkpoint (the raw keys depend on which path TF met first)."""
    return native.read_native(prefix)[0]


def _slots(prefix):
    """The optimizer's state (m and v of every variable, in build order) and step of a checkpoint."""
    reader = tf.train.load_checkpoint(prefix)
    keys = [k for k in reader.get_variable_to_shape_map() if k.startswith("optimizer/_variables/")]
    assert keys, f"no optimizer slots in {prefix}"
    slots = {k: reader.get_tensor(k) for k in keys}
    slots["iterations"] = reader.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE")
    return slots


def _assert_same(actual, expected, atol=0.0, rtol=0.0, what=""):
    assert set(actual) == set(expected), what
    worst = 0.0
    for key in expected:
        a, e = np.asarray(actual[key]), np.asarray(expected[key])
        if atol == 0.0 and rtol == 0.0:
            assert np.array_equal(a, e), f"{what}: {key} differs"
        else:
            np.testing.assert_allclose(a, e, atol=atol, rtol=rtol, err_msg=f"{what}: {key}")
            worst = max(worst, float(np.max(np.abs(a.astype(np.float64) - e), initial=0.0)))
    return worst


def _reference_run(batches, init, output_prefix, **optimizer_args):
    """A single-device step per batch from `init` with the run's optimizer; returns the checkpoint prefix."""
    keras.utils.set_random_seed(SEED)
    model = TrainablePretraining(_tiny())
    model(dummy_inputs(num_predictions=1), training=False)
    model.compile(optimizer=create_optimizer(**optimizer_args))
    model.optimizer.build(model.trainable_variables)
    checkpoints.load_checkpoint(model, init)
    dataset = tf.data.Dataset.from_tensors(batches[0])
    for batch in batches[1:]:
        dataset = dataset.concatenate(tf.data.Dataset.from_tensors(batch))
    model.fit(dataset, epochs=1, steps_per_epoch=len(batches), verbose=0)
    return tf.train.Checkpoint(model=model, optimizer=model.optimizer).write(output_prefix)


def _first_batch(records_fixture, batch_size=8):
    path, seq, preds = records_fixture
    return next(iter(records.pretraining_dataset(path, seq, preds, batch_size, is_training=False)))


def _log_tail(result):
    return f"exit {result.returncode}\n--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-6000:]}"


# ----------------------------------------------------------------- loss and metrics
def _numpy_objective(outputs, batch):
    """The original's loss: MLM cross-entropy weighted by masked_lm_weights, sum / (sum w + 1e-5), plus the
    mean SOP cross-entropy; and the per-position pieces for the metrics."""
    def nll(logits, labels):
        logits = np.asarray(logits, np.float64)
        shifted = logits - logits.max(-1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
        return -np.take_along_axis(log_probs, labels[..., None], -1)[..., 0], logits.argmax(-1) == labels

    weights = np.asarray(batch["masked_lm_weights"], np.float64)
    mlm_nll, mlm_correct = nll(outputs["mlm_logits"], np.asarray(batch["masked_lm_ids"]))
    sop_nll, sop_correct = nll(outputs["sop_logits"], np.asarray(batch["next_sentence_labels"]))
    total = max(weights.sum(), 1e-30)  # Keras' weighted mean of nothing is 0
    return {"loss": (mlm_nll * weights).sum() / (weights.sum() + 1e-5) + sop_nll.mean(),
            "masked_lm_loss": (mlm_nll * weights).sum() / total,
            "masked_lm_accuracy": (mlm_correct * weights).sum() / total,
            "masked_lm_accuracy_unweighted": mlm_correct.mean(),
            "sentence_order_loss": sop_nll.mean(), "sentence_order_accuracy": sop_correct.mean()}


def _model(config=None, **kwargs):
    keras.utils.set_random_seed(1)
    model = TrainablePretraining(config or _tiny(), **kwargs)
    model(dummy_inputs(num_predictions=1), training=False)
    return model


def _reweighted(batch):
    """Fractional masked_lm_weights, some real predictions weighted 0, so weighting shows in every number."""
    batch = {k: v.numpy() for k, v in batch.items()}
    rng = np.random.RandomState(0)
    weights = batch["masked_lm_weights"] * rng.uniform(0.2, 1.0, batch["masked_lm_weights"].shape)
    weights[:, 1] = 0.0
    batch["masked_lm_weights"] = weights.astype(np.float32)
    return batch


@pytest.mark.slow
def test_reported_loss_with_lr_zero_is_the_originals_formula(pretraining_records):
    batch = _reweighted(_first_batch(pretraining_records))
    model = _model()
    expected = _numpy_objective(model(batch, training=False), batch)
    model.compile(optimizer=LAMB(learning_rate=0.0))
    before = [v.numpy() for v in model.trainable_variables]
    logs = model.fit(tf.data.Dataset.from_tensors(batch), epochs=1, steps_per_epoch=1, verbose=0).history
    for name in ("loss", "masked_lm_loss", "sentence_order_loss", "masked_lm_accuracy", "sentence_order_accuracy"):
        assert logs[name][0] == pytest.approx(expected[name], rel=1e-5, abs=1e-6), name
    assert logs["learning_rate"][0] == 0.0
    for a, b in zip(before, model.trainable_variables):
        np.testing.assert_array_equal(a, b.numpy())  # lr 0: nothing moved


@pytest.mark.slow
def test_gradient_is_that_of_the_originals_formula(pretraining_records):
    """SGD with lr 1 and no clipping moves each weight by minus the gradient of the objective that train_step
    minimises; it equals the gradient of the formula (including the + 1e-5) computed here."""
    batch = _reweighted(_first_batch(pretraining_records))
    model = _model(clip_norm=1e9)
    with tf.GradientTape() as tape:
        outputs = model(batch, training=True)
        weights = tf.constant(batch["masked_lm_weights"])
        mlm = tf.nn.sparse_softmax_cross_entropy_with_logits(batch["masked_lm_ids"], outputs["mlm_logits"])
        sop = tf.nn.sparse_softmax_cross_entropy_with_logits(batch["next_sentence_labels"], outputs["sop_logits"])
        loss = tf.reduce_sum(mlm * weights) / (tf.reduce_sum(weights) + 1e-5) + tf.reduce_mean(sop)
    grads = [tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, model.trainable_variables)]
    before = [v.numpy() for v in model.trainable_variables]
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=1.0))
    model.fit(tf.data.Dataset.from_tensors(batch), epochs=1, steps_per_epoch=1, verbose=0)
    for variable, old, grad in zip(model.trainable_variables, before, grads):
        np.testing.assert_allclose(old - variable.numpy(), grad, rtol=1e-3, atol=1e-6, err_msg=variable.path)


@pytest.mark.slow
def test_all_zero_mlm_weights_give_the_sop_loss_not_nan(pretraining_records):
    batch = {k: v.numpy() for k, v in _first_batch(pretraining_records).items()}
    batch["masked_lm_weights"] = np.zeros_like(batch["masked_lm_weights"])
    model = _model()
    expected = _numpy_objective(model(batch, training=False), batch)
    model.compile(optimizer=LAMB(learning_rate=0.0))
    logs = model.fit(tf.data.Dataset.from_tensors(batch), epochs=1, steps_per_epoch=1, verbose=0).history
    assert np.isfinite(logs["loss"][0])
    assert logs["loss"][0] == pytest.approx(expected["sentence_order_loss"], rel=1e-5)


def test_eval_metrics_weight_masked_lm_accuracy_by_masked_lm_weights(pretraining_records):
    """The MLM bias is pushed up for one label so every position predicts it, and the SOP bias for label 0:
    the accuracies are then known fractions, and the weighted MLM accuracy differs from the unweighted one."""
    batch = _reweighted(_first_batch(pretraining_records))
    labels, weights = batch["masked_lm_ids"], batch["masked_lm_weights"]
    values, counts = np.unique(labels[weights > 0], return_counts=True)
    label = int(values[np.argmax(counts)])
    weights[(labels == label) & (weights > 0)] = 1.0  # the predicted label weighs more than the rest
    model = _model()
    bias = model.masked_lm.output_bias if hasattr(model.masked_lm, "output_bias") else [
        w for w in model.masked_lm.weights if w.path.endswith("output_bias")][0]
    bias.assign(tf.tensor_scatter_nd_update(tf.zeros_like(bias), [[label]], [1e4]))
    model.seq_relationship.bias.assign([1e4, 0.0])
    expected = _numpy_objective(model(batch, training=False), batch)
    assert 0 < expected["masked_lm_accuracy"] < 1 and 0 < expected["sentence_order_accuracy"] < 1
    assert abs(expected["masked_lm_accuracy"] - expected["masked_lm_accuracy_unweighted"]) > 0.01
    assert expected["masked_lm_accuracy"] == pytest.approx(weights[labels == label].sum() / weights.sum())
    assert expected["sentence_order_accuracy"] == pytest.approx(np.mean(batch["next_sentence_labels"] == 0))
    model.compile()
    results = model.evaluate(tf.data.Dataset.from_tensors(batch), steps=1, return_dict=True, verbose=0)
    assert EVAL_KEYS <= set(results)
    for name in EVAL_KEYS:
        assert results[name] == pytest.approx(expected[name], rel=1e-5, abs=1e-6), name


def test_eval_is_at_most_max_eval_steps_batches_and_ends_with_the_records(pretraining_records, tmp_path):
    """More `max_eval_steps` than the records have batches (the demo's 20 on its held-out book): every batch is
    evaluated once and Keras does not warn that the input ran out of data; fewer: only the first ones."""
    path, seq, preds = pretraining_records
    batches = sum(1 for _ in tf.data.TFRecordDataset(path)) // 4  # full batches of 4
    assert batches >= 2
    model = _model()
    model.compile()

    def first(n):
        data = records.pretraining_dataset(path, seq, preds, 4, is_training=False).take(n)
        return model.evaluate(data, return_dict=True, verbose=0)

    strategy = tf.distribute.get_strategy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        beyond = PretrainingTask().evaluate(model, _params(pretraining_records, tmp_path, eval_batch_size=4,
                                                            max_eval_steps=batches + 5), strategy)
        one = PretrainingTask().evaluate(model, _params(pretraining_records, tmp_path, eval_batch_size=4,
                                                         max_eval_steps=1), strategy)
    assert not [w for w in caught if "ran out of data" in str(w.message)]
    for results, expected in ((beyond, first(batches)), (one, first(1))):
        for name in EVAL_KEYS:
            assert results[name] == pytest.approx(expected[name], rel=1e-5), name
    assert beyond["masked_lm_loss"] != pytest.approx(one["masked_lm_loss"], rel=1e-5)
    too_big = 4 * batches + 4
    with pytest.raises(DataError, match=f"hold .* fewer than one batch of --eval_batch_size={too_big}"):
        PretrainingTask().evaluate(model, _params(pretraining_records, tmp_path, eval_batch_size=too_big), strategy)


# ----------------------------------------------------------------- a whole tiny run
@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, pretraining_records, spm_model_file):
    root = tmp_path_factory.mktemp("run")
    params = _params(pretraining_records, root / "out", num_train_steps=6, save_checkpoints_steps=2,
                     keep_checkpoint_max=2, iterations_per_loop=2, num_warmup_steps=2, do_eval=True,
                     max_eval_steps=1, export_dir=str(root / "export"), spm_model_file=spm_model_file)
    return params, run_pretraining(params)


@pytest.mark.slow
def test_run_keeps_at_most_keep_checkpoint_max_checkpoints(finished_run):
    params, outcome = finished_run
    assert outcome["step"] == 6
    assert sorted(os.path.basename(p) for p in glob.glob(os.path.join(params.output_dir, "ckpt-*.index"))) == [
        "ckpt-4.index", "ckpt-6.index"]
    state = tf.train.get_checkpoint_state(params.output_dir)
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["ckpt-4", "ckpt-6"]
    assert int(_slots(state.model_checkpoint_path)["iterations"]) == 6
    assert not glob.glob(os.path.join(params.output_dir, "*.tmp*"))


def test_run_writes_eval_results_with_the_original_keys(finished_run):
    params, outcome = finished_run
    path = os.path.join(params.output_dir, "eval_results.txt")
    assert outcome["eval_results_file"] == path
    with open(path) as f:
        lines = f.read().splitlines()
    results = dict(line.split(" = ") for line in lines)
    assert EVAL_KEYS | {"global_step"} <= set(results)
    assert lines == sorted(lines)
    assert int(results["global_step"]) == 6
    for key in EVAL_KEYS:
        assert np.isfinite(float(results[key]))
        assert float(results[key]) == pytest.approx(outcome["eval_results"][key])
    assert 0.0 <= float(results["sentence_order_accuracy"]) <= 1.0
    assert float(results["masked_lm_loss"]) > 5.0  # 30000-way softmax after 6 tiny steps


def test_run_writes_tensorboard_scalars_against_the_global_step(finished_run):
    params, _ = finished_run
    files = glob.glob(os.path.join(params.output_dir, "train", "**", "events.out.tfevents.*"), recursive=True)
    assert files
    scalars = {}
    for path in files:
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                scalars.setdefault(value.tag, {})[event.step] = float(tf.make_ndarray(value.tensor))
    for tag in ("learning_rate", "loss", "masked_lm_loss", "sentence_order_loss", "masked_lm_accuracy",
                "sentence_order_accuracy"):
        assert tag in scalars, sorted(scalars)
        assert sorted(scalars[tag]) == [2, 4, 6], (tag, scalars[tag])  # every execution (2 steps), by step
        assert all(np.isfinite(v) for v in scalars[tag].values())
    # the schedule after step s: warmup 2 steps then linear decay to 0 at step 6
    lr = params.learning_rate
    assert scalars["learning_rate"][2] == pytest.approx(lr * (1 - 2 / 6), rel=1e-5)
    assert scalars["learning_rate"][6] == 0.0


FRESH_PROCESS = """
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401

export_dir, inputs_file, outputs_file = sys.argv[1:4]
loaded = tf.saved_model.load(export_dir)
inputs = np.load(inputs_file)
outputs = loaded.signatures["serving_default"](**{k: tf.constant(inputs[k]) for k in inputs.files})
np.savez(outputs_file, **{k: v.numpy() for k, v in outputs.items()})
print(json.dumps({"signatures": sorted(loaded.signatures.keys()),
                  "albert_tf_imported": any(m.startswith("albert_tf") for m in sys.modules)}))
"""


@pytest.mark.slow
def test_saved_model_serves_in_a_fresh_process_like_the_trained_model(finished_run, tmp_path):
    params, outcome = finished_run
    export_dir = outcome["export_dir"]
    assert os.path.exists(os.path.join(export_dir, "saved_model.pb"))
    rng = np.random.RandomState(0)
    ids = rng.randint(5, 30000, (2, 12)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 8:] = 0
    inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": (np.arange(12) >= 6).astype(np.int32)[None]
              .repeat(2, 0)}
    np.savez(tmp_path / "inputs.npz", **inputs)
    script = tmp_path / "serve.py"
    script.write_text(FRESH_PROCESS)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TF_CONFIG")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    result = subprocess.run([sys.executable, str(script), export_dir, str(tmp_path / "inputs.npz"),
                             str(tmp_path / "outputs.npz")], cwd=str(tmp_path), env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, _log_tail(result)
    info = json.loads(result.stdout.strip().splitlines()[-1])
    assert not info["albert_tf_imported"]
    assert {"serving_default", "mlm", "sop", "tokenization_info"} <= set(info["signatures"])
    served = np.load(tmp_path / "outputs.npz")

    model = TrainablePretraining(_tiny())
    checkpoints.load_checkpoint(model, tf.train.latest_checkpoint(params.output_dir))
    expected = model.albert(inputs, training=False)
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(served[name], expected[name].numpy(), rtol=1e-5, atol=1e-5, err_msg=name)


# ----------------------------------------------------------------- resume after SIGKILL
@pytest.mark.slow
def test_run_killed_after_a_checkpoint_resumes_to_bit_identical_weights(
        tmp_path, init_checkpoint, pretraining_records):
    """With dropout 0.1 (hidden and attention), a run SIGKILLed after a checkpoint and started again ends with the
    weights and optimizer state of an uninterrupted run, bit for bit."""
    total = 12
    config = AlbertConfig.from_dict({**_tiny().to_dict(), "hidden_dropout_prob": 0.1,
                                     "attention_probs_dropout_prob": 0.1})
    config_file = str(tmp_path / "albert_config.json")
    config.to_json_file(config_file)
    settings = dict(num_train_steps=total, num_warmup_steps=3, save_checkpoints_steps=2, iterations_per_loop=1,
                    learning_rate=5e-3, init_checkpoint=init_checkpoint)
    killed_dir = tmp_path / "killed"
    log_path = tmp_path / "killed.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, SCRIPT, *_script_flags(config_file, pretraining_records, killed_dir,
                                                    do_train=True, log_every=0, **settings)],
            cwd=REPO, env=_env(), stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 300
    try:
        # a checkpoint counts once published: its files are written first, the `checkpoint` state file last
        while not (os.path.exists(killed_dir / "checkpoint") and tf.train.latest_checkpoint(str(killed_dir))):
            assert process.poll() is None, f"run ended before its first checkpoint: {log_path.read_text()[-3000:]}"
            assert time.time() < deadline, "no checkpoint after 300 s"
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
    assert process.returncode == -signal.SIGKILL
    killed_at = int(_slots(tf.train.latest_checkpoint(str(killed_dir)))["iterations"])
    assert 2 <= killed_at < total, "the run was not killed mid-way"

    resumed = run_pretraining(_params(pretraining_records, killed_dir, albert_config=config, **settings))
    assert resumed["step"] == total
    assert resumed["train_examples_per_second"] > 0  # it trained the remaining steps
    uninterrupted = run_pretraining(_params(pretraining_records, tmp_path / "straight", albert_config=config,
                                            **settings))
    assert uninterrupted["step"] == total

    final_killed = os.path.join(killed_dir, f"ckpt-{total}")
    final_straight = os.path.join(tmp_path / "straight", f"ckpt-{total}")
    _assert_same(_weights(final_killed), _weights(final_straight), what="weights")
    _assert_same(_slots(final_killed), _slots(final_straight), what="optimizer state")
    # and the weights were still moving at the end
    earlier = _weights(os.path.join(tmp_path / "straight", f"ckpt-{total - 8}"))
    assert any(not np.array_equal(earlier[k], v) for k, v in _weights(final_straight).items())
    # the comparison can fail: the same run without dropout ends elsewhere
    undropped = run_pretraining(_params(pretraining_records, tmp_path / "no_dropout", **settings))
    assert undropped["step"] == total
    no_dropout = _weights(os.path.join(tmp_path / "no_dropout", f"ckpt-{total}"))
    assert max(np.abs(no_dropout[k] - v).max() for k, v in _weights(final_straight).items()) > 1e-4
    print(f"killed at step {killed_at} of {total}; resumed run bit-identical to the uninterrupted one")


# ----------------------------------------------------------------- distribution strategies


# What the README states for N replicas against one device after a step (measured: about 3e-7 on 2 CPU replicas
# and on 2 worker processes; float32 sums in another order).
REPLICA_WEIGHT_TOLERANCE = 1e-6


def _max_difference(a, b):
    return max(float(np.abs(a[k].astype(np.float64) - b[k]).max()) for k in b)


@pytest.mark.slow
def test_mirrored_over_two_cpus_equals_one_device(tmp_path, tiny_config_file, init_checkpoint, pretraining_records):
    """Two replicas of 4 examples each make the same 2 steps as one device on the 8-example global batch, to
    within REPLICA_WEIGHT_TOLERANCE; one replica's half of each batch alone ends far outside it."""
    settings = dict(num_train_steps=2, save_checkpoints_steps=2, learning_rate=1e-2,
                    init_checkpoint=init_checkpoint)
    mirrored = _run_script(_script_flags(tiny_config_file, pretraining_records, tmp_path / "mirrored",
                                         do_train=True, strategy="mirrored", **settings), prelude=TWO_CPUS)
    assert mirrored.returncode == 0, _log_tail(mirrored)
    assert "device:CPU:1" in mirrored.stderr  # MirroredStrategy really had two devices
    single = run_pretraining(_params(pretraining_records, tmp_path / "single", **settings))
    assert single["step"] == 2

    ours, reference = os.path.join(tmp_path / "mirrored", "ckpt-2"), os.path.join(tmp_path / "single", "ckpt-2")
    worst = _assert_same(_weights(ours), _weights(reference), atol=REPLICA_WEIGHT_TOLERANCE, what="weights")
    _assert_same(_slots(ours), _slots(reference), atol=1e-7, rtol=1e-3, what="optimizer m and v")
    print(f"mirrored (2 CPUs) vs one device after 2 steps: max |weight difference| {worst:.2e}")

    # The global batches of the one-device run (its seeded shuffle, rebuilt), replayed: the same weights; replica
    # 0's half of each (its share, were the gradients not summed across replicas) gives weights far away.
    path, seq, preds = pretraining_records
    keras.utils.set_random_seed(SEED)
    batches = list(records.pretraining_dataset(path, seq, preds, 8, is_training=True, seed=SEED).take(2))
    optimizer_args = dict(name="lamb", learning_rate=1e-2, num_train_steps=2, num_warmup_steps=0)
    replay = _reference_run(batches, init_checkpoint, str(tmp_path / "replay" / "ckpt"), **optimizer_args)
    assert _max_difference(_weights(replay), _weights(reference)) <= REPLICA_WEIGHT_TOLERANCE
    halves = [{k: v[:4] for k, v in batch.items()} for batch in batches]
    half = _reference_run(halves, init_checkpoint, str(tmp_path / "half" / "ckpt"), **optimizer_args)
    assert _max_difference(_weights(half), _weights(ours)) > 100 * REPLICA_WEIGHT_TOLERANCE


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.mark.slow
def test_multi_worker_with_two_processes_equals_one_device(
        tmp_path, tiny_config_file, init_checkpoint, pretraining_records):
    """Two local worker processes (one CPU replica each, TF_CONFIG with two localhost ports) train 2 steps; the
    chief's checkpoint equals a single-device run on the same global batches (each worker's 4 examples)."""
    settings = dict(num_train_steps=2, save_checkpoints_steps=2, learning_rate=1e-2,
                    init_checkpoint=init_checkpoint)
    out = tmp_path / "multi"
    cluster = {"worker": [f"localhost:{port}" for port in _free_ports(2)]}
    workers = []
    for index in range(2):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        log = open(tmp_path / f"worker_{index}.log", "w")
        workers.append((subprocess.Popen(
            [sys.executable, SCRIPT, *_script_flags(tiny_config_file, pretraining_records, out, do_train=True,
                                                    strategy="multi_worker", **settings)],
            cwd=REPO, env=_env(TF_CONFIG=tf_config), stdout=log, stderr=subprocess.STDOUT), log))
    try:
        for process, _ in workers:
            process.wait(timeout=400)
    finally:
        for process, log in workers:
            if process.poll() is None:
                process.kill()
                process.wait()
            log.close()
    logs = [open(tmp_path / f"worker_{i}.log").read() for i in range(2)]
    for (process, _), log in zip(workers, logs):
        assert process.returncode == 0, log[-6000:]
    assert "num_workers = 2" in logs[0]

    chief = os.path.join(out, "ckpt-2")
    other = os.path.join(out, ".workers", "worker_1", "ckpt-2")
    _assert_same(_weights(other), _weights(chief), what="the two workers' weights")
    assert os.path.exists(os.path.join(out, "saved_model", "2", "saved_model.pb"))  # exported by the chief only

    # the global batch of step k: worker 0's k-th batch of 4, then worker 1's (the shuffles' op seeds combine
    # with TF's global seed, which run_pretraining sets from --random_seed before building the datasets)
    path, seq, preds = pretraining_records
    keras.utils.set_random_seed(SEED)
    per_worker = []
    for index in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=index, num_replicas_in_sync=2)
        dataset = records.pretraining_dataset(path, seq, preds, 4, is_training=True, seed=SEED,
                                              input_context=context)
        per_worker.append(list(dataset.take(2)))
    batches = [{k: tf.concat([per_worker[0][step][k], per_worker[1][step][k]], 0) for k in per_worker[0][step]}
               for step in range(2)]
    optimizer_args = dict(name="lamb", learning_rate=1e-2, num_train_steps=2, num_warmup_steps=0)
    reference = _reference_run(batches, init_checkpoint, str(tmp_path / "reference" / "ckpt"), **optimizer_args)
    worst = _assert_same(_weights(chief), _weights(reference), atol=REPLICA_WEIGHT_TOLERANCE, what="weights")
    _assert_same(_slots(chief), _slots(reference), atol=1e-7, rtol=1e-3, what="optimizer m and v")
    print(f"multi-worker (2 processes) vs one device after 2 steps: max |weight difference| {worst:.2e}")

    # the comparison can fail: one worker's half of the batch alone gives other weights
    halves = [{k: v[:4] for k, v in batch.items()} for batch in batches]
    half = _reference_run(halves, init_checkpoint, str(tmp_path / "half" / "ckpt"), **optimizer_args)
    assert _max_difference(_weights(half), _weights(chief)) > 100 * REPLICA_WEIGHT_TOLERANCE


# ----------------------------------------------------------------- errors
def test_records_of_another_length_are_refused_naming_it(tmp_path, spm_model_file, pretraining_records):
    from albert_tf.data.pretraining import PretrainingConfig, create_pretraining_data

    short = str(tmp_path / "short.tfrecord")
    create_pretraining_data(os.path.join(REPO, "data", "corpus", "sample_text.txt"), [short],
                            spm_model_file=spm_model_file,
                            config=PretrainingConfig(max_seq_length=32, max_predictions_per_seq=10, dupe_factor=1))
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"input_ids.*length 32.*expects 64.*max_seq_length=64"):
        run_pretraining(_params((short, 64, 10), out))
    assert not out.exists()  # refused before anything was written
    with pytest.raises(ValueError, match=r"masked_lm_positions.*length 10.*expects 20.*max_predictions_per_seq"):
        run_pretraining(_params(pretraining_records, out, max_predictions_per_seq=20))


def test_output_dir_of_a_different_model_is_refused(tmp_path, pretraining_records):
    out = tmp_path / "out"
    out.mkdir()
    AlbertConfig.from_dict({**_tiny().to_dict(), "num_hidden_layers": 3}).to_json_file(str(out / "albert_config.json"))
    (out / "ckpt-7.index").write_text("")
    (out / "checkpoint").write_text('model_checkpoint_path: "ckpt-7"\n')
    before = tree_snapshot(out)
    with pytest.raises(ValueError, match=r"different model.*num_hidden_layers"):
        run_pretraining(_params(pretraining_records, out))
    assert tree_snapshot(out) == before


def test_init_checkpoint_of_another_config_is_refused_naming_the_variable(tmp_path, pretraining_records):
    keras.utils.set_random_seed(0)
    other = TrainablePretraining(AlbertConfig.from_dict({**_tiny().to_dict(), "hidden_size": 48,
                                                     "intermediate_size": 96}))
    other(dummy_inputs(num_predictions=1), training=False)
    prefix = checkpoints.save_checkpoint(other, str(tmp_path / "other" / "model.ckpt"), "original")
    out = tmp_path / "out"
    with pytest.raises(CheckpointError, match=r"bert/\S+") as err:
        run_pretraining(_params(pretraining_records, out, init_checkpoint=prefix))
    assert "48" in str(err.value) and "32" in str(err.value)  # both shapes are named
    assert not glob.glob(str(out / "ckpt-*"))


def test_strategy_tpu_without_a_tpu_is_a_clear_error(tmp_path, pretraining_records):
    start = time.time()
    with pytest.raises(StrategyError, match="no TPU could be reached"):
        run_pretraining(_params(pretraining_records, tmp_path / "out", strategy="tpu"))
    closed_port = _free_ports(1)[0]
    with pytest.raises(StrategyError, match=rf"no TPU could be reached.*127\.0\.0\.1:{closed_port} does not answer"):
        run_pretraining(_params(pretraining_records, tmp_path / "out", use_tpu=True,
                                tpu_name=f"grpc://127.0.0.1:{closed_port}"))
    assert time.time() - start < 30
    assert not (tmp_path / "out").exists()


def test_tpu_metadata_lookup_is_bounded_in_time(monkeypatch):
    """A named TPU without --tpu_zone/--gcp_project makes the resolver ask the GCE metadata server, with no
    timeout of its own; a server that never answers gives a StrategyError after TPU_CONNECT_TIMEOUT."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        for proxy in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
            monkeypatch.delenv(proxy, raising=False)
        monkeypatch.setenv("GCE_METADATA_HOST", f"127.0.0.1:{silent.getsockname()[1]}")
        monkeypatch.setattr(distribution, "TPU_CONNECT_TIMEOUT", 1.0)
        start = time.time()
        with pytest.raises(StrategyError, match="no TPU could be reached.*my-tpu.*timed out"):
            distribution.get_strategy("tpu", tpu_name="my-tpu")
        assert time.time() - start < 10
    finally:
        silent.close()


@pytest.mark.slow
def test_script_use_tpu_on_a_machine_without_tpu_fails_clearly(tmp_path, tiny_config_file, pretraining_records):
    start = time.time()
    result = _run_script(_script_flags(tiny_config_file, pretraining_records, tmp_path / "out", do_train=True,
                                       use_tpu=True, tpu_name="local"), timeout=180)
    assert_one_line_error(result, "no TPU could be reached (tpu_name='local'", status=1)
    assert time.time() - start < 120


# ----------------------------------------------------------------- mixed precision
@pytest.mark.slow
def test_mixed_precision_bf16_trains_with_finite_loss(tmp_path, pretraining_records):
    outcome = run_pretraining(_params(pretraining_records, tmp_path / "out", num_train_steps=3,
                                      save_checkpoints_steps=3, mixed_precision="bf16", do_eval=True))
    assert outcome["dtype_policy"] == "mixed_bfloat16"
    assert keras.mixed_precision.global_policy().name == "float32"  # set for the run only
    assert outcome["step"] == 3  # StopOnNonFiniteLoss would have stopped a NaN
    assert all(np.isfinite(outcome["eval_results"][k]) for k in EVAL_KEYS)
    weights = {k: w for k, w in _weights(os.path.join(tmp_path / "out", "ckpt-3")).items()
               if not k.startswith("model/optimizer/")}
    assert weights and all(w.dtype == np.float32 and np.isfinite(w).all() for w in weights.values())  # masters


# ----------------------------------------------------------------- the script
@pytest.mark.slow
def test_script_trains_evaluates_and_exports_with_custom_config_and_records(
        tmp_path, tiny_config_file, pretraining_records):
    out = tmp_path / "out"
    result = _run_script(_script_flags(tiny_config_file, pretraining_records, out, do_train=True, do_eval=True,
                                       num_train_steps=2))
    assert result.returncode == 0, _log_tail(result)
    assert "at step 2" in result.stdout and "masked_lm_accuracy=" in result.stdout
    assert os.path.exists(out / "ckpt-2.index")
    assert "global_step = 2" in (out / "eval_results.txt").read_text()
    assert os.path.exists(out / "saved_model" / "2" / "saved_model.pb")


@pytest.mark.slow
def test_script_without_do_train_or_do_eval_is_a_usage_error(tmp_path, tiny_config_file, pretraining_records):
    result = _run_script(_script_flags(tiny_config_file, pretraining_records, tmp_path / "out", do_train=False),
                         timeout=120)
    assert result.returncode != 0
    assert "At least one of --do_train or --do_eval must be True" in result.stdout + result.stderr
    assert not (tmp_path / "out").exists()


def test_trainable_pretraining_keeps_its_registered_keras_name():
    """It was `AlbertPretrainer`: `.keras` files saved then name it so, and must still load."""
    assert keras.saving.get_registered_name(TrainablePretraining) == "albert_tf>AlbertPretrainer"
    assert keras.saving.get_registered_object("albert_tf>AlbertPretrainer") is TrainablePretraining
