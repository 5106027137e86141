"""The SQuAD SavedModels: `ids/` (the heads on id inputs) and `text/` (question and context strings in, the
best answer span out), both loadable with `tensorflow` + `tensorflow_text` only."""

import os

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.model import dummy_inputs
from albert_tf.model.squad import NEG_INF, default_p_mask
from albert_tf.serving.savedmodel import attach_tokenizer, save_module
from albert_tf.text.preprocessor import AlbertTextPreprocessor, TextPreprocessorModule


def _best_span(start_scores, end_scores, valid_start, valid_end, max_answer_length):
    """Best (start, end, score) per row over start <= end < start + max_answer_length, both valid."""
    seq_len = tf.shape(start_scores)[1]
    scores = start_scores[:, :, None] + end_scores[:, None, :]
    pos = tf.range(seq_len)
    length = pos[None, :] - pos[:, None]
    allowed = (length >= 0) & (length < max_answer_length)
    allowed = allowed[None] & valid_start[:, :, None] & valid_end[:, None, :]
    scores = tf.where(allowed, scores, tf.fill(tf.shape(scores), tf.constant(-NEG_INF, scores.dtype)))
    flat = tf.reshape(scores, tf.stack([tf.shape(scores)[0], -1]))
    best = tf.argmax(flat, axis=-1, output_type=tf.int32)
    return best // seq_len, best % seq_len, tf.reduce_max(flat, axis=-1)


def _target(export_dir, kind, version):
    return os.path.join(export_dir, kind, str(version)) if version is not None else os.path.join(export_dir, kind)


def export_squad_model(model, export_dir, spm_model_file=None, do_lower_case=True, max_seq_length=384,
                       max_query_length=64, max_answer_length=30, null_score_diff_threshold=None, overwrite=True,
                       version=None):
    """Writes the SavedModels of a SQuAD model; returns {"ids": dir, "text": dir (with a tokenizer)}.

    With `version` (a training run's global step) they go to `<export_dir>/ids/<version>` and
    `<export_dir>/text/<version>`, the layout TF Serving watches.

    `<export_dir>/ids` — `serving_default`: int32 `input_ids`, `input_mask`, `segment_ids` [batch, seq] (the
    feature layout `[CLS] question [SEP] context [SEP]`) -> v1.1: `start_logits`, `end_logits` [batch, seq];
    v2.0: `start_log_probs` [batch, seq], `start_top_log_probs`/`start_top_index`, `end_top_log_probs`/
    `end_top_index`, `cls_logits` [batch] (p_mask derived from the layout).

    `<export_dir>/text` (with `spm_model_file`) — `serving_default`: strings `question`, `context` [batch] ->
    the outputs above for the first window (question cut to `max_query_length` pieces, context to what fits in
    `max_seq_length`) plus `input_ids`, `segment_ids`, `answer_start`/`answer_end` (positions of the best valid
    span), `answer_score`, and `answer_text`: the span's pieces decoded (normalised text, i.e. lowercased and
    without accents when do_lower_case; exact context characters need the Python features). v2.0 also returns
    `is_impossible` (cls_logits > the null threshold; the threshold is the `null_score_diff_threshold` variable,
    0.0 if none was given). Both load with `tensorflow` + `tensorflow_text` only.
    """
    if not model.weights:
        model(dummy_inputs(seq_length=4), training=False)  # build the weights outside the traced functions
    version_2 = model.version_2
    max_positions = model.config.max_position_embeddings
    dirs = {}

    def heads(input_ids, input_mask, segment_ids):
        check = tf.debugging.assert_less_equal(tf.shape(input_ids)[1], max_positions,
                                               message=f"sequence longer than {max_positions} positions")
        with tf.control_dependencies([check]):
            outputs = model({"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids},
                            training=False)
        return {k: tf.identity(v) for k, v in outputs.items()}

    ids_spec = [tf.TensorSpec([None, None], tf.int32, name=n) for n in ("input_ids", "input_mask", "segment_ids")]
    module = tf.Module()
    module.model = model
    module.serve = tf.function(heads, input_signature=ids_spec)
    module.version_2 = tf.Variable(version_2, trainable=False, name="version_2")
    signatures = {"serving_default": module.serve}
    if spm_model_file:
        signatures["tokenization_info"] = attach_tokenizer(module, spm_model_file, do_lower_case)
    dirs["ids"] = save_module(module, _target(export_dir, "ids", version), signatures, overwrite=overwrite)
    if not spm_model_file:
        return dirs

    text = tf.Module()
    text.model = model
    # The tokenizer module creates its lookup tables now, so the SavedModel tracks them.
    text.tokenizer = TextPreprocessorModule(AlbertTextPreprocessor(
        spm_model_file=spm_model_file, do_lower_case=do_lower_case, max_seq_length=max_seq_length))
    with tf.io.gfile.GFile(spm_model_file, "rb") as f:
        text.detokenizer = tf_text.FastSentencepieceTokenizer(f.read())
    text.threshold = tf.Variable(0.0 if null_score_diff_threshold is None else float(null_score_diff_threshold),
                                 trainable=False, name="null_score_diff_threshold")
    text.max_answer_length = tf.Variable(max_answer_length, trainable=False, name="max_answer_length")

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="question"),
                                  tf.TensorSpec([None], tf.string, name="context")])
    def answer(question, context):
        batch_size = tf.shape(question, out_type=tf.int64)[0]
        ids = text.tokenizer.tokenize_to_ids(tf.concat([question, context], axis=0))
        question_ids = ids[:batch_size][:, :max_query_length]
        context_ids = ids[batch_size:]
        room = max_seq_length - 3 - question_ids.row_lengths()
        keep = tf.ragged.range(context_ids.row_lengths()) < tf.expand_dims(room, 1)
        context_ids = tf.ragged.boolean_mask(context_ids, keep)
        packed = text.tokenizer.preprocessor.pack(question_ids, context_ids)
        outputs = heads(packed["input_ids"], packed["input_mask"], packed["segment_ids"])
        p_mask = default_p_mask(packed["input_mask"], packed["segment_ids"])
        valid = tf.equal(p_mask, 0) & (tf.range(tf.shape(p_mask)[1])[None, :] > 0)
        if not version_2:
            start, end, score = _best_span(outputs["start_logits"], outputs["end_logits"], valid, valid,
                                           text.max_answer_length)
        else:
            k_start = tf.shape(outputs["start_top_index"])[1]
            k_end = tf.shape(outputs["end_top_index"])[1] // k_start
            starts = tf.repeat(outputs["start_top_index"], k_end, axis=1)
            ends = outputs["end_top_index"]
            scores = tf.repeat(outputs["start_top_log_probs"], k_end, axis=1) + outputs["end_top_log_probs"]
            ok = (tf.gather(valid, starts, batch_dims=1) & tf.gather(valid, ends, batch_dims=1) & (ends >= starts)
                  & (ends - starts < text.max_answer_length))
            scores = tf.where(ok, scores, -NEG_INF)
            best = tf.argmax(scores, axis=1, output_type=tf.int32)
            start = tf.gather(starts, best, batch_dims=1)
            end = tf.gather(ends, best, batch_dims=1)
            score = tf.reduce_max(scores, axis=1)
            outputs["is_impossible"] = outputs["cls_logits"] > text.threshold
        positions = tf.range(tf.shape(packed["input_ids"])[1])[None, :]
        in_span = (positions >= start[:, None]) & (positions <= end[:, None])
        span_ids = tf.ragged.boolean_mask(packed["input_ids"], in_span)
        answer_text = text.detokenizer.detokenize(span_ids)
        outputs.update(input_ids=packed["input_ids"], segment_ids=packed["segment_ids"], answer_start=start,
                       answer_end=end, answer_score=score, answer_text=answer_text)
        return outputs

    text.answer = answer
    text_signatures = {"serving_default": answer,
                       "tokenization_info": attach_tokenizer(text, spm_model_file, do_lower_case)}
    dirs["text"] = save_module(text, _target(export_dir, "text", version), text_signatures, overwrite=overwrite)
    return dirs
