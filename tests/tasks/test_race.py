"""RACE as a task: initialising from an original checkpoint, training, resuming, evaluating every checkpoint,
predicting and exporting; the settings refused; inference under MirroredStrategy; the script's flags."""


import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import race
from albert_tf.serving.race import export_race_model
from albert_tf.tasks import race as race_task
from tests.helpers import REPO as REPO_ROOT
from tests.helpers import SAMPLE_RACE as SAMPLE_DIR
from tests.helpers import script_flag_definitions

SHARED_RACE = os.path.join(os.path.dirname(REPO_ROOT), "shared", "data", "race")
needs_shared = pytest.mark.skipif(not os.path.isdir(os.path.join(SHARED_RACE, "RACE", "dev")),
                                  reason="the official RACE dev set is not in ../shared/data/race")


def test_init_from_an_original_checkpoint(tiny_config, tmp_path):
    """A pretrained (original TF1 format) checkpoint initialises the encoder of an unbuilt RACE model; the
    output head (output_weights [1, H], output_bias [1]) is reported missing and keeps its initial values."""
    from albert_tf.checkpoints import load_checkpoint, save_checkpoint
    from albert_tf.model import AlbertForMultipleChoice, AlbertForPretraining, dummy_inputs

    pretrained = AlbertForPretraining(tiny_config)
    pretrained(dummy_inputs(num_predictions=1), training=False)
    save_checkpoint(pretrained, str(tmp_path / "ckpt" / "model.ckpt"), fmt="original")
    model = AlbertForMultipleChoice(tiny_config)
    result = load_checkpoint(model, str(tmp_path / "ckpt" / "model.ckpt"))
    assert sorted(result.missing) == ["output_bias", "output_weights"]
    for ours, theirs in zip(model.albert.weights, pretrained.albert.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert model.output_layer.kernel.shape == (tiny_config.hidden_size, 1)


# ---------------------------------------------------------------------------------------------------------------
# End to end


def _params(tiny_config, tmp_path, **overrides):
    values = dict(albert_config=tiny_config, data_dir=SAMPLE_DIR, output_dir=str(tmp_path / "out"),
                  spm_model_file=os.path.join(REPO_ROOT, "data", "30k-clean.model"), max_seq_length=64,
                  max_qa_length=24, train_batch_size=4, eval_batch_size=8, predict_batch_size=8,
                  learning_rate=1e-3, train_step=3, warmup_step=1, save_checkpoints_steps=3, iterations_per_loop=3,
                  do_predict=True, export_dir=str(tmp_path / "export"), log_every=0)
    values.update(overrides)
    return race_task.RaceParams(**values)



def _served_without_albert_tf(script, tmp_path):
    """Runs `script` (which writes outputs.npz) in a fresh Python with no albert_tf on its path, as TF Serving
    would load the export, and returns what it wrote."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    run = subprocess.run([sys.executable, "-c", script], cwd=str(tmp_path), env=env, capture_output=True,
                         text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    return np.load(tmp_path / "outputs.npz")


@pytest.mark.slow
def test_train_resume_evaluate_predict_export(tiny_config, tmp_path):
    from albert_tf.checkpoints import save_checkpoint
    from albert_tf.model import AlbertModel, dummy_inputs

    encoder = AlbertModel(tiny_config)
    encoder(dummy_inputs(), training=False)
    save_checkpoint(encoder, str(tmp_path / "pretrained" / "model.ckpt"), fmt="original")

    out = tmp_path / "out"
    outcome = race_task.run_race(_params(tiny_config, tmp_path, do_eval=False, do_predict=False, export_dir=None,
                                    init_checkpoint=str(tmp_path / "pretrained" / "model.ckpt")))
    assert outcome["step"] == 3 and tf.train.latest_checkpoint(str(out)).endswith("ckpt-3")
    train_cache = out / "train.tf_record"
    stamp = train_cache.stat().st_mtime_ns

    # resumes at step 3, runs to 5, evaluates, predicts, exports
    outcome = race_task.run_race(_params(tiny_config, tmp_path, train_step=5, save_checkpoints_steps=2,
                                    iterations_per_loop=1))
    assert outcome["step"] == 5 and tf.train.latest_checkpoint(str(out)).endswith("ckpt-5")
    assert train_cache.stat().st_mtime_ns == stamp  # the cache was reused

    blocks = (out / "eval_results.txt").read_text().split("=" * 50 + "\n")
    results = next(r for r in (dict(line.split(" = ") for line in b.splitlines()) for b in blocks[:-1])
                   if r["global_step"] == "5")
    for key in ("accuracy", "accuracy_middle", "accuracy_high", "eval_accuracy", "eval_loss"):
        assert 0.0 <= float(results[key]) <= (1.0 if "accuracy" in key else 10.0)
    assert results["global_step"] == "5" and results["num_examples"] == "72"
    assert results["num_examples_middle"] == "39" and results["num_examples_high"] == "33"

    predictions = json.loads((out / "test_predictions.json").read_text())
    test_examples = race.read_race(SAMPLE_DIR, "test")
    assert list(predictions) == sorted(e.question_id for e in test_examples)
    for entry in predictions.values():
        assert entry["answer"] in "ABCD" and sum(entry["probabilities"]) == pytest.approx(1.0, abs=1e-4)
        assert entry["answer"] == "ABCD"[int(np.argmax(entry["probabilities"]))]
    tsv = (out / "test_predictions.tsv").read_text().splitlines()
    assert tsv[0].split("\t") == ["question_id", "level", "answer", "prob_A", "prob_B", "prob_C", "prob_D", "label"]
    assert len(tsv) == 72
    assert (out / "predict_results.txt").exists()  # the sample's test set has answers

    # the export runs in a fresh process with only tensorflow (+ tensorflow_text, whose ops the `text` signature
    # uses), and agrees with the in-process predictions
    from albert_tf.text.tokenization import FullTokenizer

    tokenizer = FullTokenizer(spm_model_file=os.path.join(REPO_ROOT, "data", "30k-clean.model"))
    chosen = test_examples[:5]
    feats = [race.convert_example(e, tokenizer, 64, 24) for e in chosen]
    np.savez(tmp_path / "inputs.npz", **{k: np.array([f[k] for f in feats], np.int32)
                                        for k in ("input_ids", "input_mask", "segment_ids")})
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the ops of the `text` signature)
        try:
            import albert_tf
            sys.exit("albert_tf should not be importable here")
        except ImportError:
            pass
        model = tf.saved_model.load({str(outcome['export_dir'])!r})
        inputs = dict(np.load({str(tmp_path / 'inputs.npz')!r}))
        out = model.signatures["serving_default"](**{{k: tf.constant(v) for k, v in inputs.items()}})
        info = model.signatures["tokenization_info"]()
        assert tf.io.gfile.exists(info["vocab_file"].numpy().decode()), info
        np.savez({str(tmp_path / 'outputs.npz')!r}, probabilities=out["probabilities"].numpy(),
                 answer=np.array([a.decode() for a in out["answer"].numpy()]), prediction=out["prediction"].numpy())
    """)
    served = _served_without_albert_tf(script, tmp_path)
    expected = np.array([predictions[e.question_id]["probabilities"] for e in chosen])
    np.testing.assert_allclose(served["probabilities"], expected, atol=2e-6)
    assert served["answer"].tolist() == [predictions[e.question_id]["answer"] for e in chosen]


@pytest.mark.slow
def test_text_signature_matches_python_features(tiny_config, tmp_path):
    """The export's `text` signature (raw article, question, options) gives the probabilities `serving_default`
    gives on `convert_example`'s features, in a process with only tensorflow and tensorflow_text."""
    from albert_tf.text.tokenization import FullTokenizer

    spm_model_file = os.path.join(REPO_ROOT, "data", "30k-clean.model")
    tokenizer = FullTokenizer(spm_model_file=spm_model_file)
    examples = race.read_race(SAMPLE_DIR, "dev")
    # blanks and appended options; the second question is long enough for max_qa_length to cut it
    chosen = [examples[i] for i in (0, 1, 2, 8)]
    chosen.append(race.RaceExample("x-0", "middle", "Tom ``walked'' home.  It rained.", "From _ to _ ?",
                                   ["Six", "SEVEN", "", "  eight  nine "], 0))
    assert any("_" not in e.question for e in chosen) and any("_" in e.question for e in chosen)
    model = race_task.build_model(tiny_config, dropout_prob=0.0)
    # a head large enough that the probabilities depend visibly on every token (at init they are all ~0.25)
    kernel = model.output_layer.kernel
    kernel.assign(np.random.default_rng(0).normal(0.0, 1000.0, kernel.shape).astype(np.float32))
    export_dir = export_race_model(model, str(tmp_path / "export"), tokenizer_file=spm_model_file,
                                        is_sentencepiece=True, max_seq_length=64, max_qa_length=24)
    feats = [race.convert_example(e, tokenizer, 64, 24) for e in chosen]
    assert any(len(f["tokens"][0]) == 64 for f in feats)  # articles were cut to fit
    np.savez(tmp_path / "inputs.npz", **{k: np.array([f[k] for f in feats], np.int32)
                                        for k in ("input_ids", "input_mask", "segment_ids")})
    texts = {"article": [e.article for e in chosen], "question": [e.question for e in chosen],
             "options": [e.options for e in chosen]}
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    script = textwrap.dedent(f"""
        import json
        import sys
        import numpy as np
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the ops)
        try:
            import albert_tf
            sys.exit("albert_tf should not be importable here")
        except ImportError:
            pass
        model = tf.saved_model.load({export_dir!r})
        inputs = dict(np.load({str(tmp_path / 'inputs.npz')!r}))
        ids = model.signatures["serving_default"](**{{k: tf.constant(v) for k, v in inputs.items()}})
        with open({str(tmp_path / 'texts.json')!r}) as f:
            texts = json.load(f)
        text = model.signatures["text"](**{{k: tf.constant(v) for k, v in texts.items()}})
        np.savez({str(tmp_path / 'outputs.npz')!r}, ids=ids["probabilities"].numpy(),
                 text=text["probabilities"].numpy(), ids_prediction=ids["prediction"].numpy(),
                 text_prediction=text["prediction"].numpy(),
                 text_answer=np.array([a.decode() for a in text["answer"].numpy()]))
    """)
    served = _served_without_albert_tf(script, tmp_path)
    assert served["text"].shape == (len(chosen), race.NUM_CHOICES)
    assert np.ptp(served["ids"], axis=-1).min() > 0.01, served["ids"]  # the comparison below can tell apart
    np.testing.assert_allclose(served["text"], served["ids"], atol=1e-5, rtol=0)
    np.testing.assert_array_equal(served["text_prediction"], served["ids_prediction"])
    assert served["text_answer"].tolist() == ["ABCD"[p] for p in served["ids_prediction"]]


def test_run_race_rejects_bad_settings(tiny_config, tmp_path):
    with pytest.raises(ValueError, match="max_position_embeddings|only trained up to"):
        race_task.run_race(_params(tiny_config, tmp_path, max_seq_length=256))
    with pytest.raises(ValueError, match="leaves no room"):
        race_task.run_race(_params(tiny_config, tmp_path, max_qa_length=62))
    with pytest.raises(ValueError, match="exclude each other"):
        race_task.run_race(_params(tiny_config, tmp_path, high_only=True, middle_only=True))
    with pytest.raises(ValueError, match="At least one"):
        race_task.run_race(_params(tiny_config, tmp_path, do_train=False, do_eval=False, do_predict=False))


@pytest.mark.slow
def test_inference_under_mirrored_strategy_matches_single_device(tiny_config, tmp_path):
    """predict_in_order gathers across replicas and keeps file order (2 logical CPUs, MirroredStrategy)."""
    config_file = tmp_path / "config.json"
    tiny_config.to_json_file(str(config_file))
    script = textwrap.dedent(f"""
        import numpy as np
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        import keras
        from albert_tf.data import race
        from albert_tf.tasks.race import build_model
        from albert_tf.train.ordered_prediction import predict_in_order
        from albert_tf.config import AlbertConfig
        from albert_tf.text.tokenization import FullTokenizer
        config = AlbertConfig.from_json_file({str(config_file)!r})
        tokenizer = FullTokenizer(spm_model_file={os.path.join(REPO_ROOT, "data", "30k-clean.model")!r})
        examples = race.read_race({SAMPLE_DIR!r}, "dev")[:13]
        path = {str(tmp_path / "dev.tf_record")!r}
        race.prepare_records(examples, tokenizer, path, 32, 8, "dev")
        def logits(model, strategy=None):
            return predict_in_order(model, lambda c: race.inference_dataset(path, 32, len(examples), 4, c),
                                    len(examples), 4, ("input_ids", "input_mask", "segment_ids"), strategy)
        keras.utils.set_random_seed(0)
        single = build_model(config)
        expected = logits(single)
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        with strategy.scope():
            mirrored = build_model(config)
        mirrored.set_weights(single.get_weights())
        got = logits(mirrored, strategy)
        np.testing.assert_allclose(got, expected, atol=1e-5)
        assert np.abs(expected).sum() > 0
        print("OK", strategy.num_replicas_in_sync)
    """)
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300,
                         check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "OK 2" in run.stdout


@pytest.mark.slow
def test_cli_flags_and_defaults_match_the_original():
    defaults = {name: flag.default for name, flag in script_flag_definitions("run_race.py").items()}
    original = {
        "data_dir": None, "albert_config_file": None, "task_name": "race", "vocab_file": None, "train_file": None,
        "eval_file": None, "predict_file": None, "spm_model_file": None, "output_dir": None, "init_checkpoint": None,
        "albert_hub_module_handle": None, "do_lower_case": True, "dropout_prob": 0.1, "max_seq_length": 512,
        "max_qa_length": 128, "num_keep_checkpoint": 5, "high_only": False, "middle_only": False,
        "do_train": True, "do_eval": True, "do_predict": False, "train_batch_size": 32, "eval_batch_size": 8,
        "predict_batch_size": 8, "learning_rate": 1e-5, "train_step": 12000, "warmup_step": 1000,
        "save_checkpoints_steps": 100, "iterations_per_loop": 1000, "use_tpu": False, "tpu_name": None,
        "tpu_zone": None, "gcp_project": None, "master": None, "num_tpu_cores": 8,
    }
    assert {name: defaults.get(name, "MISSING") for name in original} == original
    for name in ("strategy", "mixed_precision", "export_dir"):
        assert name in defaults
    with open(os.path.join(REPO_ROOT, "albert_tf", "scripts", "run_race.py"), encoding="utf-8") as f:
        source = f.read()
    assert "define_tpu_flags()" in source and "define_runtime_flags()" in source
    # RaceParams' defaults are the flags' defaults
    params = race_task.RaceParams(albert_config=None, data_dir="d", output_dir="o")
    for name in ("max_seq_length", "max_qa_length", "train_batch_size", "eval_batch_size", "predict_batch_size",
                 "learning_rate", "train_step", "warmup_step", "save_checkpoints_steps", "iterations_per_loop",
                 "do_train", "do_eval", "do_predict", "dropout_prob", "num_keep_checkpoint", "do_lower_case"):
        assert getattr(params, name) == original[name], name
