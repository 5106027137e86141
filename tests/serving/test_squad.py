"""The SQuAD text export reads the whole context: on paragraphs longer than max_seq_length whose answers lie in
later windows, a model fine-tuned by `run_squad` (which also writes the export, with its --doc_stride) answers in a
fresh process (tensorflow + tensorflow_text only) what `run_squad.py`'s Python path wrote to predictions.json, for
v1.1 and v2.0.

The export decodes pieces, so its text is the normalised form of the Python path's exact context slice: the test
compares `preprocess_text` of the Python answer (lowercased, accents dropped, whitespace folded) with the export's
answer, whitespace folded."""

import inspect
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import squad
from albert_tf.errors import UsageError
from albert_tf.evaluation import squad_postprocessing as post
from albert_tf.model import AlbertForSquad, dummy_inputs
from albert_tf.serving import squad as serving_squad
from albert_tf.tasks.squad import SquadParams, run_squad
from albert_tf.text.tokenization import FullTokenizer, preprocess_text
from tests.helpers import SPM, SQUAD_V1, randomize, tiny_config
from tests.original_flags import ORIGINAL_FLAGS

# Questions of data/squad/dev-v1.1-sample.json whose paragraphs run to 200-350 pieces and whose answers come late.
QUESTION_IDS = ("5726534d708984140094c271", "57286192ff5b5019007da1e0", "5726559edd62a815002e81cb",
                "5728661e2ca10214002da2ec")
MAX_SEQ_LENGTH, DOC_STRIDE, MAX_QUERY_LENGTH = 96, 32, 16

_SERVE = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
    export_dir, inputs_file, out_file = sys.argv[1:]
    with open(inputs_file, encoding="utf-8") as f:
        inputs = json.load(f)
    answer = tf.saved_model.load(export_dir).signatures["serving_default"]
    got = answer(question=tf.constant(inputs["questions"]), context=tf.constant(inputs["contexts"]))
    out = {k: got[k].numpy().tolist() for k in ("answer_window", "answer_start", "answer_end", "num_windows")}
    out["answer_text"] = [t.decode("utf-8") for t in got["answer_text"].numpy()]
    if "is_impossible" in got:
        out["is_impossible"] = got["is_impossible"].numpy().tolist()
        out["null_score"] = got["null_score"].numpy().tolist()
    out["modules"] = sorted(m for m in sys.modules if m.split(".")[0] in ("albert_tf", "keras_hub"))
    with open(out_file, "w", encoding="utf-8") as f:
        json.dump(out, f)
""")


def _long_paragraph_file(path):
    """A SQuAD file with the paragraphs of QUESTION_IDS, each holding just its question."""
    with open(SQUAD_V1, encoding="utf-8") as f:
        data = json.load(f)
    paragraphs = [{"context": p["context"], "qas": [qa]} for a in data["data"] for p in a["paragraphs"]
                  for qa in p["qas"] if qa["id"] in QUESTION_IDS]
    assert len(paragraphs) == len(QUESTION_IDS)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"version": "1.1", "data": [{"title": "long", "paragraphs": paragraphs}]}, f)
    return str(path), paragraphs


def _serve(export_dir, paragraphs, tmp_path):
    """The text export's answers to the paragraphs' questions, and to one more question with an empty context."""
    inputs, out = tmp_path / "inputs.json", tmp_path / "out.json"
    inputs.write_text(json.dumps({"questions": [p["qas"][0]["question"] for p in paragraphs] + ["Who?"],
                                  "contexts": [p["context"] for p in paragraphs] + [""]}), encoding="utf-8")
    script = tmp_path / "serve.py"
    script.write_text(_SERVE)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, str(script), export_dir, str(inputs), str(out)], capture_output=True,
                          text=True, cwd=str(tmp_path), env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text(encoding="utf-8"))


def _folded(text):
    return " ".join(text.split())


@pytest.mark.slow
@pytest.mark.parametrize("version_2", [False, True])
def test_text_export_answers_what_run_squad_predicts_in_later_windows(tmp_path, version_2):
    path, paragraphs = _long_paragraph_file(tmp_path / "long.json")
    tokenizer = FullTokenizer(spm_model_file=SPM)
    features = squad.convert_examples_to_features(squad.read_squad_examples(path, False), tokenizer,
                                                  MAX_SEQ_LENGTH, DOC_STRIDE, MAX_QUERY_LENGTH, False, log_every=0)
    windows = [sum(f.example_index == i for f in features) for i in range(len(paragraphs))]
    assert min(windows) >= 5  # every context is far longer than one window
    # Fine-tuned on these questions until it finds their answers (in the windows that hold them), then predicts.
    out = tmp_path / "run"
    outcome = run_squad(SquadParams(
        albert_config=tiny_config(), spm_model_file=SPM, output_dir=str(out), train_file=path, predict_file=path,
        do_train=True, do_predict=True, version_2_with_negative=version_2, max_seq_length=MAX_SEQ_LENGTH,
        doc_stride=DOC_STRIDE, max_query_length=MAX_QUERY_LENGTH, train_batch_size=4, learning_rate=3e-3,
        num_train_epochs=300, warmup_proportion=0.05, save_checkpoints_steps=1000, dropout_prob=0.0,
        start_n_top=3, end_n_top=3, export_dir=str(tmp_path / "export"), log_every=0))
    with open(out / "predictions.json", encoding="utf-8") as f:
        predictions = json.load(f)
    text_dir = os.path.join(tmp_path / "export", "text", str(outcome["final_step"]))
    served = _serve(text_dir, paragraphs, tmp_path)
    assert served["modules"] == []
    # A context without pieces: one window, no valid span, no answer.
    assert served["num_windows"].pop() == 1 and served["answer_text"].pop() == ""
    served["answer_window"].pop()
    assert served["num_windows"] == windows
    expected = [predictions[p["qas"][0]["id"]] for p in paragraphs]
    assert [_folded(t) for t in served["answer_text"]] == [_folded(preprocess_text(t, lower=True)) for t in expected]
    # The answers come from later windows (the first window alone would have missed them) and are real spans.
    assert all(window > 0 for window in served["answer_window"]), served["answer_window"]
    assert all(text not in ("", "empty") for text in expected), expected
    gold = [p["qas"][0]["answers"][0]["text"] for p in paragraphs]
    # It found the answers in contexts of 200-350 pieces: each prediction is the gold answer, a part of it or
    # holds it, and at least one is exactly right (where a span starts and ends, "16", "65" or "1665", "Song" or
    # "Song dynasty", moves with the float rounding of 1,800 tiny-model steps, so no more than one is required).
    assert all(e.strip() and (e in g or g in e) for e, g in zip(expected, gold)), (expected, gold)
    assert any(e.strip() == g.strip() for e, g in zip(expected, gold)), (expected, gold)
    if version_2:
        assert served["is_impossible"][:len(paragraphs)] == [False] * len(paragraphs)


def _random_layouts(rng, count):
    """(question lengths, context lengths, max_seq_length, doc_stride) of `count` random requests."""
    for _ in range(count):
        max_seq_length = int(rng.integers(8, 24))
        questions = [int(rng.integers(1, max_seq_length - 4)) for _ in range(int(rng.integers(1, 4)))]
        contexts = [int(rng.integers(0, 40)) for _ in questions]
        yield questions, contexts, max_seq_length, int(rng.integers(1, 12))


def _ragged(lengths, offset=0):
    return tf.ragged.constant([[offset + 100 * row + k for k in range(n)] for row, n in enumerate(lengths)],
                              dtype=tf.int64, ragged_rank=1) if any(lengths) else \
        tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int64), tf.constant(lengths, tf.int64))


def test_graph_windows_and_max_context_owners_are_the_features_on_random_layouts():
    """The text export's windows (`context_windows`), max-context mask (`max_context_mask`) and where a span may
    start and end (`span_masks`) against `data.squad.doc_spans_for` and `max_context_owners`, which the Python
    features use."""
    rng = np.random.default_rng(0)
    # and windows of 256 and 100 pieces, where the length bonus (0.01 a piece) outweighs one piece of context;
    # and of 252 and 125 pieces, the last piece only in the short one (the long one's score there, -1 + 2.52,
    # beats the short one's 1.25 unless a window that does not hold a piece is out of the running)
    for questions, contexts, max_seq_length, doc_stride in [([1], [300], 260, 200), ([1], [253], 256, 128),
                                                            *_random_layouts(rng, 60)]:
        windows = serving_squad.context_windows(_ragged(questions, 1), _ragged(contexts, 10_000), max_seq_length,
                                                doc_stride)
        doc_offset = tf.gather(tf.constant([q + 2 for q in questions], tf.int64), windows["example"])
        mask = serving_squad.max_context_mask(windows, doc_offset, max_seq_length).numpy()
        valid_start, valid_end = (m.numpy() for m in serving_squad.span_masks(windows, max_seq_length))
        flat = 0
        for row, (q, c) in enumerate(zip(questions, contexts)):
            spans = squad.doc_spans_for(c, max_seq_length - 3 - q, doc_stride) or [(0, 0)]
            owners = squad.max_context_owners(spans, c)
            assert windows["num_windows"].numpy()[row] == len(spans)
            for index, (start, length) in enumerate(spans):
                layout = (questions, contexts, max_seq_length, doc_stride, row, index)
                assert windows["example"].numpy()[flat] == row and windows["index"].numpy()[flat] == index, layout
                assert (windows["start"].numpy()[flat], windows["length"].numpy()[flat]) == (start, length), layout
                assert windows["context"][flat].numpy().tolist() == [10_000 + 100 * row + k
                                                                     for k in range(start, start + length)]
                assert windows["question"][flat].numpy().tolist() == [1 + 100 * row + k for k in range(q)]
                # [CLS] question [SEP] context [SEP]: the window's context at q + 2 .. q + 1 + length
                context = [q + 2 <= p < q + 2 + length for p in range(max_seq_length)]
                expected = [context[p] and owners[start + p - q - 2] == index for p in range(max_seq_length)]
                assert mask[flat].tolist() == expected, layout
                assert valid_start[flat].tolist() == expected and valid_end[flat].tolist() == context, layout
                flat += 1


def test_the_best_span_and_window_are_the_first_of_the_highest_valid_score():
    rng = np.random.default_rng(1)
    for _ in range(40):
        n, k, t = int(rng.integers(1, 4)), int(rng.integers(1, 6)), 10
        starts, ends = rng.integers(0, t, (n, k)), rng.integers(0, t, (n, k))
        start_scores = rng.integers(-3, 3, (n, k)).astype(np.float32)  # whole numbers: ties happen
        end_scores = rng.integers(-3, 3, (n, k)).astype(np.float32)
        valid_start, valid_end = rng.random((n, t)) < 0.7, rng.random((n, t)) < 0.7
        got = serving_squad.best_candidate(tf.constant(starts), tf.constant(ends), tf.constant(start_scores),
                                           tf.constant(end_scores), tf.constant(valid_start), tf.constant(valid_end),
                                           4)
        for w in range(n):
            scored = [(float(start_scores[w, i] + end_scores[w, i]), -i) for i in range(k)
                      if valid_start[w, starts[w, i]] and valid_end[w, ends[w, i]]
                      and 0 <= ends[w, i] - starts[w, i] < 4]
            if not scored:
                assert got[2].numpy()[w] == -np.inf
                continue
            score, minus_i = max(scored)
            assert (got[0].numpy()[w], got[1].numpy()[w], got[2].numpy()[w]) == \
                (starts[w, -minus_i], ends[w, -minus_i], score)
    # across windows: per question the first window with the highest score
    num_windows = tf.constant([2, 1, 3], tf.int64)
    windows = {"example": tf.constant([0, 0, 1, 2, 2, 2], tf.int64), "index": tf.constant([0, 1, 0, 0, 1, 2], tf.int64),
               "num_windows": num_windows}
    scores = tf.constant([1.0, 1.0, -np.inf, 0.5, 2.0, 2.0], tf.float64)
    flat, best = serving_squad.pick_window(scores, windows)
    assert flat.numpy().tolist() == [0, 2, 4] and best.numpy().tolist() == [1.0, -np.inf, 2.0]


def _decoded(tokenizer, text):
    """`text` as the export gives a span of it: its pieces decoded (normalised, unknown pieces as " ⁇ ")."""
    return _folded(tokenizer.sp_model.decode(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))))


@pytest.mark.slow
@pytest.mark.parametrize("version_2", [False, True])
def test_text_export_answers_as_the_python_postprocessing_does(tmp_path, version_2):
    """Untrained (random weights, so every window scores differently): the text export's windows, heads,
    answers and scores are those of `convert_examples_to_features`, the ids model and the Python n-best ranking
    (`squad_postprocessing`) on the same questions, with a question whose context is empty; v2.0 also its null
    scores and the threshold's verdict."""
    seq, stride, query = 40, 12, 10
    examples = squad.read_squad_examples(SQUAD_V1, False)[:3]
    tokenizer = FullTokenizer(spm_model_file=SPM)
    features = squad.convert_examples_to_features(examples, tokenizer, seq, stride, query, False, log_every=0)
    model = AlbertForSquad(tiny_config(), version_2=version_2, start_n_top=3, end_n_top=2, dropout_prob=0.0)
    model(dummy_inputs(seq_length=4), training=False)
    randomize(model, seed=3, scale=0.5)
    inputs = {k: tf.constant([getattr(f, k) for f in features], tf.int32)
              for k in ("input_ids", "input_mask", "segment_ids")}
    outputs = {k: v.numpy() for k, v in model(inputs, training=False).items()}
    unique_ids = [f.unique_id for f in features]
    result_dict, cls_dict = {}, {}
    if version_2:
        post.accumulate_predictions_v2(result_dict, cls_dict, examples, features,
                                       post.raw_results_v2(unique_ids, outputs), 20, 30, 3, 2)
        _, null_odds, _, _ = post.write_predictions_v2(result_dict, cls_dict, examples, features, 20)
        threshold = sum(sorted(null_odds.values())[1:]) / 2  # one question above it, two below
        predictions, null_odds, best_non_null, nbest = post.write_predictions_v2(
            result_dict, cls_dict, examples, features, 20, threshold)
    else:
        post.accumulate_predictions_v1(result_dict, examples, features,
                                       post.raw_results_v1(unique_ids, outputs["start_logits"],
                                                           outputs["end_logits"]), 20, 30)
        predictions, nbest = post.write_predictions_v1(result_dict, examples, features, 20)
        threshold = None
    dirs = serving_squad.export_squad_model(model, str(tmp_path / "export"), spm_model_file=SPM, max_seq_length=seq,
                                            doc_stride=stride, max_query_length=query,
                                            null_score_diff_threshold=threshold)
    assert dirs == {kind: str(tmp_path / "export" / kind) for kind in ("ids", "text")}
    assert sorted(tf.saved_model.load(dirs["ids"]).signatures) == ["serving_default", "tokenization_info"]
    text_export = tf.saved_model.load(dirs["text"])
    settings = {v.name.split(":")[0]: v for v in (text_export.threshold, text_export.max_answer_length,
                                                  text_export.doc_stride, text_export.n_best_size)}
    assert not any(v.trainable for v in settings.values())  # settings, not weights
    assert {k: float(v.numpy()) for k, v in settings.items()} == {  # the threshold as its float32 variable holds it
        "null_score_diff_threshold": float(np.float32(threshold or 0.0)), "max_answer_length": 30,
        "doc_stride": stride, "n_best_size": 20}
    answer = text_export.signatures["serving_default"]
    questions = tf.constant([e.question_text for e in examples] + ["Who?"])
    contexts = tf.constant([e.paragraph_text for e in examples] + [""])
    served = {k: v.numpy() for k, v in answer(question=questions, context=contexts).items()}
    called = text_export.answer(questions, contexts)  # the function itself, for Python callers
    assert sorted(called) == sorted(served) and called["answer_text"].numpy().tolist() == served["answer_text"].tolist()
    windows = [[f for f in features if f.example_index == i] for i in range(len(examples))]
    assert served["num_windows"].tolist() == [len(w) for w in windows] + [1] and min(map(len, windows)) >= 3
    flat = 0
    for i, example in enumerate(examples):
        for w, feature in enumerate(windows[i]):
            assert served["input_ids"][i, w].tolist() == feature.input_ids
            assert served["segment_ids"][i, w].tolist() == feature.segment_ids
            for name in ("start_logits", "end_logits", "start_top_log_probs", "end_top_index", "cls_logits"):
                if name in outputs:
                    np.testing.assert_allclose(served[name][i, w], outputs[name][flat], atol=1e-4)
            flat += 1
        best = nbest[example.qas_id][0]
        want = predictions[example.qas_id]
        assert _folded(served["answer_text"][i].decode()) == _decoded(tokenizer, want), i
        assert served["answer_score"][i] == pytest.approx(best["start_log_prob"] + best["end_log_prob"], abs=1e-4)
        chosen = served["input_ids"][i, served["answer_window"][i]]
        assert 0 < served["answer_start"][i] <= served["answer_end"][i] < seq and chosen[0] == features[0].input_ids[0]
        if version_2:
            assert served["null_score"][i] == pytest.approx(null_odds[example.qas_id], abs=1e-4)
            assert bool(served["is_impossible"][i]) == (null_odds[example.qas_id] > threshold)
            non_null = best_non_null[example.qas_id]
            assert _folded(served["best_non_null_text"][i].decode()) == _decoded(tokenizer, non_null)
    assert served["answer_text"][-1] == b"" and served["answer_score"][-1] == np.float32(-1e30)  # no span: -1e30
    if version_2:
        assert sum(served["is_impossible"][:3]) == 1


def test_the_length_checks_leave_room_for_one_context_piece():
    """[CLS], the question's max_query_length pieces and two [SEP] leave at least one place for the context."""
    class _Reached(Exception):
        pass

    class _Model:
        @property
        def weights(self):  # the export's first look at the model, after its checks
            raise _Reached

    with pytest.raises(_Reached):
        serving_squad.export_squad_model(_Model(), "unused", max_seq_length=20, max_query_length=16, doc_stride=1)
    with pytest.raises(UsageError, match=r"^max_seq_length \(19\) must be greater than max_query_length \(16\) \+ 3: "
                                         r"the windows would hold no context$"):
        serving_squad.export_squad_model(_Model(), "unused", max_seq_length=19, max_query_length=16)
    with pytest.raises(UsageError, match="^doc_stride must be at least 1, got 0$"):
        serving_squad.export_squad_model(_Model(), "unused", max_seq_length=20, max_query_length=16, doc_stride=0)


@pytest.mark.slow
def test_a_model_not_yet_built_exports_its_heads(tmp_path):
    # built by the export, outside its functions; with dropout, which serving must leave off
    model = AlbertForSquad(tiny_config(max_position_embeddings=16, hidden_dropout_prob=0.5,
                                       attention_probs_dropout_prob=0.5))
    dirs = serving_squad.export_squad_model(model, str(tmp_path / "export"), max_seq_length=16, max_query_length=4)
    assert sorted(dirs) == ["ids"]
    features = {k: tf.constant(v, tf.int32) for k, v in (("input_ids", [[2, 10, 11, 3, 20, 21, 22, 3]]),
                                                          ("input_mask", [[1] * 8]),
                                                          ("segment_ids", [[0] * 4 + [1] * 4]))}
    loaded = tf.saved_model.load(dirs["ids"])
    assert not loaded.version_2.numpy() and not loaded.version_2.trainable  # a setting, not a weight
    served = loaded.signatures["serving_default"](**features)
    np.testing.assert_allclose(served["start_logits"], model(features, training=False)["start_logits"], atol=1e-5)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"sequence length exceeds max_position_embeddings \(16\)"):
        tf.saved_model.load(dirs["ids"]).signatures["serving_default"](
            **{k: tf.ones([1, 17], tf.int32) for k in features})
    # called again on the same folder, the library replaces its own export (the script asks for --overwrite)
    assert serving_squad.export_squad_model(model, str(tmp_path / "export"), max_seq_length=16,
                                            max_query_length=4) == dirs


def test_the_exports_defaults_are_run_squads_flags():
    """Called without them, the export cuts and ranks as the original's run_squad_v1/v2.py flags do by default."""
    defaults = {name: parameter.default
                for name, parameter in inspect.signature(serving_squad.export_squad_model).parameters.items()}
    for name in ("do_lower_case", "max_seq_length", "doc_stride", "max_query_length", "max_answer_length",
                 "n_best_size"):
        assert defaults[name] == ORIGINAL_FLAGS["run_squad_v1.py"][name] == ORIGINAL_FLAGS["run_squad_v2.py"][name]
