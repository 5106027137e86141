"""`export_model.py --export_type=tfhub` / `tfhub_preprocessing`: SavedModels with TF Model Garden's TF-Hub interface.

One program written against Model Garden's `albert_en_base/3` and `albert_en_preprocess/3` calling conventions
(`PROGRAM`: plain tensorflow + tensorflow_text in a fresh process, no albert_tf) runs on Model Garden's own exports
(tests/fixtures/model_garden/) and on ours, made from Model Garden's checkpoint of the same weights: ours give Model
Garden's recorded numbers (within 1e-5; the preprocessing ids exactly), the same names, shapes and structure, and
answer through TF Serving's session loader; the export loads back bit for bit."""

import json
import os
import re
import subprocess
import sys
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import checkpoints
from albert_tf.checkpoints import load_checkpoint
from albert_tf.config import AlbertConfig
from albert_tf.errors import UsageError
from albert_tf.model import AlbertForPretraining, AlbertModel, dummy_inputs
from albert_tf.serving import tfhub
from albert_tf.serving.savedmodel import ExportError
from albert_tf.tasks import exports
from tests.helpers import REPO, SPM, log_tail, randomize, run_script

ATOL = 1e-5
VOCAB_ZH = os.path.join(REPO, "data", "vocab_chinese.txt")

# Runs in a fresh interpreter with only tensorflow and tensorflow_text: the calls a program written against
# albert_en_base/3 and albert_en_preprocess/3 makes. Writes each model's answers to an .npz.
PROGRAM = r"""
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the preprocessing model's ops)

spec = json.loads(sys.stdin.read())
recorded = np.load(spec["inputs"]) if spec["inputs"] else None
answers = {}

def put(prefix, outputs):
    for key, value in outputs.items():
        if isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                answers[f"{prefix}.{key}_{i}"] = np.asarray(v)
        else:
            answers[f"{prefix}.{key}"] = np.asarray(value)

for name, path in spec["encoders"].items():
    encoder = tf.saved_model.load(path)
    inputs = {k: tf.constant(recorded["inputs." + k]) for k in ("input_word_ids", "input_mask", "input_type_ids")}
    put(name, encoder(inputs))
    put(name + ".training_false", encoder(inputs, training=False))
    put(name + ".positional", encoder(inputs, False, None))
    put(name + ".numpy_inputs", encoder({k: v.numpy() for k, v in inputs.items()}))
    put(name + ".signature", encoder.signatures["serving_default"](**inputs))
    if hasattr(encoder, "mlm"):
        mlm_inputs = dict(inputs, masked_lm_positions=tf.constant(recorded["inputs.masked_lm_positions"]))
        put(name + ".mlm", encoder.mlm(mlm_inputs, training=False))
    described = {
        "variables": [[v.name, v.shape.as_list()] for v in encoder.variables],
        "trainable_variables": [v.name for v in encoder.trainable_variables],
        "mlm_variables": [v.name for v in encoder.mlm.variables] if hasattr(encoder, "mlm") else None,
        "mlm_trainable_variables": [v.name for v in getattr(encoder.mlm, "trainable_variables", ())]
                                   if hasattr(encoder, "mlm") else None,
        "sp_model_file": encoder.sp_model_file.asset_path.numpy().decode().rsplit("/", 1)[-1]
                         if hasattr(encoder, "sp_model_file") else None,
        "call_outputs": sorted(encoder(inputs)),
        "signature_inputs": sorted(encoder.signatures["serving_default"].structured_input_signature[1]),
    }
    answers[name + ".described"] = np.asarray(json.dumps(described))
    # TF Serving (and saved_model_cli run) load with the TF1 session loader.
    session = tf.compat.v1.Session(graph=tf.Graph())
    with session.graph.as_default():
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
    sig = meta.signature_def["serving_default"]
    fetched = session.run({k: t.name for k, t in sig.outputs.items()},
                          {sig.inputs[k].name: recorded["inputs." + k] for k in sig.inputs})
    put(name + ".session", fetched)

for name, path in spec["preprocessors"].items():
    sentences = spec["sentences"]
    preprocess = tf.saved_model.load(path)
    a = preprocess.tokenize(tf.constant(sentences["a"]))
    b = preprocess.tokenize(tf.constant(sentences["b"]))
    for key, tokens in (("tokenize", a), ("tokenize_b", b)):
        answers[f"{name}.{key}.flat_values"] = tokens.flat_values.numpy()
        for i, splits in enumerate(tokens.nested_row_splits):
            answers[f"{name}.{key}.row_splits_{i}"] = splits.numpy()
    put(name + ".special_tokens", preprocess.tokenize.get_special_tokens_dict())
    put(name + ".pack_single", preprocess.bert_pack_inputs([a], seq_length=tf.constant(16)))
    put(name + ".pack_pair", preprocess.bert_pack_inputs([a, b], seq_length=tf.constant(16)))
    put(name + ".pack_pair_default_len", preprocess.bert_pack_inputs([a, b]))
    # bert_pack_inputs takes [batch, (pieces)] and [batch, (words), (pieces)] alike: the other ragged rank of each
    # segment (each piece its own word, or the words' pieces merged) packs to the same ids
    def other_rank(tokens):
        if tokens.ragged_rank == 2:
            return tokens.merge_dims(1, 2)
        pieces = tf.range(tf.size(tokens.flat_values, out_type=tokens.row_splits.dtype) + 1)
        return tf.RaggedTensor.from_row_splits(tf.RaggedTensor.from_row_splits(tokens.flat_values, pieces),
                                               tokens.row_splits)
    put(name + ".pack_single_other_rank", preprocess.bert_pack_inputs([other_rank(a)], seq_length=tf.constant(16)))
    put(name + ".pack_pair_other_rank", preprocess.bert_pack_inputs([other_rank(a), other_rank(b)],
                                                                     seq_length=tf.constant(16)))
    put(name + ".default", preprocess(tf.constant(sentences["a"])))
    put(name + ".signature", preprocess.signatures["serving_default"](sentences=tf.constant(sentences["a"])))

np.savez(spec["out"], **answers)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "albert_tf")))
"""


def run_program(tmp_path, encoders=None, preprocessors=None, sentences=None, inputs=None):
    out = str(tmp_path / "answers.npz")
    spec = {"encoders": encoders or {}, "preprocessors": preprocessors or {}, "sentences": sentences,
            "inputs": inputs, "out": out}
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": "", "CUDA_VISIBLE_DEVICES": "-1"}
    done = subprocess.run([sys.executable, "-c", PROGRAM], input=json.dumps(spec), capture_output=True, text=True,
                          env=env, timeout=600, cwd="/", check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []  # nothing of albert_tf was imported
    return dict(np.load(out))


def _config(mg_fixtures, **overrides):
    return AlbertConfig(**{**AlbertConfig.from_json_file(mg_fixtures["config"]).to_dict(), **overrides})


@pytest.fixture(scope="module")
def our_hub(mg_fixtures, tmp_path_factory):
    """Our `tfhub` export of Model Garden's pretrainer checkpoint, made by export_model.py."""
    export_dir = str(tmp_path_factory.mktemp("tfhub") / "hub")
    result = run_script("export_model.py", ["--export_type=tfhub", f"--init_checkpoint={mg_fixtures['tf2_pretrainer']}",
                                            f"--albert_config_file={mg_fixtures['config']}",
                                            f"--spm_model_file={mg_fixtures['spm']}", f"--export_dir={export_dir}"])
    assert result.returncode == 0, log_tail(result)
    return export_dir


@pytest.mark.slow
def test_tfhub_export_answers_model_gardens_calling_convention(mg_fixtures, our_hub, tmp_path):
    answers = run_program(tmp_path, encoders={"ours": our_hub, "mg": mg_fixtures["hub_encoder"]},
                          inputs=mg_fixtures["outputs"])
    recorded = np.load(mg_fixtures["outputs"])
    ours = json.loads(str(answers["ours.described"]))
    theirs = json.loads(str(answers["mg.described"]))
    assert ours == {**theirs, "sp_model_file": "spm-1k.model"} and theirs["sp_model_file"] == "spm-1k.model"
    assert len(ours["variables"]) == 25 and len(ours["mlm_variables"]) == len(ours["mlm_trainable_variables"]) == 30
    assert ours["call_outputs"] == ["default", "encoder_outputs", "pooled_output", "sequence_output"]
    keys = ["sequence_output", "pooled_output", "default", "encoder_outputs_0", "encoder_outputs_1"]
    for call in ("", ".training_false", ".positional", ".numpy_inputs"):
        for key in keys:
            np.testing.assert_allclose(answers[f"ours{call}.{key}"], recorded[f"hub_encoder.{key}"], atol=ATOL,
                                       err_msg=call + key)
    np.testing.assert_allclose(answers["ours.mlm.mlm_logits"], recorded["hub_encoder.mlm.mlm_logits"], atol=ATOL)
    assert sorted(k for k in answers if k.startswith("ours.mlm.")) == sorted(
        k.replace("mg.", "ours.", 1) for k in answers if k.startswith("mg.mlm."))
    # serving_default: Model Garden's output names, eager and through the session loader, same values as theirs.
    for way in ("signature", "session"):
        names = sorted(k for k in answers if k.startswith(f"mg.{way}."))
        assert sorted(k for k in answers if k.startswith(f"ours.{way}.")) == [n.replace("mg.", "ours.", 1)
                                                                               for n in names]
        assert len(names) == 5
        for name in names:
            np.testing.assert_allclose(answers[name.replace("mg.", "ours.", 1)], answers[name], atol=ATOL,
                                       err_msg=name)


@pytest.mark.slow
def test_tfhub_export_loads_back_exactly(mg_fixtures, our_hub):
    assert checkpoints.detect_format(our_hub) == "model_garden"
    arrays = checkpoints.read_arrays(our_hub, "model_garden", None, config=_config(mg_fixtures))
    source = checkpoints.read_arrays(mg_fixtures["tf2_pretrainer"], "model_garden", None)
    assert sorted(arrays) == sorted(source) and len(arrays) == 30
    for name, value in source.items():
        np.testing.assert_array_equal(arrays[name], value, err_msg=name)
    # Self-describing: the config is an asset, so no flag is needed to convert or export it again.
    from albert_tf.checkpoints import conversion  # pylint: disable=import-outside-toplevel

    assert conversion.resolve_config(our_hub)[0] == _config(mg_fixtures)


@pytest.mark.slow
def test_encoder_only_export_has_no_mlm_and_dropout_follows_training(tmp_path):
    config = AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
                          intermediate_size=32, max_position_embeddings=12, hidden_dropout_prob=0.3,
                          attention_probs_dropout_prob=0.3)
    model = AlbertModel(config)
    model(dummy_inputs(), training=False)
    randomize(model, seed=3)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n")
    export_dir = tfhub.export_tfhub(model, str(tmp_path / "hub"), vocab_file=str(vocab), do_lower_case=False)
    loaded = tf.saved_model.load(export_dir)
    assert not hasattr(loaded, "mlm") and not hasattr(loaded, "sp_model_file")
    assert loaded.vocab_file.asset_path.numpy().decode().endswith("vocab.txt") and not loaded.do_lower_case.numpy()
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 50, (2, 9)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    hub_inputs = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}
    expected = model({"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}, training=False)
    outputs = loaded(hub_inputs)
    np.testing.assert_allclose(outputs["sequence_output"], expected["sequence_output"], atol=ATOL)
    assert len(outputs["encoder_outputs"]) == 3
    served = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in hub_inputs.items()})
    for i, want in enumerate(tf.nest.flatten(outputs)):  # the signature serves in inference mode too
        np.testing.assert_allclose(served["albert_encoder" if i == 0 else f"albert_encoder_{i}"], want, atol=ATOL)
    for got, want in zip(outputs["encoder_outputs"], expected["encoder_outputs"]):
        np.testing.assert_allclose(got, want, atol=ATOL)
    first, second = (loaded(hub_inputs, training=True)["sequence_output"].numpy() for _ in range(2))
    assert not np.allclose(first, second)  # dropout on, and its seed moves on between calls
    assert not np.allclose(first, outputs["sequence_output"])
    with pytest.raises(tf.errors.InvalidArgumentError, match="exceeds max_position_embeddings"):
        loaded({k: np.tile(v, (1, 2)) for k, v in hub_inputs.items()})
    assert loaded.trainable_variables and all(v.dtype.is_floating for v in loaded.trainable_variables)  # weights
    with pytest.raises(ExportError, match="exists"):  # no overwrite unless asked
        tfhub.export_tfhub(model, export_dir, vocab_file=str(vocab))
    fresh = AlbertModel(config)  # not built yet: the export builds it
    defaults = tf.saved_model.load(tfhub.export_tfhub(fresh, str(tmp_path / "defaults"), vocab_file=str(vocab)))
    assert defaults.do_lower_case.numpy() and not defaults.do_lower_case.trainable  # a setting, not a weight
    np.testing.assert_allclose(defaults(hub_inputs)["pooled_output"], fresh(
        {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}, training=False)["pooled_output"],
        atol=ATOL)


@pytest.mark.slow
def test_tfhub_preprocessing_matches_model_garden(mg_fixtures, tmp_path):
    outcome = exports.export("tfhub_preprocessing", str(tmp_path / "pre"), spm_model_file=SPM, log=lambda *_: None)
    recorded = np.load(mg_fixtures["preprocess_outputs"])
    sentences = {"a": recorded["sentences"].tolist(), "b": recorded["sentences_b"].tolist()}
    answers = run_program(tmp_path, preprocessors={"ours": outcome["export_dir"], "mg": mg_fixtures["hub_preprocess"]},
                          sentences=sentences)
    ours = {k[len("ours."):]: v for k, v in answers.items() if k.startswith("ours.")}
    theirs = {k[len("mg."):]: v for k, v in answers.items() if k.startswith("mg.")}
    assert sorted(ours) == sorted(theirs)
    for key, value in ours.items():  # the same ids as Model Garden's model, live and as recorded
        np.testing.assert_array_equal(value, theirs[key], err_msg=key)
        if key in recorded:
            np.testing.assert_array_equal(value, recorded[key], err_msg=key)
    assert sum(key in recorded for key in ours) == len(recorded) - 2  # all but the sentences themselves
    for key in [k for k in ours if "_other_rank." in k]:  # the other ragged rank packs alike
        np.testing.assert_array_equal(ours[key], ours[key.replace("_other_rank.", ".")], err_msg=key)
    # serving_default names its outputs as Model Garden's: bert_pack_inputs{,_1,_2} = mask, type ids, word ids
    np.testing.assert_array_equal(ours["signature.bert_pack_inputs"], recorded["default.input_mask"])
    np.testing.assert_array_equal(ours["signature.bert_pack_inputs_1"], recorded["default.input_type_ids"])
    np.testing.assert_array_equal(ours["signature.bert_pack_inputs_2"], recorded["default.input_word_ids"])


@pytest.mark.slow
def test_wordpiece_preprocessing_gives_the_vocabularys_ids(tmp_path):
    from albert_tf.text.tokenization import FullTokenizer  # pylint: disable=import-outside-toplevel

    export_dir = tfhub.export_tfhub_preprocessing(str(tmp_path / "pre"), vocab_file=VOCAB_ZH, seq_length=12)
    preprocess = tf.saved_model.load(export_dir)
    texts = ["今天天气很好", "我们 的 模型"]
    tokens = preprocess.tokenize(tf.constant(texts))
    assert tokens.ragged_rank == 2  # [batch, (words), (pieces)], as Model Garden's BERT tokenizer layer
    python = FullTokenizer(vocab_file=VOCAB_ZH, do_lower_case=True)
    for row, text in zip(tokens.merge_dims(1, 2).to_list(), texts):
        assert row == python.convert_tokens_to_ids(python.tokenize(text))
    packed = preprocess(tf.constant(texts))
    special = {k: int(v) for k, v in preprocess.tokenize.get_special_tokens_dict().items()}
    assert packed["input_word_ids"].shape == (2, 12)
    assert packed["input_word_ids"][0, 0] == special["start_of_sequence_id"] == python.vocab["[CLS]"]
    assert special["padding_id"] == python.vocab["[PAD]"] and special["vocab_size"] == len(python.vocab)


def test_export_types_and_refusals(mg_fixtures, tmp_path):
    # export_model.py checks --export_type against this tuple (albert_tf.tasks.export_request, its one source).
    assert {"tfhub", "tfhub_preprocessing"} <= set(exports.EXPORT_TYPES)
    quiet = {"log": lambda *_: None}
    # Model Garden's checkpoints carry no config: the error says where one must be.
    with pytest.raises(UsageError, match="--albert_config_file is required.*albert_config.json beside it"):
        exports.export("tfhub", str(tmp_path / "a"), init_checkpoint=mg_fixtures["tf2_encoder"],
                       spm_model_file=mg_fixtures["spm"], **quiet)
    with pytest.raises(ExportError, match="needs the tokenizer"):
        exports.export("tfhub", str(tmp_path / "b"), init_checkpoint=mg_fixtures["tf2_encoder"],
                       albert_config_file=mg_fixtures["config"], **quiet)
    with pytest.raises(ExportError, match="needs the tokenizer"):
        exports.export("tfhub_preprocessing", str(tmp_path / "c"), **quiet)
    grouped = AlbertForPretraining(_config(mg_fixtures, num_hidden_groups=2))
    grouped(dummy_inputs(num_predictions=1), training=False)
    with pytest.raises(ExportError, match="one shared Transformer block.*num_hidden_groups 2"):
        tfhub.export_tfhub(grouped, str(tmp_path / "d"), spm_model_file=mg_fixtures["spm"])
    assert not any(os.path.exists(tmp_path / d) for d in "abcd")
    # An encoder-only checkpoint exports without .mlm; the model is chosen by what the checkpoint holds.
    model, result = exports.build_pretraining_or_encoder(_config(mg_fixtures), mg_fixtures["tf2_encoder"])
    assert isinstance(model, AlbertModel) and not result.missing
    model, result = exports.build_pretraining_or_encoder(_config(mg_fixtures), mg_fixtures["hub_encoder"])
    assert isinstance(model, AlbertForPretraining) and len(result.missing) == 2
    assert load_checkpoint(AlbertModel(_config(mg_fixtures)), mg_fixtures["hub_encoder"]).unused == [
        "cls/predictions/output_bias", "cls/predictions/transform/LayerNorm/beta",
        "cls/predictions/transform/LayerNorm/gamma", "cls/predictions/transform/dense/bias",
        "cls/predictions/transform/dense/kernel"]


def test_a_vocabulary_without_a_special_token_is_refused_by_its_name(tmp_path):
    """[CLS], [SEP] and [PAD] must be in a WordPiece vocabulary ([MASK] may be missing); the error names the token
    that is not."""
    def vocab(name, *tokens):
        path = tmp_path / f"{name}.txt"
        path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
        return str(path)

    tokenizer = tfhub._Tokenizer  # pylint: disable=protected-access
    full = tokenizer(None, vocab("full", "[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello"), True)
    assert full.specials == {"vocab_size": 5, "padding_id": 0, "start_of_sequence_id": 2, "end_of_segment_id": 3}
    for missing, key in (("[PAD]", "padding_id"), ("[CLS]", "start_of_sequence_id"),
                         ("[SEP]", "end_of_segment_id")):
        tokens = [t for t in ("[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]", "hello") if t != missing]
        path = vocab(key, *tokens)
        with pytest.raises(ExportError, match=f"^{re.escape(path)} has no {re.escape(missing)} token \\({key}\\)$"):
            tokenizer(None, path, True)


def test_each_wordpiece_tokenizer_reads_its_own_vocabulary(tmp_path, monkeypatch):
    """TensorFlow names a vocabulary file's table after its Asset object's address, which a later tokenizer in the
    same process can get again, and tables of one name are one table: that later tokenizer read the earlier
    vocabulary. Here every Asset prints the same address, so each tokenizer must have its own table regardless."""
    monkeypatch.setattr(tf.saved_model.Asset, "__repr__", lambda self: "<Asset object at 0x1>")
    expected = {}
    for name, tokens in (("a", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello"]),
                         ("b", ["[UNK]", "[PAD]", "[SEP]", "[CLS]", "world", "more"])):
        (tmp_path / f"{name}.txt").write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
        expected[str(tmp_path / f"{name}.txt")] = (len(tokens), tokens.index("[CLS]"))
    for path, (size, cls_id) in expected.items():
        specials = tfhub._Tokenizer(None, path, True).specials  # pylint: disable=protected-access
        assert (specials["vocab_size"], specials["start_of_sequence_id"]) == (size, cls_id), path


@pytest.mark.slow
def test_the_preprocessing_export_takes_sequences_of_three_or_more(tmp_path):
    """[CLS], at least one piece, [SEP]: a shorter seq_length is refused before anything is written; and the
    export's defaults."""
    with pytest.raises(ExportError, match=r"^seq_length 2 leaves no room for text between \[CLS\] and \[SEP\]$"):
        tfhub.export_tfhub_preprocessing(str(tmp_path / "two"), spm_model_file=SPM, seq_length=2)
    assert not (tmp_path / "two").exists()
    preprocess = tf.saved_model.load(tfhub.export_tfhub_preprocessing(str(tmp_path / "three"), spm_model_file=SPM,
                                                                      seq_length=3))
    texts = tf.constant(["hello world"])
    special = {k: int(v) for k, v in preprocess.tokenize.get_special_tokens_dict().items()}
    first = int(preprocess.tokenize(texts).flat_values[0])
    assert preprocess(texts)["input_word_ids"].numpy().tolist() == [
        [special["start_of_sequence_id"], first, special["end_of_segment_id"]]]
    # The defaults: lowercased text in rows of 128 (Model Garden's albert_en_preprocess), no overwrite.
    defaults = tfhub.export_tfhub_preprocessing(str(tmp_path / "defaults"), spm_model_file=SPM)
    packed = tf.saved_model.load(defaults)(tf.constant(["Hello World", "hello world"]))["input_word_ids"].numpy()
    assert packed.shape == (2, 128) and (packed[0] == packed[1]).all()
    with pytest.raises(ExportError, match="exists"):
        tfhub.export_tfhub_preprocessing(defaults, spm_model_file=SPM)


def test_the_preprocessing_tokenizer_and_packing_without_an_export():
    """Model Garden's preprocessing, in-process: SentencePiece on the NFD text without its combining marks,
    case-folded; the special tokens' ids; and `pack_segments`: [CLS] a [SEP] (b [SEP]), the segments trimmed in
    turn to fit, padded, word segments merged."""
    import sentencepiece  # pylint: disable=import-outside-toplevel
    import unicodedata  # pylint: disable=import-outside-toplevel

    sp = sentencepiece.SentencePieceProcessor(model_file=SPM)
    texts = ["Crème BRÛLÉE for Señor Ødegaard", "the end"]
    for lower in (True, False):
        tokenizer = tfhub._Tokenizer(SPM, None, do_lower_case=lower)  # pylint: disable=protected-access
        marks_dropped = ["".join(c for c in unicodedata.normalize("NFD", t) if unicodedata.category(c) != "Mn")
                         for t in texts]
        expected = [sp.encode(t.casefold() if lower else t) for t in marks_dropped]
        assert tokenizer(tf.constant(texts)).to_list() == expected
    assert tokenizer.specials == {"vocab_size": sp.get_piece_size(), "start_of_sequence_id": sp.piece_to_id("[CLS]"),
                                  "end_of_segment_id": sp.piece_to_id("[SEP]"), "padding_id": sp.piece_to_id("<pad>"),
                                  "mask_id": sp.piece_to_id("[MASK]")}

    specials = {"start_of_sequence_id": 2, "end_of_segment_id": 3, "padding_id": 0}
    a = tf.ragged.constant([[10, 11, 12, 13, 14], [20]], tf.int32)
    b = tf.ragged.constant([[30, 31, 32], [40, 41]], tf.int32)
    one = tfhub.pack_segments(a, 6, specials)
    assert one["input_word_ids"].numpy().tolist() == [[2, 10, 11, 12, 13, 3], [2, 20, 3, 0, 0, 0]]
    assert one["input_mask"].numpy().tolist() == [[1] * 6, [1, 1, 1, 0, 0, 0]]
    assert one["input_type_ids"].numpy().tolist() == [[0] * 6, [0] * 6]
    two = tfhub.pack_segments([a, b], 8, specials)
    assert two["input_word_ids"].numpy().tolist() == [[2, 10, 11, 12, 3, 30, 31, 3], [2, 20, 3, 40, 41, 3, 0, 0]]
    assert two["input_type_ids"].numpy().tolist() == [[0] * 5 + [1] * 3, [0, 0, 0, 1, 1, 1, 0, 0]]
    assert two["input_mask"].numpy().tolist() == [[1] * 8, [1] * 6 + [0, 0]]
    words = tf.ragged.constant([[[10, 11], [12]], [[20]]], tf.int32)
    assert tfhub.pack_segments([words], 5, specials)["input_word_ids"].numpy().tolist() == \
        [[2, 10, 11, 12, 3], [2, 20, 3, 0, 0]]
    # word segments are trimmed by pieces, in turn: 3 places give a 2 pieces and b 1, each closed by [SEP]
    words_a = tf.ragged.constant([[[10, 11], [12], [13, 14, 15]], [[20]]], tf.int32)
    words_b = tf.ragged.constant([[[30], [31, 32]], [[40, 41]]], tf.int32)
    assert tfhub.pack_segments([words_a, words_b], 6, specials)["input_word_ids"].numpy().tolist() == \
        [[2, 10, 11, 3, 30, 3], [2, 20, 3, 40, 41, 3]]


def test_a_weight_without_a_place_in_model_gardens_albert_is_refused():
    """Each weight of a part run on Model Garden's variables must have its TF1 entry and that entry's variable."""
    layer = keras.layers.Dense(2, name="extra")
    layer.build((None, 3))
    with pytest.raises(ExportError, match=r"^weight extra/kernel has no place in Model Garden's ALBERT$"):
        tfhub._StatelessPart(layer, [], {})  # pylint: disable=protected-access
    entries = [types.SimpleNamespace(variable=v, name=f"w{i}") for i, v in enumerate(layer.trainable_variables)]
    variables = {"w0": tf.Variable(tf.ones([3, 2])), "w1": tf.Variable(tf.ones([2]))}
    with pytest.raises(ExportError, match=r"^weight extra/bias has no place"):
        tfhub._StatelessPart(layer, entries, {"w0": variables["w0"]})  # pylint: disable=protected-access
    part = tfhub._StatelessPart(layer, entries, variables)  # pylint: disable=protected-access
    assert part(tf.ones([1, 3])).numpy().tolist() == [[4.0, 4.0]]
