"""SavedModel exports that TF Serving (and plain `tensorflow` + `tensorflow_text`) can run without this code.

`export_encoder` writes a TF-Hub-style encoder:
  * `serving_default`: int32 `input_ids`, `input_mask`, `segment_ids` [batch, seq] (any seq up to
    max_position_embeddings) -> `sequence_output` [batch, seq, H], `pooled_output` [batch, H];
  * `mlm` (pretraining models): the same plus `masked_lm_positions` [batch, P] -> `mlm_logits` [batch, P, V];
  * `sop` (pretraining models): -> `sop_log_probs` [batch, 2];
  * `tokenization_info` (when a tokenizer file is given): the tokenizer file, attached as an asset, and
    `do_lower_case`, so the tokenizer can be rebuilt from the export alone.

Exports are written to a temporary directory beside the target and renamed into place when complete.
"""

import os
import shutil
import tempfile

import tensorflow as tf


class ExportError(ValueError):
    """The export cannot be written as asked (existing directory, bad model); the message says why."""


def _ids_spec(name):
    return tf.TensorSpec([None, None], tf.int32, name=name)


def prepare_export_dir(export_dir, overwrite):
    """Checks `export_dir` and returns a fresh temporary directory beside it to write into."""
    export_dir = os.path.abspath(export_dir)
    if os.path.exists(export_dir) and os.listdir(export_dir) and not overwrite:
        raise ExportError(f"export directory {export_dir} exists and is not empty; pass --overwrite to replace it")
    parent = os.path.dirname(export_dir)
    os.makedirs(parent, exist_ok=True)
    return tempfile.mkdtemp(prefix=f".{os.path.basename(export_dir)}.tmp-", dir=parent)


def publish(tmp_dir, export_dir):
    """Moves a completed export from `tmp_dir` to `export_dir`, replacing what was there."""
    export_dir = os.path.abspath(export_dir)
    if os.path.exists(export_dir):
        old = export_dir + ".old"
        shutil.rmtree(old, ignore_errors=True)
        os.replace(export_dir, old)
        os.replace(tmp_dir, export_dir)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp_dir, export_dir)
    return export_dir


def save_module(module, export_dir, signatures, overwrite=False):
    """`tf.saved_model.save` of `module` into `export_dir`, atomically."""
    tmp_dir = prepare_export_dir(export_dir, overwrite)
    try:
        tf.saved_model.save(module, tmp_dir, signatures=signatures)
        return publish(tmp_dir, export_dir)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise


def attach_tokenizer(module, tokenizer_file, do_lower_case):
    """Adds the tokenizer file as an asset and a `tokenization_info` function returning its path and
    `do_lower_case` (the original hub module's signature)."""
    module.tokenizer_asset = tf.saved_model.Asset(tokenizer_file)
    module.do_lower_case = tf.Variable(bool(do_lower_case), trainable=False, name="do_lower_case")

    @tf.function(input_signature=[])
    def tokenization_info():
        return {"vocab_file": module.tokenizer_asset.asset_path, "do_lower_case": module.do_lower_case}

    module.tokenization_info = tokenization_info
    return tokenization_info


def export_encoder(model, export_dir, tokenizer_file=None, do_lower_case=True, overwrite=False):
    """Exports an `AlbertModel` or `AlbertForPretraining` (see module docstring); returns the directory."""
    encoder = getattr(model, "albert", model)
    module = tf.Module()
    module.model = model
    max_positions = encoder.config.max_position_embeddings

    def check(input_ids):
        return tf.debugging.assert_less_equal(
            tf.shape(input_ids)[1], max_positions,
            message=f"sequence length exceeds max_position_embeddings ({max_positions})")

    @tf.function(input_signature=[_ids_spec("input_ids"), _ids_spec("input_mask"), _ids_spec("segment_ids")])
    def serve(input_ids, input_mask, segment_ids):
        with tf.control_dependencies([check(input_ids)]):
            outputs = encoder({"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids},
                              training=False)
        return {"sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
                "pooled_output": tf.cast(outputs["pooled_output"], tf.float32)}

    module.serve = serve
    signatures = {"serving_default": serve}
    if hasattr(model, "masked_lm"):
        @tf.function(input_signature=[_ids_spec("input_ids"), _ids_spec("input_mask"), _ids_spec("segment_ids"),
                                      _ids_spec("masked_lm_positions")])
        def mlm(input_ids, input_mask, segment_ids, masked_lm_positions):
            with tf.control_dependencies([check(input_ids)]):
                outputs = model({"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
                                 "masked_lm_positions": masked_lm_positions}, training=False)
            return {"mlm_logits": outputs["mlm_logits"]}

        @tf.function(input_signature=[_ids_spec("input_ids"), _ids_spec("input_mask"), _ids_spec("segment_ids")])
        def sop(input_ids, input_mask, segment_ids):
            with tf.control_dependencies([check(input_ids)]):
                outputs = encoder({"input_ids": input_ids, "input_mask": input_mask,
                                   "segment_ids": segment_ids}, training=False)
            logits = tf.cast(model.seq_relationship(outputs["pooled_output"]), tf.float32)
            return {"sop_log_probs": tf.nn.log_softmax(logits, axis=-1)}

        module.mlm, module.sop = mlm, sop
        signatures.update(mlm=mlm, sop=sop)
    if tokenizer_file:
        signatures["tokenization_info"] = attach_tokenizer(module, tokenizer_file, do_lower_case)
    return save_module(module, export_dir, signatures, overwrite=overwrite)
