"""TFLite conversion is builtin ops only unless asked: a model with an op TFLite has no builtin for (tf.Cumprod)
is refused naming the op, through the library, `exports.export` and `export_model.py`; with
`allow_select_tf_ops` / `--allow_select_tf_ops` it converts with SELECT_TF_OPS, says so, and runs."""

import json
import os
import pathlib
import re
import shutil
import tempfile
import types
import warnings

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.model import AlbertForPretraining, AlbertModel
from albert_tf.model.squad import AlbertForSquad
from albert_tf.serving import encoder, race, tflite
from albert_tf.serving.savedmodel import ExportError
from albert_tf.tasks import exports
from albert_tf.tasks.race import build_model as build_race_model
from tests.helpers import flag_args, log_tail, run_script, tiny_config

SEQ = 8


class _CumprodModel(tf.Module):
    """An id-input model whose output needs tf.Cumprod (TFLite has builtins for cumsum, not for cumprod)."""

    @tf.function(input_signature=[tf.TensorSpec([None, SEQ], tf.int32, name=n)
                                  for n in ("input_ids", "input_mask", "segment_ids")])
    def serve(self, input_ids, input_mask, segment_ids):
        x = tf.cast(input_ids % 3 + 1, tf.float32) * tf.cast(input_mask, tf.float32)
        return {"logits": tf.math.cumprod(x, axis=-1)[:, -2:] + tf.cast(segment_ids[:, :2], tf.float32)}


@pytest.fixture(scope="module")
def cumprod_saved_model(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("cumprod") / "saved_model")
    module = _CumprodModel()
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
    return path


@pytest.mark.slow
def test_a_non_builtin_op_is_refused_by_name_and_converted_only_on_request(cumprod_saved_model, tmp_path,
                                                                          monkeypatch):
    target = tmp_path / "model.tflite"
    with pytest.raises(ExportError, match=r"not TFLite builtins: tf\.Cumprod; pass --allow_select_tf_ops"):
        tflite.export_tflite(cumprod_saved_model, str(target), seq_length=SEQ)
    assert not target.exists()

    info = tflite.export_tflite(cumprod_saved_model, str(target), seq_length=SEQ, allow_select_tf_ops=True)
    assert info.select_tf_ops and "uses SELECT_TF_OPS" in info.summary()
    assert b"FlexCumprod" in target.read_bytes()  # the TensorFlow op, kept for the Flex delegate
    if info.unverified:  # TensorFlow's pip interpreter has no Flex delegate: the export says so, it still exists
        assert "Flex delegate" in info.summary() and info.max_abs_diff is None
    else:
        assert info.max_abs_diff["logits"] < 1e-5
    # Only a missing Flex delegate leaves a SELECT_TF_OPS model unverified; any other failure to run it is raised.
    def failing(message):
        def call(self, **inputs):
            raise RuntimeError(message)
        return call

    monkeypatch.setattr(tflite.TFLiteModel, "__call__", failing("Select TensorFlow op(s) need the Flex delegate"))
    again = tflite.export_tflite(cumprod_saved_model, str(target), seq_length=SEQ, allow_select_tf_ops=True,
                                 overwrite=True)
    assert again.unverified and again.max_abs_diff is None
    with pytest.raises(RuntimeError, match="Flex delegate"):  # a builtin-only model needs no delegate
        tflite.export_tflite(AlbertModel(tiny_config()), str(tmp_path / "builtin.tflite"), seq_length=SEQ)
    monkeypatch.setattr(tflite.TFLiteModel, "__call__", failing("tensor allocation failed"))
    with pytest.raises(RuntimeError, match="^tensor allocation failed$"):
        tflite.export_tflite(cumprod_saved_model, str(target), seq_length=SEQ, allow_select_tf_ops=True,
                             overwrite=True)


def test_ops_not_builtin_reads_the_converters_message():
    message = ("<unknown>:0: error: loc(...): 'tf.Cumprod' op is neither a custom op nor a flex op\n"
               "error: 'tf.Lgamma' op is neither a custom op nor a flex op\n"
               "error: 'tf.Cumprod' op is neither a custom op nor a flex op")
    assert tflite.ops_not_builtin(RuntimeError(message)) == ["tf.Cumprod", "tf.Lgamma"]
    assert tflite.ops_not_builtin(RuntimeError("something else went wrong")) == []
    # The converter's structured errors, when it gives them: only the ops it could not express, by name.
    structured = RuntimeError("conversion failed")
    structured.errors = [
        types.SimpleNamespace(operator=types.SimpleNamespace(name=name), error_message=text) for name, text in (
            ("tf.Cumprod", "'tf.Cumprod' op is neither a custom op nor a flex op"),
            ("tf.Add", "failed to legalize an unrelated attribute"),
            ("", "'' op is neither a custom op nor a flex op"),
            ("tf.Lgamma", "error: 'tf.Lgamma' op is neither a custom op nor a flex op"))]
    assert tflite.ops_not_builtin(structured) == ["tf.Cumprod", "tf.Lgamma"]


@pytest.mark.slow
def test_export_refuses_or_records_select_tf_ops(cumprod_saved_model, tmp_path):
    refused = tmp_path / "refused"
    with pytest.raises(ExportError, match=r"tf\.Cumprod"):
        exports.export("tflite", str(refused), source_saved_model=cumprod_saved_model, max_seq_length=SEQ,
                       log=lambda _: None)
    assert not refused.exists()
    outcome = exports.export("tflite", str(tmp_path / "flex"), source_saved_model=cumprod_saved_model,
                             max_seq_length=SEQ, allow_select_tf_ops=True, log=lambda _: None)
    with open(os.path.join(outcome["export_dir"], "tflite_info.json"), encoding="utf-8") as f:
        assert json.load(f)["select_tf_ops"] is True


@pytest.mark.slow
def test_export_model_script_flag(cumprod_saved_model, tmp_path):
    common = dict(export_type="tflite", source_saved_model=cumprod_saved_model, max_seq_length=SEQ)
    refused = run_script("export_model.py", flag_args(export_dir=str(tmp_path / "refused"), **common))
    assert refused.returncode == 1, log_tail(refused)
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("export_model.py: error: ") and "tf.Cumprod" in last and "--allow_select_tf_ops" in last
    assert not (tmp_path / "refused").exists()
    done = run_script("export_model.py", flag_args(export_dir=str(tmp_path / "flex"), allow_select_tf_ops=True,
                                                    **common))
    assert done.returncode == 0, log_tail(done)
    assert "uses SELECT_TF_OPS" in done.stdout and (tmp_path / "flex" / "model.tflite").exists()


def test_sample_inputs_have_a_full_row_varied_lengths_and_both_segments():
    for shape, vocab in (((6, 12), 50), ((3, 4, 12), None)):
        features = tflite.sample_id_inputs(shape, vocab_size=vocab, seed=1)
        ids, mask, segments = (features[k] for k in ("input_ids", "input_mask", "segment_ids"))
        assert ids.shape == mask.shape == segments.shape == shape and ids.dtype == np.int32
        lengths = mask.sum(-1)
        assert lengths.flat[0] == 12 and lengths.min() >= 4 and len(set(lengths.flat)) > 1
        assert (mask == (np.arange(12) < lengths[..., None])).all()  # real tokens first, then padding
        assert (ids[..., 0] == 2).all() and (ids[mask == 0] == 0).all()
        real = ids[(mask == 1) & (np.arange(12) > 0)]
        assert real.min() >= 5 and real.max() < (vocab or 1000)
        assert (segments == ((np.arange(12) >= lengths[..., None] // 2) & (mask == 1))).all()
        again = tflite.sample_id_inputs(shape, vocab_size=vocab, seed=1)
        assert all((again[k] == features[k]).all() for k in features)
    lengths = tflite.sample_id_inputs((300, 12), seed=3)["input_mask"].sum(-1)
    assert lengths.min() == 4 and (lengths[1:] == 12).any()  # a third of the sequence up to all of it
    assert (tflite.sample_id_inputs((6, 12), seed=2)["input_ids"] != tflite.sample_id_inputs((6, 12), seed=1)[
        "input_ids"]).any()
    # Real ids span every ordinary piece: from 5 (after <pad>, <unk>, [CLS], [SEP], [MASK]) up to the vocabulary
    # (1000 when none is given, at most 30000); the shortest row of a short sequence still holds [CLS] and a piece.
    for vocab, top in ((None, 999), (40000, 29999)):
        features = tflite.sample_id_inputs((3000, 128), vocab_size=vocab)
        real = features["input_ids"][:, 1:][features["input_mask"][:, 1:] == 1]
        assert real.min() == 5 and real.max() == top
    assert tflite.sample_id_inputs((300, 4))["input_mask"].sum(-1).min() == 2
    odd = tflite.sample_id_inputs((300, 5))  # the second segment starts at half the real length, rounded down
    half = odd["input_mask"].sum(-1, keepdims=True) // 2
    assert (odd["segment_ids"] == ((np.arange(5) >= half) & (odd["input_mask"] == 1))).all()


def test_compare_outputs_batch_by_batch():
    logits = np.array([[0.0, 1.0], [2.0, 0.0], [0.0, 3.0], [1.0, 0.0], [0.5, 0.4]], np.float32)
    shifted = logits + np.array([[0, 0], [0, 0], [0, 0], [0, 2], [0, 0.25]], np.float32)  # rows 3, 4 flip
    seen = []

    def reference(**inputs):
        assert all(isinstance(v, tf.Tensor) and v.dtype == tf.int32 for v in inputs.values())
        rows = inputs["input_ids"].numpy()[:, 0]
        seen.append(len(rows))
        return {"logits": logits[rows], "score": logits[rows, 0]}

    def candidate(**inputs):
        return {"logits": shifted[inputs["input_ids"][:, 0]], "score": shifted[inputs["input_ids"][:, 0], 0]}

    features = {name: np.arange(5)[:, None].repeat(3, 1) for name in ("input_ids", "input_mask", "segment_ids")}
    result = tflite.compare_outputs(reference, candidate, features, labels=[1, 0, 1, 1, 1], batch_size=2)
    assert seen == [2, 2, 1]
    assert result == {"examples": 5, "output": "logits", "max_abs_diff": 2.0, "argmax_agreement": 0.6,
                      "reference_accuracy": 0.6, "candidate_accuracy": 1.0, "accuracy_change": 0.4}
    assert tflite.compare_outputs(reference, candidate, features, output="score") == \
        {"examples": 5, "output": "score", "max_abs_diff": 0.0}


def test_conversion_tries_builtin_ops_first_and_names_a_failure_by_its_first_line():
    class _Converter:
        """Answers each convert() with the next outcome, recording the ops sets it was asked for."""

        def __init__(self, *outcomes):
            self.target_spec = types.SimpleNamespace(supported_ops=None)
            self.outcomes, self.tried = list(outcomes), []

        def convert(self):
            self.tried.append(list(self.target_spec.supported_ops))
            outcome = self.outcomes.pop(0)
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

    convert = tflite._convert  # pylint: disable=protected-access
    builtins, select = tf.lite.OpsSet.TFLITE_BUILTINS, tf.lite.OpsSet.SELECT_TF_OPS
    converter = _Converter(b"builtin")
    assert convert(converter, True) == (b"builtin", False) and converter.tried == [[builtins]]
    flex = RuntimeError("error: 'tf.Cumprod' op is neither a custom op nor a flex op")
    converter = _Converter(flex, b"flex")
    assert convert(converter, True) == (b"flex", True) and converter.tried == [[builtins], [builtins, select]]
    with pytest.raises(ExportError, match=r"not TFLite builtins: tf.Cumprod; pass --allow_select_tf_ops"):
        convert(_Converter(flex), False)
    for error, first in ((RuntimeError("\n  \n  the first line \nthe second"), "the first line"),
                         (ValueError(), "ValueError"), (RuntimeError("x" * 600), "x" * 500)):
        with pytest.raises(ExportError, match=f"^TFLite conversion failed: {first}$"):
            convert(_Converter(error), True)


def test_an_export_summary_says_what_was_written():
    info = tflite.TFLiteExport(path="m.tflite", size_bytes=2_345_678, quantize="dynamic_int8", seq_length=8,
                               input_shape=(-1, 8), outputs=("logits", "probabilities"),
                               max_abs_diff={"probabilities": 0.00123, "logits": 0.5}, select_tf_ops=True,
                               unverified="no delegate")
    assert info.summary().splitlines() == [
        "TFLite dynamic_int8 (dynamic-range int8 weights): m.tflite", "  size: 2.35 MB",
        "  inputs: input_ids, input_mask, segment_ids int32 [-1, 8] (-1 = any batch size)",
        "  outputs: logits, probabilities", "  uses SELECT_TF_OPS (needs the TensorFlow-ops delegate)",
        "  max abs diff vs the source model: logits 0.5, probabilities 0.00123", "  not verified: no delegate"]
    plain = tflite.TFLiteExport(path="m.tflite", size_bytes=10**6, quantize=None, seq_length=8, input_shape=(-1, 8),
                                outputs=("logits",))
    assert plain.summary().splitlines()[0] == "TFLite float32: m.tflite" and len(plain.summary().splitlines()) == 4


def test_a_tflite_model_runs_any_batch_and_names_a_wrong_input():
    class _Sum(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, SEQ], tf.int32, name=n)
                                      for n in ("input_ids", "input_mask", "segment_ids")])
        def serve(self, input_ids, input_mask, segment_ids):
            return {"logits": tf.cast(input_ids * input_mask + segment_ids, tf.float32)[:, :2]}

    module = _Sum()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([module.serve.get_concrete_function()], module)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = tflite.TFLiteModel(converter.convert())
    assert not caught  # tf.lite.Interpreter's notice of its move to LiteRT is not passed on
    assert model.input_shapes == {name: (-1, SEQ) for name in ("input_ids", "input_mask", "segment_ids")}
    assert model.output_names == ("logits",)
    ids = np.arange(3 * SEQ, dtype=np.int64).reshape(3, SEQ)  # int64 taken as the signature's int32
    out = model(input_ids=ids, input_mask=np.ones_like(ids), segment_ids=np.ones_like(ids))
    np.testing.assert_array_equal(out["logits"], ids[:, :2] + 1)
    assert model(input_ids=ids[:1], input_mask=ids[:1], segment_ids=ids[:1])["logits"].shape == (1, 2)
    with pytest.raises(ValueError, match=r"^TFLite model inputs are input_ids, input_mask, segment_ids; missing: "
                                         r"segment_ids, unknown: token_type_ids$"):
        model(input_ids=ids, input_mask=ids, token_type_ids=ids)
    with pytest.raises(ValueError, match=r"; missing: segment_ids, unknown: none$"):
        model(input_ids=ids, input_mask=ids)
    with pytest.raises(ValueError, match=r"; missing: none, unknown: token_type_ids$"):
        model(input_ids=ids, input_mask=ids, segment_ids=ids, token_type_ids=ids)
    with pytest.raises(ValueError, match=r"^input 'input_mask' has shape \[3, 4\]; the TFLite model takes \[-1, 8\]"):
        model(input_ids=ids, input_mask=ids[:, :4], segment_ids=ids)
    with pytest.raises(ValueError, match=r"input 'input_ids' has shape \[24\]"):
        model(input_ids=ids.reshape(-1), input_mask=ids, segment_ids=ids)


def test_the_interpreter_gets_num_threads_only_when_given(monkeypatch):
    made = []

    class _Recording(tf.lite.Interpreter):
        def __init__(self, **kwargs):
            made.append(sorted(k for k in kwargs if k != "model_content") + [kwargs.get("num_threads")])
            super().__init__(**kwargs)

    module = _CumprodModel()
    content = tf.lite.TFLiteConverter.from_concrete_functions([module.serve.get_concrete_function()], module)
    content.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS, tf.lite.OpsSet.SELECT_TF_OPS]
    content = content.convert()
    monkeypatch.setattr(tf.lite, "Interpreter", _Recording)
    tflite.TFLiteModel(content)
    tflite.TFLiteModel(content, num_threads=2)
    assert made == [[None], ["num_threads", 2]]


def test_a_damaged_saved_model_is_named_not_a_traceback(cumprod_saved_model, tmp_path):
    damaged = tmp_path / "damaged"
    shutil.copytree(cumprod_saved_model, damaged)
    (damaged / "saved_model.pb").write_bytes((damaged / "saved_model.pb").read_bytes()[:50])
    with pytest.raises(ExportError, match=rf"^the SavedModel in {damaged} cannot be loaded \(truncated or "
                                          r"damaged\?\): \S"):
        tflite.export_tflite(str(damaged), str(tmp_path / "model.tflite"), seq_length=SEQ)
    assert not (tmp_path / "model.tflite").exists()


@pytest.mark.parametrize("model_class, seq_length", [(AlbertModel, SEQ), (AlbertForPretraining, None)])
def test_an_encoder_or_pretraining_model_not_yet_built_exports_its_encoders_outputs(tmp_path, model_class,
                                                                                    seq_length):
    """A Keras model fresh from its constructor (no weights yet): built by the export; a pretraining model gives
    its encoder's outputs, not its heads'. Without seq_length the inputs take 128 positions (export_model.py's
    default too)."""
    model = model_class(tiny_config(hidden_dropout_prob=0.5))  # the export runs it in inference mode
    length = {"seq_length": seq_length} if seq_length else {}
    result = tflite.export_tflite(model, str(tmp_path / "model.tflite"), **length)
    seq_length = seq_length or 128
    assert result.outputs == ("pooled_output", "sequence_output") and result.input_shape == (-1, seq_length)
    ids = np.random.default_rng(0).integers(5, 100, (2, seq_length)).astype(np.int32)
    features = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    encoder = getattr(model, "albert", model)
    expected = encoder(features, training=False)
    served = tflite.TFLiteModel(result.path)(**features)
    for name in result.outputs:
        np.testing.assert_allclose(served[name], expected[name].numpy(), atol=1e-4)


@pytest.mark.slow
def test_the_tflite_file_and_its_sequence_length_are_checked_before_converting(tmp_path, monkeypatch):
    """A bare file name is written in the working folder; an existing file is replaced only with overwrite, a
    folder never; the length is from 2 ([CLS] and [SEP]) to max_position_embeddings."""
    model = AlbertModel(tiny_config(max_position_embeddings=16))
    monkeypatch.chdir(tmp_path)
    written = os.path.join(os.getcwd(), "model.tflite")
    assert tflite.export_tflite(model, "model.tflite", seq_length=SEQ, verify=False).path == written
    with open(written, "rb") as f:
        flatbuffer = f.read()
    with pytest.raises(ExportError, match=f"^{re.escape(written)} exists; pass --overwrite to replace it$"):
        tflite.export_tflite(model, "model.tflite", seq_length=SEQ)
    with open(written, "wb") as f:
        f.write(b"an older export")
    tflite.export_tflite(model, pathlib.Path("model.tflite"), seq_length=SEQ, overwrite=True, verify=False)
    with open(written, "rb") as f:
        assert f.read() == flatbuffer
    with pytest.raises(ExportError, match=f"^{re.escape(os.getcwd())} is a directory; give the .tflite file"):
        tflite.export_tflite(model, ".", seq_length=SEQ)
    with pytest.raises(ExportError, match="^seq_length must be at least 2, got 1$"):  # [CLS] and [SEP] at least
        tflite.export_tflite(model, "short.tflite", seq_length=1)
    assert tflite.export_tflite(model, "short.tflite", seq_length=2).input_shape == (-1, 2)
    assert tflite.export_tflite(model, "long.tflite", seq_length=16).input_shape == (-1, 16)
    with pytest.raises(ExportError, match="^seq_length 17 exceeds max_position_embeddings 16$"):
        tflite.export_tflite(model, "longer.tflite", seq_length=17)


@pytest.mark.slow
def test_the_export_makes_the_files_folder_and_leaves_no_work_folder(tmp_path, monkeypatch):
    """The conversion's SavedModel is written to a temporary folder, removed after a success and after a failure."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    os.makedirs(tempfile.tempdir)
    model = AlbertModel(tiny_config())
    path = tmp_path / "new" / "folder" / "model.tflite"
    assert tflite.export_tflite(model, str(path), seq_length=SEQ).path == str(path) and path.is_file()
    monkeypatch.setattr(tflite, "_convert", lambda *_: (_ for _ in ()).throw(ExportError("refused")))
    with pytest.raises(ExportError, match="^refused$"):
        tflite.export_tflite(model, str(tmp_path / "other.tflite"), seq_length=SEQ)
    assert not [name for name in os.listdir(tempfile.tempdir) if not name.startswith("__autograph_generated")]
    assert not (tmp_path / "other.tflite").exists()


@pytest.mark.slow
def test_a_saved_model_is_tried_at_the_length_before_converting(tmp_path):
    """A SavedModel carries no config: its own length check, run once at seq_length, refuses a length it cannot
    take, and nothing is written."""
    saved = encoder.export_encoder(AlbertModel(tiny_config(max_position_embeddings=16)), str(tmp_path / "encoder"))
    with pytest.raises(ExportError, match=r"^the SavedModel does not take seq_length 17: sequence length exceeds "
                                          r"max_position_embeddings \(16\)$"):
        tflite.export_tflite(saved, str(tmp_path / "long.tflite"), seq_length=17)
    assert not (tmp_path / "long.tflite").exists()
    assert tflite.export_tflite(saved, str(tmp_path / "fits.tflite"), seq_length=16).input_shape == (-1, 16)


@pytest.mark.slow
def test_a_race_saved_model_converts_with_its_choices_and_an_unknown_dimension_is_refused(tmp_path):
    """A RACE export's ids take [batch, 4 choices, seq]: the TFLite model keeps the choices; its length check
    refuses a length past max_position_embeddings. A SavedModel whose middle dimension is free cannot be fixed."""
    saved = race.export_race_model(build_race_model(tiny_config(max_position_embeddings=16)), str(tmp_path / "race"))
    lite = tflite.export_tflite(saved, str(tmp_path / "race.tflite"), seq_length=16)
    assert lite.input_shape == (-1, 4, 16) and max(lite.max_abs_diff.values()) < 1e-4
    with pytest.raises(ExportError, match=r"^the SavedModel does not take seq_length 17: sequence length exceeds "
                                          r"max_position_embeddings \(16\)$"):
        tflite.export_tflite(saved, str(tmp_path / "long.tflite"), seq_length=17)

    class _Free(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, None, None], tf.int32, name=n) for n in
                                      ("input_ids", "input_mask", "segment_ids")])
        def serve(self, input_ids, input_mask, segment_ids):
            return {"logits": tf.cast(tf.reduce_sum(input_ids * input_mask + segment_ids, -1), tf.float32)}

    free = _Free()
    tf.saved_model.save(free, str(tmp_path / "free"), signatures={"serving_default": free.serve})
    with pytest.raises(ExportError, match=r"input_ids have shape \(None, None, None\); TFLite export needs every "
                                          r"dimension but the batch and the sequence fixed$"):
        tflite.export_tflite(str(tmp_path / "free"), str(tmp_path / "free.tflite"), seq_length=8)


def test_a_squad_v2_model_exports_its_heads_with_the_beams_indices_as_integers(tmp_path):
    model = AlbertForSquad(tiny_config(hidden_dropout_prob=0.5), version_2=True, start_n_top=2, end_n_top=2)
    result = tflite.export_tflite(model, str(tmp_path / "squad.tflite"), seq_length=SEQ)
    ids = np.random.default_rng(1).integers(5, 100, (2, SEQ)).astype(np.int32)
    segments = np.array([[0] * 3 + [1] * (SEQ - 3)] * 2, np.int32)
    features = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": segments}
    expected = {k: v.numpy() for k, v in model(features, training=False).items()}
    served = tflite.TFLiteModel(result.path)(**features)
    assert sorted(served) == sorted(expected) == sorted(result.outputs)
    for name, value in expected.items():
        assert served[name].dtype == value.dtype, name  # float32 scores, int32 indices
        np.testing.assert_allclose(served[name], value, atol=1e-4, err_msg=name)
