"""What the README claims of the runtime options, each run: float16 mixed precision (loss scaling) in pretraining
and fine-tuning, `--strategy=one_device`, and `run_classifier.py --vocab_file` (WordPiece fine-tuning of the
Chinese tiny config)."""

import glob
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tasks.classification import ClassifierParams, TrainableClassifier, run_classifier
from albert_tf.tasks.pretraining import PretrainingParams, TrainablePretraining, run_pretraining
from albert_tf.text.tokenization import FullTokenizer, encode_pair
from albert_tf.train import runner
from tests.helpers import (
    DATA_DIR,
    FIXTURES_DIR,
    SAMPLE_GLUE,
    SPM,
    checkpoint_weights,
    flag_args,
    log_tail,
    run_script,
    tiny_config,
)


# ----------------------------------------------------------------- float16 with loss scaling
@pytest.fixture()
def float16_policy():
    previous = keras.mixed_precision.global_policy()
    yield lambda: keras.mixed_precision.set_global_policy("mixed_float16")
    keras.mixed_precision.set_global_policy(previous)


def _pretraining_batch(rng, batch=4, seq=16, predictions=3, vocab=100):
    ids = rng.randint(5, vocab, (batch, seq)).astype(np.int32)
    return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": (np.arange(seq) >= seq // 2)
            .astype(np.int32)[None].repeat(batch, 0),
            "masked_lm_positions": rng.randint(1, seq, (batch, predictions)).astype(np.int32),
            "masked_lm_ids": rng.randint(5, vocab, (batch, predictions)).astype(np.int32),
            "masked_lm_weights": np.ones((batch, predictions), np.float32),
            "next_sentence_labels": rng.randint(0, 2, (batch, 1)).astype(np.int32)}


def _classifier_batch(rng, batch=4, seq=16, vocab=100):
    ids = rng.randint(5, vocab, (batch, seq)).astype(np.int32)
    return ({"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)},
            rng.randint(0, 2, (batch,)).astype(np.int32))


@pytest.mark.parametrize("kind", ["pretraining", "classifier"])
def test_a_float16_step_is_the_float32_step(kind, float16_policy):
    """One SGD step (lr 1, the step's clipping to global norm 1) under mixed_float16, through the loss-scale
    optimizer, moves the weights as the float32 step does, to float16's precision: the loss is scaled up, the
    gradients clipped on their unscaled norm and unscaled before the update. Forgetting either would make the
    update 1024 times too small or too large."""
    config = tiny_config(vocab_size=100)
    rng = np.random.RandomState(0)
    data = (_pretraining_batch(rng),) if kind == "pretraining" else _classifier_batch(rng)

    def make():
        if kind == "pretraining":
            return TrainablePretraining(config)
        return TrainableClassifier(config, 2, dropout_prob=0.0)

    keras.utils.set_random_seed(1)
    full = make()
    full.compile(optimizer=keras.optimizers.SGD(learning_rate=1.0), run_eagerly=True)
    full.test_on_batch(*data)
    start = [w.copy() for w in full.get_weights()]
    full.train_on_batch(*data)

    float16_policy()
    half = make()
    optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(learning_rate=1.0), initial_scale=1024.0)
    half.compile(optimizer=optimizer, run_eagerly=True)
    half.test_on_batch(*data)
    half.set_weights(start)
    assert half.albert.embeddings.compute_dtype == "float16" and half.albert.variable_dtype == "float32"
    logs = half.train_on_batch(*data, return_dict=True)
    assert np.isfinite(logs["loss"]) and float(optimizer.dynamic_scale) == 1024.0  # the step was applied

    moved_full = np.concatenate([(a - s).ravel() for a, s in zip(full.get_weights(), start)])
    moved_half = np.concatenate([(a - s).ravel() for a, s in zip(half.get_weights(), start)])
    relative = np.linalg.norm(moved_half - moved_full) / np.linalg.norm(moved_full)
    assert np.linalg.norm(moved_full) > 1e-2 and relative < 0.02, relative  # measured: 1e-3


@pytest.mark.slow
def test_pretraining_run_in_float16(tmp_path, pretraining_records):
    path, seq, preds = pretraining_records
    params = PretrainingParams(albert_config=tiny_config(), input_file=path, output_dir=str(tmp_path / "out"),
                               max_seq_length=seq, max_predictions_per_seq=preds, train_batch_size=8,
                               eval_batch_size=8, num_train_steps=4, num_warmup_steps=0, learning_rate=5e-3,
                               save_checkpoints_steps=4, iterations_per_loop=2, max_eval_steps=1, do_eval=True,
                               log_every=0, mixed_precision="fp16")
    outcome = run_pretraining(params)
    _assert_float16_run(outcome, str(tmp_path / "out" / "ckpt-4"))
    assert all(np.isfinite(v) for k, v in outcome["eval_results"].items() if k != "global_step")


@pytest.mark.slow
def test_classifier_run_in_float16(tmp_path):
    params = ClassifierParams(albert_config=tiny_config(), output_dir=str(tmp_path / "out"), task_name="sst-2",
                              data_dir=SAMPLE_GLUE, spm_model_file=SPM, max_seq_length=32, train_batch_size=8,
                              eval_batch_size=50, learning_rate=1e-3, train_step=4, save_checkpoints_steps=4,
                              iterations_per_loop=2, log_every=0, do_train=True, do_eval=True,
                              mixed_precision="fp16")
    outcome = run_classifier(params)
    _assert_float16_run(outcome, str(tmp_path / "out" / "ckpt-4"))
    assert np.isfinite(outcome["eval_results"]["eval_loss"]) and 0 <= outcome["eval_results"]["eval_accuracy"] <= 1


def _assert_float16_run(outcome, checkpoint):
    assert outcome["dtype_policy"] == "mixed_float16" and outcome["step"] == 4  # a NaN would have stopped it
    assert keras.mixed_precision.global_policy().name == "float32"  # set for the run only
    reader = tf.train.load_checkpoint(checkpoint)
    scale = reader.get_tensor("optimizer/dynamic_scale/.ATTRIBUTES/VARIABLE_VALUE")  # the loss scale is kept
    assert scale >= 1 and np.log2(scale) == int(np.log2(scale))
    weights = checkpoint_weights(checkpoint)
    assert weights and all(w.dtype == np.float32 and np.isfinite(w).all() for w in weights.values())


# ----------------------------------------------------------------- --strategy=one_device
@pytest.mark.slow
def test_one_device_strategy_trains_as_the_default_strategy(tmp_path, monkeypatch):
    """The model and its optimizer are built, and trained, under the OneDeviceStrategy the flag asks for (not
    the default strategy), on the one device there is, to the default strategy's weights."""
    built_under = []
    real = runner.set_remat

    def spy(model, enabled):  # the runner calls it on the model it has just built in the strategy's scope
        strategy = tf.distribute.get_strategy()
        built_under.append((type(strategy).__name__, strategy.extended.worker_devices
                            if tf.distribute.has_strategy() else None))
        return real(model, enabled)

    monkeypatch.setattr(runner, "set_remat", spy)
    common = dict(albert_config=tiny_config(hidden_dropout_prob=0.1), task_name="sst-2", data_dir=SAMPLE_GLUE,
                  spm_model_file=SPM, max_seq_length=32, train_batch_size=8, learning_rate=1e-3, train_step=4,
                  save_checkpoints_steps=4, iterations_per_loop=2, log_every=0, do_train=True)
    for strategy in ("one_device", "default"):
        assert run_classifier(ClassifierParams(output_dir=str(tmp_path / strategy), strategy=strategy,
                                               **common))["step"] == 4
    assert built_under[0][0] == "OneDeviceStrategy" and built_under[0][1][0].endswith("CPU:0"), built_under
    assert built_under[1] == ("_DefaultDistributionStrategy", None), built_under
    one, default = (checkpoint_weights(str(tmp_path / s / "ckpt-4")) for s in ("one_device", "default"))
    assert one.keys() == default.keys() and len(one) > 10
    for name in one:
        np.testing.assert_allclose(one[name], default[name], rtol=0, atol=1e-6, err_msg=name)


# ----------------------------------------------------------------- run_classifier.py --vocab_file (WordPiece)
def _chinese_tsvs(directory):
    """train/dev/test TSVs (header `sentence<TAB>label`) from the Chinese fixture: label 1 for sentences with 雨
    (rain) or 水 (water), else 0."""
    with open(os.path.join(FIXTURES_DIR, "zh_corpus.txt"), encoding="utf-8") as f:
        sentences = [line.strip() for line in f if line.strip()]
    rows = [(s, int("雨" in s or "水" in s)) for s in sentences]
    splits = {"train": rows[:40], "dev": rows[40:56], "test": rows[56:64]}
    for split, part in splits.items():
        with open(os.path.join(directory, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in part))
    return splits


@pytest.mark.slow
def test_run_classifier_with_vocab_file_fine_tunes_a_wordpiece_model(tmp_path):
    splits = _chinese_tsvs(tmp_path)
    assert {y for _, y in splits["train"]} == {0, 1}
    vocab_file = os.path.join(DATA_DIR, "vocab_chinese.txt")
    out = tmp_path / "out"
    result = run_script("run_classifier.py", flag_args(
        task_name="zh_rain", train_file=str(tmp_path / "train.tsv"), dev_file=str(tmp_path / "dev.tsv"),
        test_file=str(tmp_path / "test.tsv"), text_a_column="sentence", label_column="label",
        vocab_file=vocab_file, albert_config_file=os.path.join(DATA_DIR, "albert_config_zh_tiny.json"),
        output_dir=str(out), do_train=True, do_eval=True, do_predict=True, max_seq_length=32,
        train_batch_size=8, eval_batch_size=8, predict_batch_size=8, learning_rate=1e-4, train_step=4,
        save_checkpoints_steps=4, iterations_per_loop=2, strategy="one_device", log_every=0))
    assert result.returncode == 0, log_tail(result)
    assert "eval_accuracy" in (out / "eval_results.txt").read_text()
    with open(out / "test_results.tsv", encoding="utf-8") as f:
        assert len([line for line in f if line.strip()]) >= len(splits["test"])

    # the cached training features are WordPiece ids of the sentences (every CJK character a token)
    tokenizer = FullTokenizer(vocab_file=vocab_file)
    (cache,) = glob.glob(str(out / "*_train_32_*.tf_record"))
    spec = {"input_ids": tf.io.FixedLenFeature([32], tf.int64)}
    cached = [tf.io.parse_single_example(r, spec)["input_ids"].numpy().tolist() for r in tf.data.TFRecordDataset(cache)]
    expected = [encode_pair(tokenizer, s, max_seq_length=32)[0] for s, _ in splits["train"]]
    assert cached == expected
    assert expected[0][:3] == [101] + tokenizer.convert_tokens_to_ids(list(splits["train"][0][0][:2]))
