"""TFLite conversion is builtin ops only unless asked: a model with an op TFLite has no builtin for (tf.Cumprod)
is refused naming the op, through the library, `exports.export` and `export_model.py`; with
`allow_select_tf_ops` / `--allow_select_tf_ops` it converts with SELECT_TF_OPS, says so, and runs."""

import json
import os

import pytest
import tensorflow as tf

from albert_tf.serving import tflite
from albert_tf.serving.savedmodel import ExportError
from albert_tf.tasks import exports
from tests.helpers import flag_args, log_tail, run_script

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
def test_a_non_builtin_op_is_refused_by_name_and_converted_only_on_request(cumprod_saved_model, tmp_path):
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


def test_ops_not_builtin_reads_the_converters_message():
    message = ("<unknown>:0: error: loc(...): 'tf.Cumprod' op is neither a custom op nor a flex op\n"
               "error: 'tf.Lgamma' op is neither a custom op nor a flex op\n"
               "error: 'tf.Cumprod' op is neither a custom op nor a flex op")
    assert tflite.ops_not_builtin(RuntimeError(message)) == ["tf.Cumprod", "tf.Lgamma"]
    assert tflite.ops_not_builtin(RuntimeError("something else went wrong")) == []


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
