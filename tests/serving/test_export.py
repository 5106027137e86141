"""Serving exports: every SavedModel type is listed by `saved_model_cli show --all`, loads and answers in a fresh
process with only tensorflow + tensorflow_text (eagerly and through the session loader TF Serving uses), answers the
TF Serving REST bodies of the README, rebuilds its tokenizer from `tokenization_info`, rejects bad calls; shared
weights are stored once; TFLite agrees with the model; `export_model.py` refuses bad input."""

import json
import os
import re
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import checkpoints, fileio
from albert_tf.config import AlbertConfig
from albert_tf.errors import UsageError
from albert_tf.model import AlbertForPretraining, dummy_inputs
from albert_tf.serving import encoder, savedmodel, tflite
from albert_tf.serving.rest import RestError, ServingSession
from albert_tf.tasks import exports
from albert_tf.tasks.export_request import EXPORT_TYPES
from albert_tf.text import tokenization
from tests.helpers import written_entries

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPM = os.path.join(REPO, "data", "30k-clean.model")
VOCAB_ZH = os.path.join(REPO, "data", "vocab_chinese.txt")
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ""}

# The README's TF Serving REST bodies (row and columnar format) for an encoder export.
ROW_BODY = {"instances": [
    {"input_ids": [2, 10975, 126, 3, 0, 0], "input_mask": [1, 1, 1, 1, 0, 0], "segment_ids": [0, 0, 0, 0, 0, 0]},
    {"input_ids": [2, 14, 1637, 3, 2119, 3], "input_mask": [1, 1, 1, 1, 1, 1], "segment_ids": [0, 0, 0, 0, 1, 1]},
]}
COLUMNAR_BODY = {"inputs": {
    "input_ids": [[2, 10975, 126, 3, 0, 0], [2, 14, 1637, 3, 2119, 3]],
    "input_mask": [[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]],
    "segment_ids": [[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1]],
}}
TEXTS = ["Hello World!", "The café's 1,000,000 visitors didn't   ``complain''.", "naïve ÅNGSTRÖM résumé"]
TEXTS_B = ["A second text.", "", "中文 text, 2,500 words"]

# Runs in a fresh interpreter: only tensorflow and tensorflow_text are imported. For each call it answers through
# tf.saved_model.load and through the TF1 session loader (what TF Serving and `saved_model_cli run` use).
LOADER = r"""
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

spec = json.loads(sys.stdin.read())

def plain(value):
    value = np.asarray(value)
    if value.dtype.kind in "SO":
        return [v.decode("utf-8") if isinstance(v, bytes) else plain(v) for v in value.tolist()] if value.ndim \
            else value.item().decode("utf-8")
    return value.tolist()

results = []
loaded, sessions = {}, {}
for call in spec:
    inputs = {k: np.array(v["value"], dtype=object if v["dtype"] == "string" else v["dtype"])
              for k, v in call["inputs"].items()}
    if call["dir"] not in loaded:
        loaded[call["dir"]] = tf.saved_model.load(call["dir"])
        sess = tf.compat.v1.Session(graph=tf.Graph())
        with sess.graph.as_default():
            meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], call["dir"])
        sessions[call["dir"]] = (sess, meta)
    fn = loaded[call["dir"]].signatures[call["signature"]]
    eager = {k: plain(v.numpy()) for k, v in fn(**{k: tf.constant(v) for k, v in inputs.items()}).items()}
    sess, meta = sessions[call["dir"]]
    sig = meta.signature_def[call["signature"]]
    fetched = sess.run({k: t.name for k, t in sig.outputs.items()}, {sig.inputs[k].name: v for k, v in inputs.items()})
    results.append({"eager": eager, "session": {k: plain(v) for k, v in fetched.items()}})
print(json.dumps({"modules": sorted(m for m in sys.modules if m.split(".")[0] == "albert_tf"), "results": results}))
"""


def tiny_config(**overrides):
    values = dict(vocab_size=30000, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=128)
    values.update(overrides)
    return AlbertConfig(**values)


def write_config(config, path):
    config.to_json_file(str(path))
    return str(path)


def start_saved_model_cli_show(dirs):
    """Starts `saved_model_cli show --all --dir D` for each dir (concurrently, while the test goes on); returns a
    function that waits for them -> {dir: {signature: {"inputs": {name: [dtype, shape]}, "outputs": {...}}}}."""
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    command = [cli] if os.path.exists(cli) else [shutil.which("saved_model_cli")]
    procs = {d: subprocess.Popen(command + ["show", "--all", "--dir", d], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=ENV) for d in dirs}

    def wait():
        shown = {}
        for d, proc in procs.items():
            out, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, err[-2000:]
            shown[d] = parse_show(out)
        return shown

    return wait


def parse_show(text):
    signatures, current, key = {}, None, None
    for line in text.splitlines():
        line = line.strip()
        match = re.fullmatch(r"signature_def\['(.+)'\]:", line)
        if match:
            current = signatures.setdefault(match.group(1), {"inputs": {}, "outputs": {}})
            continue
        match = re.fullmatch(r"(inputs|outputs)\['(.+)'\] tensor_info:", line)
        if match and current is not None:
            key = (match.group(1), match.group(2))
            current[key[0]][key[1]] = [None, None]
            continue
        if key and line.startswith("dtype:"):
            current[key[0]][key[1]][0] = line.split(":", 1)[1].strip()
        elif key and line.startswith("shape:"):
            current[key[0]][key[1]][1] = line.split(":", 1)[1].strip()
        if line.startswith("Concrete Functions"):
            break
    signatures.pop("__saved_model_init_op", None)
    return signatures


def fresh_process(calls):
    """Runs LOADER on `calls` ([{dir, signature, inputs: {name: {dtype, value}}}]); returns its JSON answer."""
    done = subprocess.run([sys.executable, "-c", LOADER], input=json.dumps(calls), capture_output=True, text=True,
                          env=ENV, timeout=600, cwd="/")
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["modules"] == []  # nothing of albert_tf was imported to run the exports
    return answer["results"]


def ids_inputs(body):
    return {k: {"dtype": "int32", "value": v} for k, v in body["inputs"].items()}


def assert_close(a, b, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), atol=atol, rtol=1e-4)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """A tiny AlbertForPretraining with a native checkpoint and its config file."""
    work = tmp_path_factory.mktemp("pretrained")
    config = tiny_config()
    model = AlbertForPretraining(config)
    model(dummy_inputs(num_predictions=1), training=False)
    checkpoints.save_checkpoint(model, str(work / "ckpt" / "model"), fmt="native")
    return {"model": model, "config": config, "config_file": write_config(config, work / "config.json"),
            "checkpoint": str(work / "ckpt"), "work": work}


# ------------------------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_encoder_export_serves_without_albert_tf(pretrained, tokenizer):
    work, model = pretrained["work"], pretrained["model"]
    outcome = exports.export("encoder", str(work / "encoder"), albert_config_file=pretrained["config_file"],
                               init_checkpoint=pretrained["checkpoint"], spm_model_file=SPM, log=lambda *_: None)
    export_dir = outcome["export_dir"]
    assert outcome["model"] == "AlbertForPretraining"

    show_pending = start_saved_model_cli_show([export_dir])

    # What the model computes for the README's request.
    features = {k: tf.constant(v, tf.int32) for k, v in COLUMNAR_BODY["inputs"].items()}
    expected = {k: v.numpy() for k, v in model.albert(features).items() if k in ("sequence_output", "pooled_output")}
    positions = [[1, 2], [3, 5]]
    expected_mlm = model({**features, "masked_lm_positions": tf.constant(positions)})["mlm_logits"].numpy()
    expected_sop = tf.nn.log_softmax(model.seq_relationship(expected["pooled_output"]), axis=-1).numpy()

    # A fresh process with only tensorflow + tensorflow_text, eagerly and through the session loader.
    inputs = ids_inputs(COLUMNAR_BODY)
    calls = [{"dir": export_dir, "signature": "serving_default", "inputs": inputs},
             {"dir": export_dir, "signature": "mlm",
              "inputs": {**inputs, "masked_lm_positions": {"dtype": "int32", "value": positions}}},
             {"dir": export_dir, "signature": "sop", "inputs": inputs},
             {"dir": export_dir, "signature": "tokenization_info", "inputs": {}}]
    serving, mlm, sop, info = fresh_process(calls)

    show = show_pending()[export_dir]
    assert sorted(show) == ["mlm", "serving_default", "sop", "tokenization_info"]
    ids = {name: ["DT_INT32", "(-1, -1)"] for name in ("input_ids", "input_mask", "segment_ids")}
    assert show["serving_default"]["inputs"] == ids
    assert show["serving_default"]["outputs"] == {"sequence_output": ["DT_FLOAT", "(-1, -1, 32)"],
                                                  "pooled_output": ["DT_FLOAT", "(-1, 32)"]}
    assert show["mlm"]["inputs"] == {**ids, "masked_lm_positions": ["DT_INT32", "(-1, -1)"]}
    assert list(show["mlm"]["outputs"]) == ["mlm_logits"] and list(show["sop"]["outputs"]) == ["sop_log_probs"]
    assert sorted(show["tokenization_info"]["outputs"]) == ["do_lower_case", "vocab_file"]
    for way in ("eager", "session"):
        for name, value in expected.items():
            assert_close(serving[way][name], value)
        assert_close(mlm[way]["mlm_logits"], expected_mlm, atol=1e-4)
        assert_close(sop[way]["sop_log_probs"], expected_sop)
    assert info["eager"]["do_lower_case"] is True and info["eager"]["vocab_file"].startswith(export_dir)

    # The README's REST bodies, turned into signature calls as TF Serving does.
    with ServingSession(export_dir) as session:
        rows = session.predict(ROW_BODY)["predictions"]
        columns = session.predict(json.dumps(COLUMNAR_BODY))["outputs"]
        assert len(rows) == 2 and sorted(rows[0]) == ["pooled_output", "sequence_output"]
        for name, value in expected.items():
            assert_close([row[name] for row in rows], value)
            assert_close(columns[name], value)
        sop_rows = session.predict({"signature_name": "sop", **ROW_BODY})["predictions"]
        assert_close(sop_rows, sop["eager"]["sop_log_probs"])
        # refused as TF Serving refuses them
        with pytest.raises(RestError, match="not of the expected type int32"):
            session.predict({"instances": [{**ROW_BODY["instances"][0], "input_ids": [2.5, 3, 4, 5, 6, 7]}]})
        with pytest.raises(RestError, match="lacks the named input 'segment_ids'"):
            session.predict({"instances": [{"input_ids": [2, 3], "input_mask": [1, 1]}]})
        with pytest.raises(RestError, match="different shapes"):
            session.predict({"instances": [ROW_BODY["instances"][0],
                                           {k: v[:4] for k, v in ROW_BODY["instances"][1].items()}]})
        with pytest.raises(RestError, match="shape"):
            session.predict({"inputs": {k: v[0] for k, v in COLUMNAR_BODY["inputs"].items()}})
        too_long = {k: [[1] * 129] for k in ("input_ids", "input_mask", "segment_ids")}
        with pytest.raises(RestError, match=r"^sequence length exceeds max_position_embeddings \(128\)$"):
            session.predict({"inputs": too_long})  # the model server's 400: the export's own check, one line

    # The loaded signatures reject wrong dtypes and shapes themselves, and too-long sequences with a clear message.
    loaded = tf.saved_model.load(export_dir)
    serve = loaded.signatures["serving_default"]
    good = {k: tf.constant(v, tf.int32) for k, v in COLUMNAR_BODY["inputs"].items()}
    assert_close(serve(**good)["pooled_output"].numpy(), expected["pooled_output"])
    with pytest.raises((TypeError, ValueError, tf.errors.InvalidArgumentError)):
        serve(**{**good, "input_ids": tf.cast(good["input_ids"], tf.float32)})
    with pytest.raises((TypeError, ValueError, tf.errors.InvalidArgumentError)):
        serve(**{**good, "input_ids": good["input_ids"][0]})
    with pytest.raises(tf.errors.InvalidArgumentError, match="exceeds max_position_embeddings"):
        serve(**{k: tf.ones([1, 129], tf.int32) for k in good})

    # tokenization_info alone rebuilds the tokenizer, with the same ids.
    info = loaded.signatures["tokenization_info"]()
    rebuilt = tokenization.FullTokenizer(spm_model_file=info["vocab_file"].numpy().decode(),
                                         do_lower_case=bool(info["do_lower_case"].numpy()))
    for text in TEXTS + TEXTS_B:
        assert rebuilt.convert_tokens_to_ids(rebuilt.tokenize(text)) == \
            tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))

    # The encoder SavedModel converts to TFLite (fixed seq length) and agrees with it.
    lite = tflite.export_tflite(export_dir, str(work / "encoder.tflite"), seq_length=16)
    assert lite.input_shape == (-1, 16) and lite.outputs == ("pooled_output", "sequence_output")
    assert not lite.select_tf_ops and max(lite.max_abs_diff.values()) < 1e-4, lite.summary()


def test_encoder_from_a_fine_tuned_checkpoint(tmp_path):
    """A classifier checkpoint exports its fine-tuned encoder (no MLM/SOP heads, so no mlm/sop signatures)."""
    from albert_tf.tasks.classification import build_classifier

    config = tiny_config()
    classifier = build_classifier(config, 3)
    checkpoints.save_checkpoint(classifier, str(tmp_path / "cls" / "model"), fmt="native")
    outcome = exports.export("encoder", str(tmp_path / "export"), albert_config_file=write_config(
        config, tmp_path / "config.json"), init_checkpoint=str(tmp_path / "cls"), log=lambda *_: None)
    assert outcome["model"] == "AlbertModel"
    loaded = tf.saved_model.load(outcome["export_dir"])
    assert sorted(loaded.signatures) == ["serving_default"]
    features = {k: tf.constant(v, tf.int32) for k, v in COLUMNAR_BODY["inputs"].items()}
    assert_close(loaded.signatures["serving_default"](**features)["pooled_output"].numpy(),
                 classifier.albert(features)["pooled_output"].numpy())


def matmul_dtypes(concrete_function):
    """The dtypes of the MatMul / BatchMatMul nodes in a loaded signature's graph and the functions it calls."""
    graph_def = concrete_function.graph.as_graph_def()
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    return {tf.dtypes.as_dtype(n.attr["T"].type).name for n in nodes if n.op in ("MatMul", "BatchMatMulV2")}


@pytest.mark.slow
def test_encoder_export_in_bfloat16(pretrained, tmp_path):
    """--mixed_precision=bf16: the served encoder computes its matmuls in bfloat16 from the float32 checkpoint and
    serves float32 outputs, close to the float32 model's; the global dtype policy is left as it was."""
    outcome = exports.export("encoder", str(tmp_path / "bf16"), albert_config_file=pretrained["config_file"],
                             init_checkpoint=pretrained["checkpoint"], mixed_precision="bf16", log=lambda *_: None)
    assert keras.mixed_precision.global_policy().name == "float32"
    serve = tf.saved_model.load(outcome["export_dir"]).signatures["serving_default"]
    assert matmul_dtypes(serve) == {"bfloat16"}
    features = {k: tf.constant(v, tf.int32) for k, v in COLUMNAR_BODY["inputs"].items()}
    served = serve(**features)
    expected = pretrained["model"].albert(features)
    for name in ("sequence_output", "pooled_output"):
        assert served[name].dtype == tf.float32
        difference = np.abs(served[name].numpy() - expected[name].numpy()).max()
        assert 0 < difference < 0.1, (name, difference)  # bfloat16 keeps 8 bits of mantissa


def test_mixed_precision_refused_where_it_does_not_apply(pretrained, tmp_path):
    quiet = {"log": lambda *_: None, "albert_config_file": pretrained["config_file"],
             "init_checkpoint": pretrained["checkpoint"]}
    with pytest.raises(UsageError, match="--mixed_precision must be bf16 or fp16, got 'int8'"):
        exports.export("encoder", str(tmp_path / "a"), mixed_precision="int8", **quiet)
    with pytest.raises(UsageError, match="--mixed_precision applies to the model SavedModel exports, not to "
                                         "--export_type=preprocessing"):
        exports.export("preprocessing", str(tmp_path / "b"), mixed_precision="bf16", spm_model_file=SPM, **quiet)
    with pytest.raises(UsageError, match="--export_type=tflite"):
        exports.export("tflite", str(tmp_path / "c"), mixed_precision="bf16", **quiet)
    assert not any(os.path.exists(tmp_path / d) for d in "abc")
    assert keras.mixed_precision.global_policy().name == "float32"


@pytest.mark.slow
def test_preprocessing_exports_give_the_python_tokenizers_ids(tmp_path):
    zh_texts = ["中华人民共和国 HELLO", "Ünïcödé 和 1,000", "  "]
    cases = {"spm": (dict(spm_model_file=SPM), TEXTS, TEXTS_B),
             "wordpiece": (dict(vocab_file=VOCAB_ZH), zh_texts + TEXTS[:1], TEXTS_B[::-1] + ["再见"])}
    dirs = {}
    for name, (files, _, _) in cases.items():
        dirs[name] = exports.export("preprocessing", str(tmp_path / name), max_seq_length=16,
                                      log=lambda *_: None, **files)["export_dir"]
    show_pending = start_saved_model_cli_show(list(dirs.values()))
    calls = []
    for name, (files, texts, texts_b) in cases.items():
        calls += [{"dir": dirs[name], "signature": "serving_default",
                   "inputs": {"text": {"dtype": "string", "value": texts}}},
                  {"dir": dirs[name], "signature": "encode_pair",
                   "inputs": {"text_a": {"dtype": "string", "value": texts},
                              "text_b": {"dtype": "string", "value": texts_b}}},
                  {"dir": dirs[name], "signature": "tokenization_info", "inputs": {}}]
    answers = iter(fresh_process(calls))
    shown = show_pending()
    for name in cases:
        show = shown[dirs[name]]
        assert sorted(show) == ["encode_pair", "serving_default", "tokenization_info"]
        outputs = {k: ["DT_INT32", "(-1, 16)"] for k in ("input_ids", "input_mask", "segment_ids")}
        assert show["serving_default"] == {"inputs": {"text": ["DT_STRING", "(-1)"]}, "outputs": outputs}
        assert show["encode_pair"]["inputs"] == {"text_a": ["DT_STRING", "(-1)"], "text_b": ["DT_STRING", "(-1)"]}
        assert show["encode_pair"]["outputs"] == outputs
    for name, (files, texts, texts_b) in cases.items():
        python = tokenization.FullTokenizer(do_lower_case=True, **files)
        single, pair, info = next(answers), next(answers), next(answers)
        for way in ("eager", "session"):
            for i, text in enumerate(texts):
                ids, mask, segments = tokenization.encode_pair(python, text, None, 16)
                assert single[way]["input_ids"][i] == ids, (name, text)
                assert single[way]["input_mask"][i] == mask and single[way]["segment_ids"][i] == segments
                ids, mask, segments = tokenization.encode_pair(python, text, texts_b[i], 16)
                assert pair[way]["input_ids"][i] == ids, (name, text, texts_b[i])
                assert pair[way]["input_mask"][i] == mask and pair[way]["segment_ids"][i] == segments
        # the tokenizer rebuilt from tokenization_info alone gives the same ids
        asset = info["eager"]["vocab_file"]
        assert asset.startswith(dirs[name]) and info["eager"]["do_lower_case"] is True
        key = "spm_model_file" if name == "spm" else "vocab_file"
        rebuilt = tokenization.FullTokenizer(do_lower_case=info["eager"]["do_lower_case"], **{key: asset})
        for text in texts + texts_b:
            assert rebuilt.convert_tokens_to_ids(rebuilt.tokenize(text)) == \
                python.convert_tokens_to_ids(python.tokenize(text))

    # The README's REST body for text, and a string signature refusing numbers.
    with ServingSession(dirs["spm"]) as session:
        rows = session.predict({"instances": [{"text": TEXTS[0]}, {"text": TEXTS[1]}]})["predictions"]
        pairs = session.predict({"signature_name": "encode_pair",
                                 "instances": [{"text_a": TEXTS[0], "text_b": TEXTS_B[0]}]})["predictions"]
        python = tokenization.FullTokenizer(spm_model_file=SPM)
        assert rows[1]["input_ids"] == tokenization.encode_pair(python, TEXTS[1], None, 16)[0]
        assert pairs[0]["segment_ids"] == tokenization.encode_pair(python, TEXTS[0], TEXTS_B[0], 16)[2]
        with pytest.raises(RestError, match="not of the expected type string"):
            session.predict({"instances": [{"text": 5}]})
    loaded = tf.saved_model.load(dirs["spm"])
    with pytest.raises((TypeError, ValueError, tf.errors.InvalidArgumentError), match="string"):
        loaded.signatures["serving_default"](text=tf.constant([1, 2]))
    with pytest.raises((TypeError, ValueError, tf.errors.InvalidArgumentError), match="shape"):
        loaded.signatures["serving_default"](text=tf.constant([["a", "b"]]))


@pytest.mark.slow
def test_tflite_classifier_float32_and_int8_on_sst2(tmp_path, tokenizer):
    """A tiny classifier fine-tuned on the shipped SST-2 sample, converted to TFLite: float32 agrees with the model;
    int8 is smaller and changes the dev accuracy and predictions little."""
    import keras

    from albert_tf.data import glue
    from albert_tf.tasks.classification import build_classifier

    config = tiny_config()
    processor = glue.get_processor("sst-2")
    data_dir = os.path.join(REPO, "data", "glue")
    train = processor.get_train_examples(data_dir)
    features = glue.features_from_texts(tokenizer, [e.text_a for e in train], None, 64)
    labels = np.array([processor.label_index(e.label) for e in train])
    keras.utils.set_random_seed(1)
    model = build_classifier(config, 2, dropout_prob=0.0)
    model.compile(optimizer=keras.optimizers.Adam(5e-3), metrics=["accuracy"])
    model.fit(dict(features), labels, batch_size=32, epochs=10, verbose=0)
    checkpoints.save_checkpoint(model, str(tmp_path / "cls" / "model"), fmt="native")
    common = dict(albert_config_file=write_config(config, tmp_path / "config.json"),
                  init_checkpoint=str(tmp_path / "cls"), spm_model_file=SPM, tflite_model="classifier",
                  max_seq_length=64, eval_task="sst-2", eval_data_dir=data_dir, log=lambda *_: None)

    fp32 = exports.export("tflite", str(tmp_path / "fp32"), **common)
    int8 = exports.export("tflite", str(tmp_path / "int8"), quantize="dynamic_int8", **common)
    print()
    for outcome in (fp32, int8):
        print(exports.describe(outcome))
    fp32_info, int8_info = fp32["tflite"], int8["tflite"]
    assert fp32_info.max_abs_diff["logits"] < 1e-4 and not fp32_info.select_tf_ops
    assert fp32["eval"]["argmax_agreement"] == 1.0 and fp32["eval"]["accuracy_change"] == 0.0
    assert fp32["eval"]["examples"] == 100
    assert int8_info.size_bytes < 0.4 * fp32_info.size_bytes
    assert int8["eval"]["argmax_agreement"] >= 0.9 and abs(int8["eval"]["accuracy_change"]) <= 0.05
    # the model learned a little (0.60 on dev here), so the predictions compared are not all one class
    assert int8["eval"]["reference_accuracy"] == fp32["eval"]["reference_accuracy"] > 0.5
    # the export directory: the flatbuffer, the tokenizer, and what was measured
    files = written_entries(int8["export_dir"])
    assert files == ["30k-clean.model", "model.tflite", "tflite_info.json"]
    with open(os.path.join(int8["export_dir"], "tflite_info.json"), encoding="utf-8") as f:
        info = json.load(f)
    assert info["quantize"] == "dynamic_int8" and info["input_shape"] == [-1, 64]
    assert info["eval"]["examples"] == 100 and info["size_bytes"] == int8_info.size_bytes

    # The flatbuffer answers any batch size and refuses another sequence length.
    lite = tflite.TFLiteModel(os.path.join(fp32["export_dir"], "model.tflite"))
    batch = {k: v[:3] for k, v in features.items()}
    answer = lite(**batch)
    assert_close(answer["logits"], model(batch).numpy(), atol=1e-4)
    probabilities = np.exp(answer["logits"]) / np.exp(answer["logits"]).sum(-1, keepdims=True)  # over the labels
    assert_close(answer["probabilities"], probabilities, atol=1e-6)
    with pytest.raises(ValueError, match="input 'input_ids' has shape"):
        lite(**{k: v[:, :32] for k, v in batch.items()})


@pytest.mark.slow
def test_squad_and_race_exports_serve_without_albert_tf(tmp_path):
    """The SQuAD (ids and text exports) and RACE exports of `export_model.py`: listed by saved_model_cli, answering
    in a fresh process. (The classifier export is checked in test_predict.py, with predict.py.)"""
    from albert_tf.model import AlbertForSquad
    from albert_tf.tasks.race import build_model as build_race

    config = tiny_config()
    squad = AlbertForSquad(config)
    squad(dummy_inputs(seq_length=4))
    race = build_race(config)
    for name, model in (("squad", squad), ("race", race)):
        checkpoints.save_checkpoint(model, str(tmp_path / name / "model"), fmt="native")
    common = dict(albert_config_file=write_config(config, tmp_path / "config.json"), spm_model_file=SPM,
                  log=lambda *_: None)
    squad_dirs = exports.export("squad", str(tmp_path / "export_squad"), init_checkpoint=str(tmp_path / "squad"),
                                  max_seq_length=48, max_query_length=16, **common)["dirs"]
    race_dir = exports.export("race", str(tmp_path / "export_race"), init_checkpoint=str(tmp_path / "race"),
                                **common)["export_dir"]

    show_pending = start_saved_model_cli_show([squad_dirs["ids"], squad_dirs["text"], race_dir])
    race_inputs = {k: {"dtype": "int32", "value": [[v[0]] * 4]} for k, v in COLUMNAR_BODY["inputs"].items()}
    calls = [{"dir": squad_dirs["ids"], "signature": "serving_default", "inputs": ids_inputs(COLUMNAR_BODY)},
             {"dir": squad_dirs["text"], "signature": "serving_default",
              "inputs": {"question": {"dtype": "string", "value": ["Where is it?"]},
                         "context": {"dtype": "string", "value": ["It is in Warsaw, the capital of Poland."]}}},
             {"dir": race_dir, "signature": "serving_default", "inputs": race_inputs}]
    by_ids, answer, choice = fresh_process(calls)
    shown = show_pending()
    ids = {name: ["DT_INT32", "(-1, -1)"] for name in ("input_ids", "input_mask", "segment_ids")}
    assert shown[squad_dirs["ids"]]["serving_default"]["inputs"] == ids
    assert sorted(shown[squad_dirs["ids"]]["serving_default"]["outputs"]) == ["end_logits", "start_logits"]
    assert sorted(shown[squad_dirs["text"]]["serving_default"]["inputs"]) == ["context", "question"]
    assert "answer_text" in shown[squad_dirs["text"]]["serving_default"]["outputs"]
    race_ids = {name: ["DT_INT32", "(-1, 4, -1)"] for name in ("input_ids", "input_mask", "segment_ids")}
    assert shown[race_dir]["serving_default"]["inputs"] == race_ids
    assert sorted(shown[race_dir]["serving_default"]["outputs"]) == ["answer", "logits", "prediction",
                                                                     "probabilities"]
    assert sorted(shown[race_dir]["text"]["inputs"]) == ["article", "options", "question"]
    features = {k: tf.constant(v, tf.int32) for k, v in COLUMNAR_BODY["inputs"].items()}
    expected = squad(features)
    race_features = {k: tf.constant(v["value"], tf.int32) for k, v in race_inputs.items()}
    for way in ("eager", "session"):
        assert_close(by_ids[way]["start_logits"], expected["start_logits"].numpy(), atol=1e-4)
        assert isinstance(answer[way]["answer_text"][0], str)
        assert_close(choice[way]["logits"], race(race_features).numpy(), atol=1e-4)
        assert choice[way]["answer"][0] in "ABCD"


@pytest.mark.slow
def test_input_checks_gate_only_the_ids(pretrained, tmp_path):
    """In the exported serving function the length and vocabulary asserts are control inputs of the ids'
    Identity alone: no constant or variable read of the model carries a control edge (as each would under a
    `tf.control_dependencies` around the model call), and the checks still refuse bad ids."""
    export_dir = encoder.export_encoder(pretrained["model"], str(tmp_path / "encoder"))
    loaded = tf.saved_model.load(export_dir)
    serve = loaded.serve
    (function,) = serve.concrete_functions
    operations = function.graph.get_operations()
    assert sum(op.type == "ReadVariableOp" for op in operations) > 10
    gated = [op for op in operations if op.control_inputs]
    assert [op.name for op in gated if op.type in ("ReadVariableOp", "MatMul", "BatchMatMulV2")] == []
    assert len(gated) < 20, sorted(op.type for op in gated)  # the checks' own ops, whatever the model's size
    assert any(op.type == "Identity" and op.inputs[0].op.type == "Placeholder" for op in gated)
    config = pretrained["config"]
    ids = tf.constant([[2, 5, 3]])
    assert serve(ids, tf.ones_like(ids), tf.zeros_like(ids))["sequence_output"].shape == (1, 3, config.hidden_size)
    with pytest.raises(tf.errors.InvalidArgumentError, match="outside the vocabulary"):
        serve(ids + config.vocab_size, tf.ones_like(ids), tf.zeros_like(ids))
    long_ids = tf.ones((1, config.max_position_embeddings + 1), tf.int32)
    with pytest.raises(tf.errors.InvalidArgumentError, match="exceeds max_position_embeddings"):
        serve(long_ids, long_ids, tf.zeros_like(long_ids))


def test_base_encoder_stores_shared_weights_once(tmp_path):
    """A base-shape (12 layers, one shared block) encoder export holds ~4 bytes per parameter: ~45 MB."""
    from albert_tf.model import AlbertModel

    config = AlbertConfig.preset("base_v2")
    model = AlbertModel(config)
    model(dummy_inputs(), training=False)
    export_dir = encoder.export_encoder(model, str(tmp_path / "base"))
    sizes = savedmodel.saved_model_size(export_dir)
    parameters = config.num_parameters()
    assert parameters == sum(int(np.prod(w.shape)) for w in model.weights)
    assert 44e6 < 4 * parameters < 48e6
    assert 4 * parameters <= sizes["variables"] <= 4 * parameters * 1.01 + 64 * 1024, (sizes, parameters)
    assert sizes["total"] < 4 * parameters * 1.05


# ------------------------------------------------------------------------------------------------------------------
# Bad input.

def run_cli(*args, timeout=600):
    return subprocess.run([sys.executable, os.path.join(REPO, "export_model.py"), *args], capture_output=True,
                          text=True, env=ENV, timeout=timeout, cwd=REPO)


@pytest.mark.slow
def test_cli_refuses_unknown_type_and_non_empty_dir(tmp_path):
    done = run_cli("--export_type=onnx", f"--export_dir={tmp_path / 'x'}")
    assert done.returncode != 0
    assert done.returncode == 2 and done.stderr.strip().endswith(
        "--export_type=onnx: must be one of " + ", ".join(EXPORT_TYPES)), done.stderr[-2000:]
    done = run_cli(f"--export_dir={tmp_path / 'x'}")
    assert done.returncode == 2 and done.stderr.strip().endswith("--export_type is required"), done.stderr[-2000:]
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    done = run_cli("--export_type=preprocessing", f"--export_dir={tmp_path / 'full'}", f"--spm_model_file={SPM}")
    assert done.returncode == 1 and "albert_tf did not write there (keep.txt)" in done.stderr
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"
    done = run_cli("--export_type=preprocessing", f"--export_dir={tmp_path / 'x'}", f"--spm_model_file={SPM}")
    assert done.returncode == 0, done.stderr[-2000:]
    done = run_cli("--export_type=preprocessing", f"--export_dir={tmp_path / 'x'}", f"--spm_model_file={SPM}")
    assert done.returncode == 1 and "exists and is not empty; pass --overwrite" in done.stderr
    # The library's entry point holds a request built in code to the flags' rules, with the script's message.
    with pytest.raises(UsageError, match="^--export_type=onnx: must be one of encoder, preprocessing"):
        exports.export("onnx", str(tmp_path / "y"))
    with pytest.raises(UsageError, match="^--tflite_model=bert: must be one of encoder, classifier, squad, race$"):
        exports.export("tflite", str(tmp_path / "y"), tflite_model="bert")
    with pytest.raises(UsageError, match="^--export_dir is required$"):
        exports.export("encoder", "")
    with pytest.raises(fileio.OutputError, match="exists and is not empty; pass --overwrite"):
        exports.export("encoder", str(tmp_path / "full"))
    with pytest.raises(savedmodel.ExportError, match="exists and is not empty"):
        encoder.export_preprocessing(str(tmp_path / "full"), spm_model_file=SPM)


def test_mismatched_checkpoint_and_other_bad_input(pretrained, tmp_path):
    quiet = {"log": lambda *_: None}
    # a checkpoint of another shape: the CheckpointError names the variable
    other = write_config(tiny_config(hidden_size=48, num_attention_heads=4), tmp_path / "other.json")
    with pytest.raises(checkpoints.CheckpointError, match="shape mismatch"):
        exports.export("encoder", str(tmp_path / "a"), albert_config_file=other,
                         init_checkpoint=pretrained["checkpoint"], **quiet)
    assert not os.path.exists(tmp_path / "a")
    # a checkpoint without the task's head
    with pytest.raises(savedmodel.ExportError, match="has no classifier head"):
        exports.export("classifier", str(tmp_path / "b"), albert_config_file=pretrained["config_file"],
                         init_checkpoint=pretrained["checkpoint"], spm_model_file=SPM, **quiet)
    with pytest.raises(checkpoints.CheckpointError):
        exports.export("encoder", str(tmp_path / "c"), albert_config_file=pretrained["config_file"],
                         init_checkpoint=str(tmp_path / "nowhere"), **quiet)
    # lengths over max_position_embeddings (128)
    with pytest.raises(UsageError, match="exceeds max_position_embeddings 128"):
        exports.export("preprocessing", str(tmp_path / "d"), albert_config_file=pretrained["config_file"],
                         spm_model_file=SPM, max_seq_length=256, **quiet)
    with pytest.raises(savedmodel.ExportError, match="seq_length 200 exceeds max_position_embeddings 128"):
        tflite.export_tflite(pretrained["model"], str(tmp_path / "e.tflite"), seq_length=200)
    with pytest.raises(savedmodel.ExportError, match="unknown quantize mode 'int4'"):
        tflite.export_tflite(pretrained["model"], str(tmp_path / "f.tflite"), quantize="int4")
    with pytest.raises(UsageError, match="--albert_config_file is required"):
        exports.export("encoder", str(tmp_path / "g"), init_checkpoint=pretrained["checkpoint"], **quiet)
    with pytest.raises(savedmodel.ExportError, match="needs the tokenizer"):
        exports.export("preprocessing", str(tmp_path / "h"), **quiet)
    with pytest.raises(tokenization.TokenizerError):
        exports.export("preprocessing", str(tmp_path / "i"), spm_model_file=str(tmp_path / "missing.model"),
                         **quiet)
