"""`predict.py` / `albert_tf.predict` for users holding only an export: a preprocessing + encoder pair gives the
encoder's pooled_output for each line (single texts and tab-separated pairs, GLUE-style columns), in batches with
progress; a classifier export's text signatures give its probabilities; TF Serving REST bodies are answered as the
model server would; bad files and exports are refused with a clear message."""

import io
import json
import os
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.data import glue
from albert_tf.model import AlbertModel, dummy_inputs
from albert_tf.serving import encoder as export
from albert_tf.serving import batch_prediction, rest
from tests.helpers import REPO, SPM
from tests.serving.test_export import (  # the fresh-process and saved_model_cli helpers
    fresh_process,
    start_saved_model_cli_show,
)

SST2_DEV = os.path.join(REPO, "data", "glue", "SST-2", "dev.tsv")
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ""}
LINES = ["It's a charming and often affecting journey.", "unflinchingly bleak and desperate", "1,000 naïve cafés",
         "Hello", "The ``best'' film of the year?", "ÅNGSTRÖM", "a b c d e f g h i j k l m n o p q r s t u v"]
PAIRS = [("The cat sat.", "A cat was sitting."), ("Hello", "World"), ("First only", ""),
         ("Numbers 2,500", "and more 3,000,")]
SEQ = 16


def tiny_config():
    return AlbertConfig(vocab_size=30000, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64, max_position_embeddings=128)


def features(tokenizer, texts_a, texts_b=None):
    return {k: tf.constant(v) for k, v in glue.features_from_texts(tokenizer, texts_a, texts_b, SEQ).items()}


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def pair_exports(tmp_path_factory):
    work = tmp_path_factory.mktemp("pair")
    model = AlbertModel(tiny_config())
    model(dummy_inputs(), training=False)
    encoder_dir = export.export_encoder(model, str(work / "encoder"), tokenizer_file=SPM)
    preprocessing_dir = export.export_preprocessing(str(work / "preprocessing"), spm_model_file=SPM,
                                                    max_seq_length=SEQ)
    return {"model": model, "encoder": encoder_dir, "preprocessing": preprocessing_dir, "work": work}


@pytest.mark.slow
def test_preprocessing_and_encoder_pair_give_pooled_embeddings(pair_exports, tokenizer, tmp_path):
    model = pair_exports["model"]
    lines_file = tmp_path / "lines.txt"
    lines_file.write_text("\n".join(LINES) + "\n\n", encoding="utf-8")  # a trailing blank line is skipped
    progress = []
    stats = batch_prediction.predict_file(pair_exports["preprocessing"], str(lines_file), str(tmp_path / "out.jsonl"),
                                 encoder_dir=pair_exports["encoder"], batch_size=3,
                                 progress=lambda done, total: progress.append((done, total)))
    assert progress == [(3, 7), (6, 7), (7, 7)]
    assert stats["examples"] == 7 and stats["signature"] == "serving_default"
    records = read_jsonl(tmp_path / "out.jsonl")
    assert [r["index"] for r in records] == list(range(7)) and [r["text"] for r in records] == LINES
    assert sorted(records[0]) == ["index", "pooled_output", "text"]
    expected = model(features(tokenizer, LINES))["pooled_output"].numpy()
    np.testing.assert_allclose([r["pooled_output"] for r in records], expected, atol=1e-5)

    # tab-separated pairs, and token vectors on request
    pairs_file = tmp_path / "pairs.tsv"
    pairs_file.write_text("".join(f"{a}\t{b}\n" for a, b in PAIRS), encoding="utf-8")
    batch_prediction.predict_file(pair_exports["preprocessing"], str(pairs_file), str(tmp_path / "pairs.jsonl"),
                         encoder_dir=pair_exports["encoder"], batch_size=2,
                         outputs=["pooled_output", "sequence_output"])
    records = read_jsonl(tmp_path / "pairs.jsonl")
    assert [(r["text_a"], r["text_b"]) for r in records] == PAIRS
    outputs = model(features(tokenizer, [a for a, _ in PAIRS], [b for _, b in PAIRS]))
    np.testing.assert_allclose([r["pooled_output"] for r in records], outputs["pooled_output"].numpy(), atol=1e-5)
    assert np.asarray(records[0]["sequence_output"]).shape == (SEQ, 32)

    # columns of a GLUE file with a header
    batch_prediction.predict_file(pair_exports["preprocessing"], SST2_DEV, str(tmp_path / "sst2.jsonl"),
                         encoder_dir=pair_exports["encoder"], batch_size=64, text_columns=[0], skip_header=True)
    records = read_jsonl(tmp_path / "sst2.jsonl")
    assert len(records) == 100 and records[0]["text"].startswith("it 's a charming")


@pytest.mark.slow
def test_predict_refuses_bad_files_and_exports(pair_exports, tmp_path):
    mixed = tmp_path / "mixed.tsv"
    mixed.write_text("one text\ntwo\ttexts\n", encoding="utf-8")
    with pytest.raises(batch_prediction.PredictError, match="different numbers of columns"):
        batch_prediction.read_examples(str(mixed))
    wide = tmp_path / "wide.tsv"
    wide.write_text("a\tb\tc\n", encoding="utf-8")
    with pytest.raises(batch_prediction.PredictError, match=r"wide.tsv:1: has 3 tab-separated columns"):
        batch_prediction.read_examples(str(wide))
    with pytest.raises(batch_prediction.PredictError, match="column 5 was asked for"):
        batch_prediction.read_examples(str(wide), text_columns=[5])
    with pytest.raises(batch_prediction.PredictError, match="input file not found"):
        batch_prediction.read_examples(str(tmp_path / "missing.txt"))
    lines = tmp_path / "lines.txt"
    lines.write_text("hello\n", encoding="utf-8")
    # an ids-only export has no text signature: the message lists what it has
    with pytest.raises(batch_prediction.PredictError,
                       match=r"no signature taking one text.*serving_default\(input_ids: int32"):
        batch_prediction.predict_file(pair_exports["encoder"], str(lines), str(tmp_path / "o.jsonl"))
    with pytest.raises(batch_prediction.PredictError, match="not the ids"):
        batch_prediction.Predictor(pair_exports["preprocessing"], encoder_dir=pair_exports["preprocessing"])
    with pytest.raises(batch_prediction.PredictError, match="no SavedModel"):
        batch_prediction.Predictor(str(tmp_path))
    with pytest.raises(batch_prediction.PredictError, match="unknown output"):
        batch_prediction.predict_file(pair_exports["preprocessing"], str(lines), str(tmp_path / "o.jsonl"),
                             encoder_dir=pair_exports["encoder"], outputs=["logits"])
    assert not os.path.exists(tmp_path / "o.jsonl")


@pytest.mark.slow
def test_predict_cli_answers_a_rest_body_as_tf_serving(pair_exports, tmp_path):
    """`predict.py --request_json` runs the README's row-format body through the session loader TF Serving uses."""
    body = {"instances": [{"input_ids": [2, 10975, 126, 3], "input_mask": [1, 1, 1, 1], "segment_ids": [0, 0, 0, 0]},
                          {"input_ids": [2, 14, 3, 0], "input_mask": [1, 1, 1, 0], "segment_ids": [0, 0, 0, 0]}]}
    request = tmp_path / "request.json"
    request.write_text(json.dumps(body), encoding="utf-8")
    done = subprocess.run([sys.executable, os.path.join(REPO, "predict.py"), f"--export_dir={pair_exports['encoder']}",
                           f"--request_json={request}"], capture_output=True, text=True, env=ENV, timeout=600,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    response = json.loads(done.stdout.strip().splitlines()[-1])
    columns = {k: tf.constant([i[k] for i in body["instances"]], tf.int32) for k in body["instances"][0]}
    expected = pair_exports["model"](columns)["pooled_output"].numpy()
    np.testing.assert_allclose([p["pooled_output"] for p in response["predictions"]], expected, atol=1e-5)
    request.write_text(json.dumps({"instances": [{"input_ids": [2, 3]}]}), encoding="utf-8")
    done = subprocess.run([sys.executable, os.path.join(REPO, "predict.py"), f"--export_dir={pair_exports['encoder']}",
                           f"--request_json={request}"], capture_output=True, text=True, env=ENV, timeout=600,
                          cwd=REPO)
    assert done.returncode != 0 and "lacks the named input 'input_mask'" in done.stderr


@pytest.mark.slow
def test_classifier_export_and_predict_clis(tmp_path, tokenizer):
    """export_model.py writes a classifier export from a fine-tuned checkpoint; predict.py runs its text and
    text_pair signatures on files, in batches, with progress, giving the classifier's probabilities."""
    from albert_tf import checkpoints
    from albert_tf.tasks.classification import build_classifier

    config = tiny_config()
    config.to_json_file(str(tmp_path / "config.json"))
    classifier = build_classifier(config, 2)
    checkpoints.save_checkpoint(classifier, str(tmp_path / "cls" / "model"), fmt="native")
    export_dir = tmp_path / "export"
    done = subprocess.run([sys.executable, os.path.join(REPO, "export_model.py"), "--export_type=classifier",
                           f"--albert_config_file={tmp_path / 'config.json'}", f"--init_checkpoint={tmp_path / 'cls'}",
                           f"--spm_model_file={SPM}", f"--max_seq_length={SEQ}", "--label_list=neg,pos",
                           f"--export_dir={export_dir}"], capture_output=True, text=True, env=ENV, timeout=900,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"Exported classifier to {export_dir}" in done.stdout
    export_dir = str(export_dir)
    show_pending = start_saved_model_cli_show([export_dir])

    lines = tmp_path / "lines.txt"
    lines.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{a}\t{b}\n" for a, b in PAIRS), encoding="utf-8")
    script = os.path.join(REPO, "predict.py")
    procs = [subprocess.Popen([sys.executable, script, f"--export_dir={export_dir}", f"--input_file={path}",
                               f"--output_file={tmp_path / (path.stem + '.jsonl')}", "--batch_size=3"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
             for path in (lines, pairs)]
    for proc in procs:
        _, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err[-3000:]
        assert "examples/s" in err  # progress and the final rate are logged
    single, pair = read_jsonl(tmp_path / "lines.jsonl"), read_jsonl(tmp_path / "pairs.jsonl")
    assert sorted(single[0]) == ["index", "labels", "predictions", "probabilities", "text"]
    expected = tf.nn.softmax(classifier(features(tokenizer, LINES))).numpy()
    np.testing.assert_allclose([r["probabilities"] for r in single], expected, atol=1e-5)
    assert [r["labels"] for r in single] == [["neg", "pos"][i] for i in expected.argmax(-1)]
    expected = tf.nn.softmax(classifier(features(tokenizer, [a for a, _ in PAIRS], [b for _, b in PAIRS]))).numpy()
    np.testing.assert_allclose([r["probabilities"] for r in pair], expected, atol=1e-5)
    assert [(r["text_a"], r["text_b"]) for r in pair] == PAIRS

    # saved_model_cli lists the signatures; a fresh process with only tensorflow + tensorflow_text answers (eagerly
    # and through TF Serving's session loader); the README's REST body for text is answered.
    calls = [{"dir": export_dir, "signature": "text", "inputs": {"text": {"dtype": "string", "value": LINES[:2]}}},
             {"dir": export_dir, "signature": "serving_default",
              "inputs": {k: {"dtype": "int32", "value": v.numpy().tolist()}
                         for k, v in features(tokenizer, LINES[:2]).items()}}]
    by_text, by_ids = fresh_process(calls)
    shown = show_pending()[export_dir]
    ids = {name: ["DT_INT32", "(-1, -1)"] for name in ("input_ids", "input_mask", "segment_ids")}
    assert sorted(shown) == ["serialized_example", "serving_default", "text", "text_pair", "tokenization_info"]
    assert shown["serving_default"]["inputs"] == ids
    assert shown["text"]["inputs"] == {"text": ["DT_STRING", "(-1)"]}
    assert sorted(shown["text_pair"]["inputs"]) == ["text_a", "text_b"]
    assert sorted(shown["text"]["outputs"]) == ["labels", "predictions", "probabilities"]
    expected = tf.nn.softmax(classifier(features(tokenizer, LINES[:2]))).numpy()
    for way in ("eager", "session"):
        np.testing.assert_allclose(by_text[way]["probabilities"], expected, atol=1e-5)
        np.testing.assert_allclose(by_ids[way]["probabilities"], expected, atol=1e-5)
        assert by_text[way]["labels"] == [["neg", "pos"][i] for i in expected.argmax(-1)]
    with rest.ServingSession(export_dir) as session:
        rows = session.predict({"signature_name": "text", "instances": [{"text": LINES[0]}, {"text": LINES[1]}]})
        np.testing.assert_allclose([row["probabilities"] for row in rows["predictions"]], expected, atol=1e-5)
        pair = session.predict({"signature_name": "text_pair",
                                "instances": [{"text_a": PAIRS[0][0], "text_b": PAIRS[0][1]}]})["predictions"][0]
        assert pair["labels"] in ("neg", "pos") and pair["predictions"] in (0, 1)


def test_a_too_long_sequence_or_an_unknown_id_is_one_line(pair_exports, tmp_path):
    """The export's own checks reach the user as one line: in-process (RestError) and from `predict.py`."""
    encoder = pair_exports["encoder"]
    with rest.ServingSession(encoder) as session:
        ids = np.full((1, 4), 2, np.int32)
        ids[0, 2] = 30000  # one past the vocabulary
        with pytest.raises(rest.RestError, match=r"^input_ids outside the vocabulary \[0, 30000\)$"):
            session.run(None, {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)})
    length = 129  # max_position_embeddings of the tiny config is 128
    body = {"instances": [{"input_ids": [2] * length, "input_mask": [1] * length, "segment_ids": [0] * length}]}
    request = tmp_path / "request.json"
    request.write_text(json.dumps(body), encoding="utf-8")
    done = subprocess.run([sys.executable, os.path.join(REPO, "predict.py"), f"--export_dir={encoder}",
                           f"--request_json={request}"], capture_output=True, text=True, env=ENV, timeout=600,
                          cwd=REPO)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == \
        f"predict.py: error: --request_json {request}: sequence length exceeds max_position_embeddings (128)"


def test_text_decodes_without_its_bom_and_a_bad_byte_is_named_by_line_and_column(tmp_path):
    assert batch_prediction.decode_text(b"\xef\xbb\xbfa\nb", "f") == "a\nb"
    for data, line, column in ((b"ok\nbad \xff", 2, 5), (b"one\r\ntwo\rx\xfe", 3, 2), (b"\xc3", 1, 1),
                               (b"line\n\xff", 2, 1), (b"one\r\xff", 2, 1)):
        with pytest.raises(batch_prediction.PredictError,
                           match=rf"^f:{line}: not UTF-8 text \(byte 0x[0-9a-f]{{2}} at column {column}: "):
            batch_prediction.decode_text(data, "f")


def test_examples_are_read_by_line_with_their_numbers(tmp_path):
    path = tmp_path / "in.tsv"
    path.write_bytes("id\ta\tb\n1\tgood\tfine\n\n2\tbad\tworse\r\n".encode())
    examples, numbers = batch_prediction.read_numbered_examples(str(path), text_columns=[1, 2], skip_header=True)
    assert examples == [("good", "fine"), ("bad", "worse")] and numbers == [2, 4]
    assert batch_prediction.read_numbered_examples(str(path), text_columns=[2]) == (  # no header by default
        [("b",), ("fine",), ("worse",)], [1, 2, 4])
    assert batch_prediction.read_examples(str(path), text_columns=[2]) == [("b",), ("fine",), ("worse",)]
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("a\tb\nc\td\n")
    assert batch_prediction.read_examples(str(pairs)) == [("a", "b"), ("c", "d")]
    for text, columns, told in (("a\tb\tc\n", None, r"in2.tsv:1: has 3 tab-separated columns; give one text"),
                                ("a\nb\tc\n", None, r"in2.tsv: lines have different numbers of columns \(\[1, 2\]\)"),
                                ("a\tb\n", [2], r"in2.tsv:1: has 2 column\(s\), column 2 was asked for"),
                                ("\n  \n", None, r"in2.tsv: no examples$"),
                                ("a\tb\tc\n", [0, 1, 2], r"in2.tsv: 3 text columns; 1 \(texts\) or 2 \(pairs\)")):
        (tmp_path / "in2.tsv").write_text(text)
        with pytest.raises(batch_prediction.PredictError, match=told):
            batch_prediction.read_examples(str(tmp_path / "in2.tsv"), text_columns=columns)
    with pytest.raises(batch_prediction.PredictError, match=r"^input file not found: "):
        batch_prediction.read_examples(str(tmp_path / "absent.tsv"))


def test_outputs_become_json_values():
    assert batch_prediction.to_json(np.array([[1.5, 2.0]], np.float32)) == [[1.5, 2.0]]
    assert batch_prediction.to_json(np.array([b"pos", b"n\xffg"], object)) == ["pos", "n\ufffdg"]
    assert batch_prediction.to_json(np.array(b"one", object)) == "one"
    assert batch_prediction.to_json(np.int32(3)) == 3 and type(batch_prediction.to_json(np.float32(0.5))) is float
    assert batch_prediction.to_json([b"a", [np.int64(1)]]) == ["a", [1]]
    assert batch_prediction.to_json(["a", 2, 0.5, None, True]) == ["a", 2, 0.5, None, True]  # JSON's own, as they are


class _Lengths(tf.Module):
    """A string-input export without a model: one text's length in characters (refused past 8, as an export's
    own check refuses a sequence longer than it takes) and its upper case; a pair's lengths as `b * 10 + a`."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentence")])
    def single(self, sentence):
        length = tf.strings.length(sentence, unit="UTF8_CHAR")
        check = tf.debugging.assert_less_equal(length, 8, message="sequence length exceeds "
                                                                   "max_position_embeddings (8)")
        with tf.control_dependencies([check]):
            return {"length": tf.identity(length), "upper": tf.strings.upper(sentence, encoding="utf-8")}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentence")])
    def other(self, sentence):
        return {"lower": tf.strings.lower(sentence)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="context"),
                                  tf.TensorSpec([None], tf.string, name="question")])
    def pair(self, context, question):
        return {"code": tf.strings.length(context) * 10 + tf.strings.length(question)}

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="input_ids")])
    def ids(self, input_ids):
        return {"sum": tf.reduce_sum(input_ids, axis=-1)}


@pytest.fixture(name="lengths_export", scope="module")
def _lengths_export(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("lengths") / "export")
    module = _Lengths()
    tf.saved_model.save(module, path, signatures={"text": module.single, "a_lower": module.other,
                                                  "text_pair": module.pair, "serving_default": module.ids})
    return path


def test_a_text_file_runs_through_a_string_export_in_batches(lengths_export, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("a\nbb\n\nccc\ndddd\néé\n", encoding="utf-8")
    calls = []
    out = tmp_path / "out.jsonl"
    result = batch_prediction.predict_file(lengths_export, str(source), str(out), batch_size=2,
                                           progress=lambda done, total: calls.append((done, total)))
    assert (result["examples"], result["signature"], result["output_file"]) == (5, "text", str(out))
    assert calls == [(2, 5), (4, 5), (5, 5)]
    assert read_jsonl(out) == [{"index": i, "text": t, "length": len(t), "upper": t.upper()}
                               for i, t in enumerate(["a", "bb", "ccc", "dddd", "éé"])]

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("x\tyy\nxxx\t\n", encoding="utf-8")
    batch_prediction.predict_file(lengths_export, str(pairs), str(out), batch_size=5)
    assert read_jsonl(out) == [{"index": 0, "question": "x", "context": "yy", "code": 21},
                               {"index": 1, "question": "xxx", "context": "", "code": 3}]

    # The export's own check refuses line 4 (the third example): named by file and line, nothing written.
    source.write_text("a\nbb\n\ntoo long a text\nd\n", encoding="utf-8")
    out.write_text("kept")
    with pytest.raises(batch_prediction.PredictError, match=rf"^{source}:4: sequence length exceeds "
                                                            r"max_position_embeddings \(8\)$"):
        batch_prediction.predict_file(lengths_export, str(source), str(out), batch_size=2)
    assert out.read_text() == "kept"
    with pytest.raises(batch_prediction.PredictError, match="^batch_size must be at least 1, got 0$"):
        batch_prediction.predict_file(lengths_export, str(source), str(out), batch_size=0)


class _Unpreferred(tf.Module):
    """An export none of whose signature names the predictor prefers: two taking one text [batch] (refusing a
    batch of more than two as a whole), one taking ids [batch] and one texts [batch, 2] (neither is text), and a
    pair whose input names are in no known order (`premise` refused past 8 characters)."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="words")])
    def first(self, words):
        check = tf.debugging.assert_less_equal(tf.size(words), 2, message="batch of more than 2")
        with tf.control_dependencies([check]):
            return {"by": tf.fill(tf.shape(words), "b_text")}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="words")])
    def second(self, words):
        return {"by": tf.fill(tf.shape(words), "c_text")}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32, name="ids")])
    def ids(self, ids):
        return {"by": tf.fill(tf.shape(ids), "a_ids")}

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.string, name="rows")])
    def rows(self, rows):
        return {"by": tf.fill(tf.shape(rows)[:1], "a_rows")}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="premise"),
                                  tf.TensorSpec([None], tf.string, name="hypothesis")])
    def entail(self, premise, hypothesis):
        length = tf.strings.length(premise)
        check = tf.debugging.assert_less_equal(length, 8, message="premise longer than 8")
        with tf.control_dependencies([check]):
            return {"code": length * 10 + tf.strings.length(hypothesis)}


def test_signatures_no_name_prefers_are_chosen_by_name_and_read_in_their_own_order(tmp_path):
    """Without a preferred name, the first text signature by name (ids [batch] and texts [batch, 2] are no text
    signatures); a pair's inputs in no known order refused unless named in order (a SavedModel keeps none, so
    any other choice would be a guess); a batch refused as a whole (each example alone passes) named by its
    lines; a pair refused for its first text named by its line."""
    path = str(tmp_path / "export")
    module = _Unpreferred()
    tf.saved_model.save(module, path, signatures={"b_text": module.first, "c_text": module.second,
                                                  "a_ids": module.ids, "a_rows": module.rows, "entail": module.entail})
    predictor = batch_prediction.Predictor(path)
    assert predictor.signature_for(1)[::2] == ("b_text", ["words"])
    assert predictor.predict(["x", "y"])["by"].tolist() == [b"b_text"] * 2
    with pytest.raises(batch_prediction.PredictError, match=r"^the signature entail takes hypothesis, premise, in "
                                                            r"no order known here .*--pair_inputs=hypothesis,premise$"):
        predictor.predict(["abc"], ["de"])
    with pytest.raises(batch_prediction.PredictError, match=r"^--pair_inputs premise,claim: the signature entail "
                                                            r"takes hypothesis, premise$"):
        batch_prediction.Predictor(path, pair_inputs=["premise", "claim"]).signature_for(2)
    predictor = batch_prediction.Predictor(path, pair_inputs=["premise", "hypothesis"])
    assert predictor.signature_for(2)[::2] == ("entail", ["premise", "hypothesis"])
    assert predictor.predict(["abc"], ["de"])["code"].tolist() == [32]
    source = tmp_path / "in.txt"
    source.write_text("a\nb\nc\n", encoding="utf-8")
    with pytest.raises(batch_prediction.PredictError, match=rf"^{source}:1-3: batch of more than 2$"):
        batch_prediction.predict_file(path, str(source), str(tmp_path / "out.jsonl"), batch_size=3)
    source.write_text("short\tx\nmuch too long\ty\n", encoding="utf-8")
    with pytest.raises(batch_prediction.PredictError, match=rf"^{source}:2: premise longer than 8$"):
        batch_prediction.predict_file(path, str(source), str(tmp_path / "out.jsonl"),
                                      pair_inputs=["premise", "hypothesis"])


def test_texts_may_be_bytes_and_a_file_goes_in_batches_of_32(lengths_export, tmp_path):
    predictor = batch_prediction.Predictor(lengths_export, outputs=["length"])
    assert predictor.predict([b"ab", "\u00e9".encode()])["length"].tolist() == [2, 1]  # UTF-8 bytes as given
    source = tmp_path / "in.txt"
    source.write_text("x\n" * 33, encoding="utf-8")
    calls = []
    batch_prediction.predict_file(lengths_export, str(source), str(tmp_path / "out.jsonl"),
                                  progress=lambda done, total: calls.append((done, total)))
    assert calls == [(32, 33), (33, 33)]
    calls.clear()
    source.write_text("x\ny\n", encoding="utf-8")
    batch_prediction.predict_file(lengths_export, str(source), str(tmp_path / "out.jsonl"), batch_size=1,
                                  progress=lambda done, total: calls.append((done, total)))
    assert calls == [(1, 2), (2, 2)]  # one example a batch is a batch



def test_progress_is_logged_at_most_every_interval_and_at_the_end(lengths_export, tmp_path, caplog, monkeypatch):
    """A batch a second (a clock of its own): with a 1.5 s interval, a line at the second batch, none at the third
    (1 s after the last line), one at the end; every batch with an interval of 1 s (the interval itself counts) or
    0; none but the last with one too long."""
    source = tmp_path / "in.txt"
    source.write_text("w\nx\ny\nz\n", encoding="utf-8")
    every_batch = ["1/4", "2/4", "3/4", "4/4"]
    for every, logged in ((1.5, ["2/4", "4/4"]), (1.0, every_batch), (1e9, ["4/4"]), (0.0, every_batch)):
        clock = iter(range(10, 100))  # the start at 10, the batches at 11, 12, 13, 14, the end at 15
        monkeypatch.setattr(batch_prediction, "time", types.SimpleNamespace(time=lambda: next(clock)))
        caplog.clear()
        with caplog.at_level("INFO"):
            result = batch_prediction.predict_file(lengths_export, str(source), str(tmp_path / "out.jsonl"),
                                                   batch_size=1, log_every_seconds=every)
        lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("predicted ")]
        assert [line.split()[1] for line in lines] == logged, (every, lines)
        assert all(line.endswith("%, 1.0 examples/s)") for line in lines), lines  # n examples in n seconds
        assert f"Predicting 4 examples with signature 'text' of {lengths_export}, batch size 1" in caplog.text
        assert (result["seconds"], result["examples_per_second"]) == (5, 0.8)


def test_output_to_stdout_is_flushed_before_returning_and_keeps_text_readable(lengths_export, tmp_path,
                                                                            monkeypatch):
    source = tmp_path / "in.txt"
    source.write_text("ab\nc\n\u00e9t\u00e9\n", encoding="utf-8")
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="utf-8"))
    batch_prediction.predict_file(lengths_export, str(source), "-", batch_size=1)
    lines = raw.getvalue().decode("utf-8").splitlines()
    assert [json.loads(line)["text"] for line in lines] == ["ab", "c", "\u00e9t\u00e9"]
    assert [json.loads(line)["length"] for line in lines[:2]] == [2, 1]
    assert '"text": "\u00e9t\u00e9"' in lines[2]  # the text as written, not as \\u escapes


def test_a_predictor_picks_the_string_signature_and_the_outputs_asked(lengths_export, tmp_path):
    predictor = batch_prediction.Predictor(lengths_export, outputs=["length"])
    assert predictor.signature_for(1)[0] == "text"  # the preferred name among the one-text signatures
    name, _, names = predictor.signature_for(2)
    assert name == "text_pair" and names == ["question", "context"]  # the pair's order, whatever the signature's
    got = predictor.predict(["ab", "c"])
    assert list(got) == ["length"] and got["length"].tolist() == [2, 1]
    with pytest.raises(batch_prediction.PredictError, match=r"^unknown output\(s\) nope; the model gives length, "
                                                            r"upper$"):
        batch_prediction.Predictor(lengths_export, outputs=["nope"]).predict(["a"])
    with pytest.raises(batch_prediction.InputRefused, match=r"^sequence length exceeds max_position_embeddings"):
        predictor.predict(["a" * 9])
    with pytest.raises(batch_prediction.PredictError, match=rf"^no SavedModel in {tmp_path}$"):
        batch_prediction.Predictor(str(tmp_path))
    with pytest.raises(batch_prediction.PredictError, match=rf"^no SavedModel in {tmp_path}$"):
        batch_prediction.Predictor(lengths_export, encoder_dir=str(tmp_path))
    damaged = tmp_path / "damaged"
    shutil.copytree(lengths_export, damaged)
    (damaged / "saved_model.pb").write_bytes((damaged / "saved_model.pb").read_bytes()[:50])
    with pytest.raises(batch_prediction.PredictError, match=rf"^the SavedModel in {damaged} cannot be loaded "
                                                            r"\(truncated or damaged\?\): "):
        batch_prediction.Predictor(str(damaged))
    with pytest.raises(batch_prediction.PredictError, match=r"'s serving_default takes input_ids, not the ids "):
        batch_prediction.Predictor(lengths_export, encoder_dir=lengths_export)
    ids_only = tmp_path / "ids"
    module = _Lengths()
    tf.saved_model.save(module, str(ids_only), signatures={"serving_default": module.ids})
    with pytest.raises(batch_prediction.PredictError, match=r"^the export has no signature taking text pairs as 2 "
                                                            r"string tensor\(s\); it has: serving_default\(input_ids: "
                                                            r"int32\)$"):
        batch_prediction.Predictor(str(ids_only)).signature_for(2)


def test_both_folders_are_checked_before_either_export_is_loaded(lengths_export, tmp_path, monkeypatch):
    loaded = []
    monkeypatch.setattr(batch_prediction, "load_saved_model", lambda path, error: loaded.append(path))
    with pytest.raises(batch_prediction.PredictError, match=rf"^no SavedModel in {tmp_path / 'absent'}$"):
        batch_prediction.Predictor(lengths_export, encoder_dir=str(tmp_path / "absent"))
    assert loaded == []


def test_an_export_refusing_every_input_is_named_with_its_encoder(tmp_path, monkeypatch):
    """The message names the export, and the encoder it runs with when there is one."""

    class RefusesAll:
        def __init__(self, export_dir, encoder_dir=None, outputs=None, pair_inputs=None):
            del export_dir, encoder_dir, outputs, pair_inputs

        def signature_for(self, num_texts):
            return "text", None, ["text"] * num_texts

        def predict(self, texts_a, texts_b=None):
            raise batch_prediction.InputRefused("sequence length exceeds max_position_embeddings (4)")

    monkeypatch.setattr(batch_prediction, "Predictor", RefusesAll)
    source = tmp_path / "in.txt"
    source.write_text("a\nb\n", encoding="utf-8")
    for encoder, where in ((None, "exp"), ("enc", "exp with the encoder enc")):
        with pytest.raises(batch_prediction.PredictError) as err:
            batch_prediction.predict_file("exp", str(source), str(tmp_path / "out.jsonl"), encoder_dir=encoder)
        assert str(err.value) == (f"{where} refuses every input, even an empty text: sequence length exceeds "
                                  "max_position_embeddings (4)")
        assert not (tmp_path / "out.jsonl").exists()
