"""AlbertForSquad: the heads against an independent numpy version of the original's formulas, the original's
checkpoint names, training/prediction/evaluation runs on the shipped samples, and the SavedModel exports."""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import checkpoints
from albert_tf.checkpoints import name_table
from albert_tf.data import squad
from albert_tf.model.squad import AlbertForSquad, default_p_mask
from albert_tf.serving.squad import export_squad_model
from albert_tf.tasks.squad import SquadParams as SquadRunParams
from albert_tf.tasks.squad import run_squad
from tests.helpers import REPO, SPM
from tests.helpers import SQUAD_V1 as SAMPLE_V1
from tests.helpers import SQUAD_V2 as SAMPLE_V2


def _inputs(batch=3, seq=20, query=5, context=10, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 30000, (batch, seq)).astype("int32")
    mask = np.zeros((batch, seq), "int32")
    segments = np.zeros((batch, seq), "int32")
    for b in range(batch):
        length = query + 3 + context - b  # [CLS] q [SEP] context [SEP]
        mask[b, :length] = 1
        segments[b, query + 2:length] = 1
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def test_default_p_mask_matches_the_features(tokenizer):
    examples = squad.read_squad_examples(SAMPLE_V2, is_training=False)
    features = squad.convert_examples_to_features(examples, tokenizer, 96, 48, 24, False)
    mask = np.array([f.input_mask for f in features])
    segments = np.array([f.segment_ids for f in features])
    assert np.array_equal(default_p_mask(mask, segments).numpy(), np.array([f.p_mask for f in features]))


# ------------------------------------------------------------------------------------------------------------------
# The heads' math, against numpy written from the original's formulas.

def _np_log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _np_dense(x, arrays, name, bias=True):
    y = x @ arrays[f"{name}/kernel"].astype(np.float64)
    return y + arrays[f"{name}/bias"] if bias else y


def _np_layer_norm(x, gamma, beta):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * gamma + beta


def _np_v2(seq, p_mask, arrays, start_positions=None, start_n_top=5, end_n_top=5):
    """The original's create_v2_model in numpy (float64), batch-major."""
    p = p_mask.astype(np.float64)
    start_logits = _np_dense(seq, arrays, "start_logits/dense")[..., 0]
    start_masked = start_logits * (1 - p) - 1e30 * p
    start_log_probs = _np_log_softmax(start_masked)

    def end_log_probs(start_features):  # [B, K, H] -> [B, K, T]
        tokens = np.repeat(seq[:, None], start_features.shape[1], axis=1)
        starts = np.repeat(start_features[:, :, None], seq.shape[1], axis=2)
        hidden = np.tanh(_np_dense(np.concatenate([tokens, starts], -1), arrays, "end_logits/dense_0"))
        hidden = _np_layer_norm(hidden, arrays["end_logits/LayerNorm/gamma"], arrays["end_logits/LayerNorm/beta"])
        logits = _np_dense(hidden, arrays, "end_logits/dense_1")[..., 0]
        return _np_log_softmax(logits * (1 - p[:, None]) - 1e30 * p[:, None])

    out = {"start_log_probs": start_log_probs}
    batch = np.arange(seq.shape[0])
    if start_positions is not None:
        out["end_log_probs"] = end_log_probs(seq[batch, start_positions][:, None])[:, 0]
    else:
        top = np.argsort(-start_log_probs, axis=-1, kind="stable")[:, :start_n_top]
        out["start_top_index"] = top
        out["start_top_log_probs"] = np.take_along_axis(start_log_probs, top, -1)
        ends = end_log_probs(seq[batch[:, None], top])
        end_top = np.argsort(-ends, axis=-1, kind="stable")[..., :end_n_top]
        out["end_top_index"] = end_top.reshape(len(batch), -1)
        out["end_top_log_probs"] = np.take_along_axis(ends, end_top, -1).reshape(len(batch), -1)
    start_p = np.exp(start_log_probs)
    features = np.concatenate([np.einsum("bt,bth->bh", start_p, seq), seq[:, 0]], -1)
    hidden = np.tanh(_np_dense(features, arrays, "answer_class/dense_0"))
    out["cls_logits"] = _np_dense(hidden, arrays, "answer_class/dense_1", bias=False)[..., 0]
    return out


def test_v1_head_matches_the_original_formula(tiny_config):
    model = AlbertForSquad(tiny_config)
    inputs = _inputs()
    out = model(inputs, training=False)
    seq = model.albert(inputs, training=False)["sequence_output"].numpy().astype(np.float64)
    arrays = checkpoints.model_arrays(model)
    assert arrays["cls/squad/output_weights"].shape == (2, 32) and arrays["cls/squad/output_bias"].shape == (2,)
    logits = seq @ arrays["cls/squad/output_weights"].T + arrays["cls/squad/output_bias"]
    np.testing.assert_allclose(out["start_logits"], logits[..., 0], atol=1e-5)
    np.testing.assert_allclose(out["end_logits"], logits[..., 1], atol=1e-5)
    # Loss: mean of the start and end cross-entropies.
    positions = {"start_positions": np.array([8, 0, 9]), "end_positions": np.array([9, 0, 12])}
    start, end, cls = model.compute_losses(out, positions)
    expected = (-_np_log_softmax(logits[..., 0])[np.arange(3), positions["start_positions"]].mean()
                - _np_log_softmax(logits[..., 1])[np.arange(3), positions["end_positions"]].mean()) / 2
    assert cls is None and float(model.total_loss(start, end, cls)) == pytest.approx(expected, rel=1e-5)


@pytest.mark.slow
def test_v2_head_matches_the_original_formula(tiny_config):
    model = AlbertForSquad(tiny_config, version_2=True, start_n_top=3, end_n_top=4)
    inputs = _inputs(seq=24)
    p_mask = default_p_mask(inputs["input_mask"], inputs["segment_ids"]).numpy()
    beam = model(inputs, training=False)
    seq = model.albert(inputs, training=False)["sequence_output"].numpy().astype(np.float64)
    arrays = {k: v.astype(np.float64) for k, v in checkpoints.model_arrays(model).items()}
    expected = _np_v2(seq, p_mask, arrays, start_n_top=3, end_n_top=4)
    for key in ("start_log_probs", "start_top_log_probs", "end_top_log_probs", "cls_logits"):
        np.testing.assert_allclose(beam[key], expected[key], atol=2e-5, err_msg=key)
    for key in ("start_top_index", "end_top_index"):
        np.testing.assert_array_equal(beam[key], expected[key], err_msg=key)
    assert beam["end_top_index"].shape == (3, 12)
    # Masked positions get no probability; [CLS] (position 0) is allowed.
    assert np.all(np.exp(beam["start_log_probs"].numpy())[p_mask == 1] == 0)

    # Training outputs: the end conditioned on the gold start; loss = (start + end) / 2 + 0.5 * answerability.
    labels = {"start_positions": np.array([8, 0, 10]), "end_positions": np.array([10, 0, 11]),
              "is_impossible": np.array([0, 1, 0])}
    teacher = model({**inputs, "p_mask": p_mask, "start_positions": labels["start_positions"]}, training=False)
    expected = _np_v2(seq, p_mask, arrays, start_positions=labels["start_positions"])
    for key in ("start_log_probs", "end_log_probs", "cls_logits"):
        finite = expected[key] > -1e20
        np.testing.assert_allclose(np.asarray(teacher[key])[finite], expected[key][finite], atol=2e-5, err_msg=key)
    rows = np.arange(3)
    start_ce = -expected["start_log_probs"][rows, labels["start_positions"]]
    end_ce = -expected["end_log_probs"][rows, labels["end_positions"]]
    z, y = expected["cls_logits"], labels["is_impossible"]
    cls_ce = np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))
    loss = model.total_loss(*model.compute_losses(teacher, labels))
    assert float(loss) == pytest.approx((start_ce.mean() + end_ce.mean()) / 2 + 0.5 * cls_ce.mean(), rel=1e-5)


def test_head_names_and_original_checkpoint_round_trip(tiny_config, tmp_path):
    model = AlbertForSquad(tiny_config, version_2=True)
    inputs = _inputs()
    before = model(inputs, training=False)
    names = {e.name: tuple(e.tf1_shape) for e in name_table.squad_head_entries(model)}
    assert names == {
        "start_logits/dense/kernel": (32, 1), "start_logits/dense/bias": (1,),
        "end_logits/dense_0/kernel": (64, 32), "end_logits/dense_0/bias": (32,),
        "end_logits/LayerNorm/gamma": (32,), "end_logits/LayerNorm/beta": (32,),
        "end_logits/dense_1/kernel": (32, 1), "end_logits/dense_1/bias": (1,),
        "answer_class/dense_0/kernel": (64, 32), "answer_class/dense_0/bias": (32,),
        "answer_class/dense_1/kernel": (32, 1)}
    prefix = str(tmp_path / "model.ckpt")
    checkpoints.save_checkpoint(model, prefix, fmt="original")
    fresh = AlbertForSquad(tiny_config, version_2=True)
    result = checkpoints.load_checkpoint(fresh, prefix)
    assert not result.missing and "answer_class/dense_1/kernel" in result.loaded
    after = fresh(inputs, training=False)
    for key in before:
        np.testing.assert_allclose(before[key], after[key], atol=1e-6, err_msg=key)
    # A pre-trained checkpoint without the head loads the encoder and reports the head as missing.
    encoder_only = str(tmp_path / "encoder.ckpt")
    checkpoints.save_checkpoint(model.albert, encoder_only, fmt="original")
    result = checkpoints.load_checkpoint(AlbertForSquad(tiny_config), encoder_only)
    assert sorted(result.missing) == ["cls/squad/output_bias", "cls/squad/output_weights"]


def test_config_round_trip_and_mixed_precision(tiny_config):
    model = AlbertForSquad(tiny_config, version_2=True, start_n_top=4, end_n_top=2, dropout_prob=0.2)
    clone = AlbertForSquad.from_config(model.get_config())
    assert (clone.version_2, clone.start_n_top, clone.end_n_top, clone.dropout_prob) == (True, 4, 2, 0.2)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        mixed = AlbertForSquad(tiny_config, version_2=True)
        out = mixed(_inputs(), training=False)
        assert all(v.dtype in (tf.float32, tf.int32) for v in out.values())
        assert np.isfinite(out["cls_logits"].numpy()).all()
        assert np.isfinite(out["end_top_log_probs"].numpy()).all()
    finally:
        keras.mixed_precision.set_global_policy("float32")


# ------------------------------------------------------------------------------------------------------------------
# Runs on the shipped samples.

def _subset_v1(path, num_paragraphs=2):
    with open(SAMPLE_V1, encoding="utf-8") as f:
        data = json.load(f)
    article = next(a for a in data["data"] if a["title"] == "Black_Death")
    subset = {"version": "1.1", "data": [{"title": article["title"],
                                          "paragraphs": article["paragraphs"][:num_paragraphs]}]}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(subset, f)
    return str(path), subset


def _params(tiny_config, output_dir, **kwargs):
    defaults = dict(albert_config=tiny_config, spm_model_file=SPM, output_dir=str(output_dir), max_seq_length=96,
                    doc_stride=48, max_query_length=24, train_batch_size=4, predict_batch_size=8,
                    learning_rate=1e-3, num_train_epochs=2.0, save_checkpoints_steps=4, log_every=0)
    defaults.update(kwargs)
    return SquadRunParams(**defaults)


def _contexts(data):
    return {qa["id"]: p["context"] for a in data["data"] for p in a["paragraphs"] for qa in p["qas"]}


@pytest.mark.slow
def test_v1_train_predict_evaluate_and_predict_again(tiny_config, tmp_path):
    path, data = _subset_v1(tmp_path / "train.json")
    out = tmp_path / "run"
    outcome = run_squad(_params(tiny_config, out, train_file=path, predict_file=path, do_train=True,
                                do_predict=True))
    ids = list(_contexts(data))
    assert outcome["step"] == outcome["num_train_steps"] == int(len(ids) / 4 * 2)
    assert set(outcome["eval_results"]) == {"exact_match", "f1"}
    with open(out / "predictions.json", encoding="utf-8") as f:
        predictions = json.load(f)
    with open(out / "nbest_predictions.json", encoding="utf-8") as f:
        nbest = json.load(f)
    assert list(predictions) == ids and list(nbest) == ids
    contexts = _contexts(data)
    for qid, entries in nbest.items():
        # Every candidate is an exact slice of the original context (or the original's "empty").
        assert all(e["text"] == "empty" or e["text"] in contexts[qid] for e in entries)
        assert predictions[qid] == entries[0]["text"]
        assert sum(e["probability"] for e in entries) == pytest.approx(1.0)
    with open(out / "eval_results.txt", encoding="utf-8") as f:
        assert f.read().startswith("exact_match = ")
    # Predicting again from the run's checkpoint (no training) gives the same predictions, from the cached features.
    os.remove(out / "predictions.json")
    again = run_squad(_params(tiny_config, out, predict_file=path, do_predict=True))
    with open(out / "predictions.json", encoding="utf-8") as f:
        assert json.load(f) == predictions
    assert again["eval_results"] == outcome["eval_results"]


@pytest.mark.slow
def test_v2_train_predict_evaluate(tiny_config, tmp_path):
    out = tmp_path / "run"
    outcome = run_squad(_params(tiny_config, out, train_file=SAMPLE_V2, predict_file=SAMPLE_V2, do_train=True,
                                do_predict=True, version_2_with_negative=True, start_n_top=3, end_n_top=3))
    results = outcome["eval_results"]
    assert results["total"] == results["heldout_total"] == 14
    assert (results["HasAns_total"], results["NoAns_total"]) == (8, 6)
    assert len(results["heldout_thresholds"]) == 2
    for key in ("dev_tuned_best_f1", "dev_tuned_best_f1_thresh", "dev_tuned_best_exact", "heldout_f1"):
        assert key in results
    # The default threshold is the best-F1 one on this file that can be applied: at most the official best.
    assert results["f1"] <= results["dev_tuned_best_f1"] + 1e-9
    with open(out / "null_odds.json", encoding="utf-8") as f:
        null_odds = json.load(f)
    with open(out / "predictions.json", encoding="utf-8") as f:
        predictions = json.load(f)
    with open(SAMPLE_V2, encoding="utf-8") as f:
        contexts = _contexts(json.load(f))
    assert list(null_odds) == list(predictions) == list(contexts)
    threshold = outcome["null_score_diff_threshold"]
    for qid, text in predictions.items():
        if null_odds[qid] > threshold:
            assert text == ""
        assert text in contexts[qid]
    with open(out / "eval_results.txt", encoding="utf-8") as f:
        written = f.read()
    assert "heldout_f1 = " in written and "dev_tuned_best_f1_thresh = " in written


def test_run_checks_settings_before_reading(tiny_config, tmp_path):
    with pytest.raises(ValueError, match=r"max_seq_length \(64\) must be greater than max_query_length \(64\)"):
        run_squad(_params(tiny_config, tmp_path, max_seq_length=64, max_query_length=64, do_predict=True,
                          predict_file=SAMPLE_V2))
    with pytest.raises(ValueError, match="--do_train needs --train_file"):
        run_squad(_params(tiny_config, tmp_path, do_train=True))
    with pytest.raises(ValueError, match="exceeds max_position_embeddings"):
        run_squad(_params(tiny_config, tmp_path, max_seq_length=256, do_predict=True, predict_file=SAMPLE_V2))
    assert not os.listdir(tmp_path)


@pytest.mark.slow
def test_wordpiece_request_gets_a_clear_message(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, os.path.join(REPO, "run_squad.py"), f"--vocab_file={REPO}/data/vocab_chinese.txt",
         f"--albert_config_file={REPO}/data/albert_config_zh_tiny.json", f"--output_dir={out}", "--do_predict",
         f"--predict_file={SAMPLE_V2}"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 2 and not out.exists()
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("run_squad.py: error: --spm_model_file is required: SQuAD answers are located by")
    assert "WordPiece --vocab_file (the Chinese ALBERT models) is not supported for SQuAD" in last


# ------------------------------------------------------------------------------------------------------------------
# Export.

_RELOAD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
    ids_dir, text_dir, inputs_file, out_file = sys.argv[1:]
    inputs = np.load(inputs_file)
    ids = tf.saved_model.load(ids_dir).signatures["serving_default"]
    out = {k: v.numpy() for k, v in ids(**{k: tf.constant(inputs[k]) for k in
                                           ("input_ids", "input_mask", "segment_ids")}).items()}
    text = tf.saved_model.load(text_dir).signatures["serving_default"]
    answered = text(question=tf.constant([str(q) for q in inputs["questions"]]),
                    context=tf.constant([str(c) for c in inputs["contexts"]]))
    out.update({"text_" + k: v.numpy() for k, v in answered.items()})
    banned = [m for m in sys.modules if m.split(".")[0] in ("albert_tf", "keras_hub")]
    assert not banned, banned
    np.savez(out_file, **out)
""")


@pytest.mark.slow
@pytest.mark.parametrize("version_2", [False, True])
def test_exports_reload_with_tensorflow_and_tensorflow_text_only(tiny_config, tokenizer, tmp_path, version_2):
    keras.utils.set_random_seed(1)
    model = AlbertForSquad(tiny_config, version_2=version_2, start_n_top=3, end_n_top=2)
    examples = squad.read_squad_examples(SAMPLE_V2, is_training=False)[:3]
    features = squad.convert_examples_to_features(examples, tokenizer, 96, 200, 24, False)
    firsts = [f for f in features if f.doc_span_index == 0]
    inputs = {k: np.array([getattr(f, k) for f in firsts], np.int32) for k in ("input_ids", "input_mask",
                                                                              "segment_ids")}
    expected = {k: v.numpy() for k, v in model(inputs, training=False).items()}
    dirs = export_squad_model(model, str(tmp_path / "export"), spm_model_file=SPM, max_seq_length=96,
                              doc_stride=200, max_query_length=24, null_score_diff_threshold=0.5)
    inputs_file, out_file = str(tmp_path / "inputs.npz"), str(tmp_path / "out.npz")
    np.savez(inputs_file, questions=np.array([e.question_text for e in examples]),
             contexts=np.array([e.paragraph_text for e in examples]), **inputs)
    script = tmp_path / "reload.py"
    script.write_text(_RELOAD)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, str(script), dirs["ids"], dirs["text"], inputs_file, out_file],
                          capture_output=True, text=True, cwd=str(tmp_path), env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = dict(np.load(out_file, allow_pickle=True))
    for key, value in expected.items():
        np.testing.assert_allclose(got[key], value, atol=1e-5, err_msg=key)
        # The text signature tokenizes like the Python features (first window) and gives the same outputs.
        np.testing.assert_allclose(got["text_" + key][:, 0], value, atol=1e-5, err_msg="text_" + key)
    np.testing.assert_array_equal(got["text_input_ids"][:, 0], inputs["input_ids"])
    starts, ends = got["text_answer_start"], got["text_answer_end"]
    for row, window in enumerate(got["text_answer_window"]):
        f = next(f for f in features if f.example_index == row and f.doc_span_index == window)
        assert f.doc_offset <= starts[row] <= ends[row] < f.paragraph_len - 1
        pieces = tokenizer.convert_ids_to_tokens(f.input_ids[starts[row]:ends[row] + 1])
        answer = got["text_best_non_null_text" if version_2 else "text_answer_text"][row].decode()
        assert answer == "".join(pieces).replace("\u2581", " ").strip()
    if version_2:
        null_scores = [min(cls[:num]) for cls, num in zip(got["text_cls_logits"], got["text_num_windows"])]
        np.testing.assert_allclose(got["text_null_score"], null_scores, rtol=1e-6)
        np.testing.assert_array_equal(got["text_is_impossible"], np.array(null_scores) > 0.5)
