"""The SQuAD SavedModels: `ids/` (the heads on id inputs) and `text/` (question and context strings in, the
best answer span out), both loadable with `tensorflow` + `tensorflow_text` only.

The text signature reads the whole context, as `run_squad.py` does: the context pieces are cut into windows of
at most `max_seq_length - len(question) - 3` pieces, each starting `doc_stride` pieces after the previous one
(`albert_tf.data.squad.doc_spans_for`); every window of every question in the request runs through the model in
one batch, and the answer is picked across windows as `albert_tf.evaluation.squad_postprocessing` does:

* a span must start and end on context pieces of its window, end no earlier than it starts, be at most
  `max_answer_length` pieces long, and start on a piece whose max-context window is this one (the first window
  with the largest min(left, right) context + 0.01 x window length, computed in float64 as in Python);
* v1.1: the candidates of a window are its `n_best_size` best starts x `n_best_size` best ends (over all
  `max_seq_length` positions, padding included, as the original), scored start + end logit;
  v2.0: the model's beam (`start_n_top` starts x `end_n_top` ends), scored start + end log-prob, and the null
  score of a question is its lowest `cls_logits` over windows;
* the best-scoring candidate over all windows wins (ties: the first window, then the first candidate, as the
  Python ranking's stable sort); scores are added in float64 as in Python.
"""

import os

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.checkpoints import ensure_built
from albert_tf.errors import UsageError
from albert_tf.model.squad import NEG_INF
from albert_tf.serving.savedmodel import attach_tokenizer, checked_ids, save_module
from albert_tf.serving.text_module import TextPreprocessorModule
from albert_tf.text.preprocessor import AlbertTextPreprocessor


def _target(export_dir, kind, version):
    return os.path.join(export_dir, kind, str(version)) if version is not None else os.path.join(export_dir, kind)


def context_windows(question_ids, context_ids, max_seq_length, doc_stride):
    """The windows of each question as `data.squad.convert_examples_to_features` cuts them.

    Args:
      question_ids, context_ids: ragged int [B, (pieces)] (the question already cut to max_query_length).
      max_seq_length, doc_stride: as the features' flags (int or int64 scalar tensors).
    Returns a dict: `example` [N] (the question of each of the N windows), `index` [N] (the window's number within
    its question), `start`, `length` [N] (its first context piece and its number of pieces), `num_windows` [B]
    (at least 1: an empty context gets one window without context pieces), `question` and `context`: ragged
    int [N, (pieces)] (the question's ids and the window's context ids).
    """
    room = tf.cast(max_seq_length, tf.int64) - 3 - question_ids.row_lengths()  # max_tokens_for_doc
    stride = tf.minimum(tf.cast(doc_stride, tf.int64), room)  # a window shorter than doc_stride moves by its length
    total = context_ids.row_lengths()
    num_windows = 1 + (tf.maximum(total - room, 0) + stride - 1) // stride
    index = tf.ragged.range(num_windows)
    example = index.value_rowids()
    index = index.flat_values
    start = index * tf.gather(stride, example)
    length = tf.minimum(tf.gather(total, example) - start, tf.gather(room, example))
    first = tf.gather(context_ids.row_starts(), example) + start
    context = tf.gather(context_ids.flat_values, tf.ragged.range(first, first + length))
    return {"example": example, "index": index, "start": start, "length": length, "num_windows": num_windows,
            "question": tf.gather(question_ids, example), "context": context}


def max_context_mask(windows, doc_offset, seq_length):
    """bool [N, seq_length]: position p of window w holds a context piece whose max-context window is w (as
    `data.squad.max_context_owners`: the first window with the highest min(left, right) + 0.01 x length)."""
    example, start, length = windows["example"], windows["start"], windows["length"]
    nrows = tf.shape(windows["num_windows"], out_type=tf.int64)[0]
    starts = tf.RaggedTensor.from_value_rowids(start, example, nrows).to_tensor(0)  # [B, W]
    lengths = tf.RaggedTensor.from_value_rowids(length, example, nrows).to_tensor(0)
    starts, lengths = tf.gather(starts, example)[:, :, None], tf.gather(lengths, example)[:, :, None]  # [N, W, 1]
    piece = start[:, None] + tf.range(seq_length, dtype=tf.int64)[None, :] - doc_offset[:, None]  # [N, T]
    piece = piece[:, None, :]
    ends = starts + lengths - 1
    covered = (piece >= starts) & (piece <= ends)
    score = tf.cast(tf.minimum(piece - starts, ends - piece), tf.float64) \
        + tf.constant(0.01, tf.float64) * tf.cast(lengths, tf.float64)
    score = tf.where(covered, score, tf.constant(-float("inf"), tf.float64))
    best = tf.reduce_max(score, axis=1, keepdims=True)
    num = tf.shape(starts, out_type=tf.int64)[1]
    candidates = tf.range(num, dtype=tf.int64)[None, :, None]
    owner = tf.reduce_min(tf.where(covered & (score == best), candidates, num), axis=1)  # [N, T]
    return owner == windows["index"][:, None]


def span_masks(windows, seq_length):
    """(valid_start, valid_end), bool [N, seq_length]: where an answer may start (a context piece whose max-context
    window is this one) and end (any context piece of the window), as the Python post-processing keeps a start in
    `token_is_max_context` and both ends in `token_to_orig_map`. A window's inputs are `[CLS] question [SEP]
    context [SEP]`, so its context starts after the question and two pieces."""
    doc_offset = windows["question"].row_lengths() + 2
    positions = tf.range(seq_length, dtype=tf.int64)[None, :]
    in_context = (positions >= doc_offset[:, None]) & (positions < (doc_offset + windows["length"])[:, None])
    return in_context & max_context_mask(windows, doc_offset, seq_length), in_context


def _gather_flags(mask, positions):
    return tf.gather(mask, positions, batch_dims=1)


def best_candidate(starts, ends, start_scores, end_scores, valid_start, valid_end, max_answer_length):
    """Best valid (start, end, score) of each window among candidate pairs [N, K] (score -inf when none is
    valid), the first in candidate order on ties."""
    scores = tf.cast(start_scores, tf.float64) + tf.cast(end_scores, tf.float64)
    ok = (_gather_flags(valid_start, starts) & _gather_flags(valid_end, ends) & (ends >= starts)
          & (ends - starts < max_answer_length))
    scores = tf.where(ok, scores, tf.constant(-float("inf"), tf.float64))
    best = tf.argmax(scores, axis=1, output_type=tf.int32)
    return (tf.gather(starts, best, batch_dims=1), tf.gather(ends, best, batch_dims=1),
            tf.gather(scores, best, batch_dims=1))


def pick_window(scores, windows):
    """Per question: the flat index [B] of its first window with the highest score, and that score [B].

    (Sorted segment reductions: every question has a window, and -inf stays -inf, which the unsorted ones turn
    into the lowest finite value.)"""
    example = windows["example"]
    best = tf.math.segment_max(scores, example)
    last = tf.constant(tf.int64.max, tf.int64)
    first = tf.math.segment_min(tf.where(scores >= tf.gather(best, example), windows["index"], last), example)
    offsets = tf.cumsum(windows["num_windows"], exclusive=True)
    return offsets + first, best


def export_squad_model(model, export_dir, spm_model_file=None, do_lower_case=True, max_seq_length=384,
                       doc_stride=128, max_query_length=64, max_answer_length=30, n_best_size=20,
                       null_score_diff_threshold=None, overwrite=True, version=None):
    """Writes the SavedModels of a SQuAD model; returns {"ids": dir, "text": dir (with a tokenizer)}.

    With `version` (a training run's global step) they go to `<export_dir>/ids/<version>` and
    `<export_dir>/text/<version>`, the layout TF Serving watches.

    `<export_dir>/ids` — `serving_default`: int32 `input_ids`, `input_mask`, `segment_ids` [batch, seq] (the
    feature layout `[CLS] question [SEP] context [SEP]`) -> v1.1: `start_logits`, `end_logits` [batch, seq];
    v2.0: `start_log_probs` [batch, seq], `start_top_log_probs`/`start_top_index`, `end_top_log_probs`/
    `end_top_index`, `cls_logits` [batch] (p_mask derived from the layout).

    `<export_dir>/text` (with `spm_model_file`) — `serving_default`: strings `question`, `context` [batch] -> per
    question, over all its windows (see the module docstring; the question is cut to `max_query_length` pieces,
    windows are padded to `max_seq_length`):
      `answer_text` [batch]: the best span's pieces decoded (normalised text, i.e. lowercased and without accents
        when do_lower_case; exact context characters need the Python features); "" when no span is valid (the
        Python files write the original's "empty" for v1.1); v2.0: "" as well when `is_impossible`;
      `answer_window`, `answer_start`, `answer_end` [batch] (int32): the window of the best span and its first and
        last position in that window's inputs; `answer_score` [batch] (float32, -1e30 when no span is valid);
      `num_windows` [batch]; per window, zero-padded to the batch's most windows W: `input_ids`, `segment_ids`
        [batch, W, max_seq_length] and the `ids/` outputs with a window axis (`start_logits` [batch, W, seq] ...);
      v2.0 also `null_score` [batch] (the lowest `cls_logits` over windows), `is_impossible` (null_score > the
      `null_score_diff_threshold` variable, 0.0 if none was given) and `best_non_null_text` [batch].
    Both load with `tensorflow` + `tensorflow_text` only.
    """
    if max_seq_length <= max_query_length + 3:
        raise UsageError(f"max_seq_length ({max_seq_length}) must be greater than max_query_length "
                         f"({max_query_length}) + 3: the windows would hold no context")
    if doc_stride < 1:
        raise UsageError(f"doc_stride must be at least 1, got {doc_stride}")
    ensure_built(model)  # the weights made outside the traced functions
    version_2 = model.version_2
    max_positions = model.config.max_position_embeddings
    dirs = {}

    def heads(input_ids, input_mask, segment_ids):
        input_ids = checked_ids(input_ids, max_positions)
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
    text.doc_stride = tf.Variable(doc_stride, trainable=False, name="doc_stride")
    text.n_best_size = tf.Variable(n_best_size, trainable=False, name="n_best_size")

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="question"),
                                  tf.TensorSpec([None], tf.string, name="context")])
    def answer(question, context):
        batch_size = tf.shape(question, out_type=tf.int64)[0]
        ids = text.tokenizer.tokenize_to_ids(tf.concat([question, context], axis=0))
        windows = context_windows(ids[:batch_size][:, :max_query_length], ids[batch_size:], max_seq_length,
                                  text.doc_stride)
        packed = text.tokenizer.preprocessor.pack(windows["question"], windows["context"])  # [N, max_seq_length]
        outputs = heads(packed["input_ids"], packed["input_mask"], packed["segment_ids"])
        valid_start, valid_end = span_masks(windows, max_seq_length)
        if not version_2:
            k = tf.minimum(text.n_best_size, max_seq_length)
            start_top = tf.math.top_k(outputs["start_logits"], k=k)
            end_top = tf.math.top_k(outputs["end_logits"], k=k)
            starts = tf.repeat(start_top.indices, k, axis=1)
            ends = tf.tile(end_top.indices, tf.stack([1, k]))
            start_scores = tf.repeat(start_top.values, k, axis=1)
            end_scores = tf.tile(end_top.values, tf.stack([1, k]))
        else:
            k_end = tf.shape(outputs["end_top_index"])[1] // tf.shape(outputs["start_top_index"])[1]
            starts = tf.repeat(outputs["start_top_index"], k_end, axis=1)
            ends = outputs["end_top_index"]
            start_scores = tf.repeat(outputs["start_top_log_probs"], k_end, axis=1)
            end_scores = outputs["end_top_log_probs"]
        start, end, score = best_candidate(starts, ends, start_scores, end_scores, valid_start, valid_end,
                                           text.max_answer_length)
        chosen, best_score = pick_window(score, windows)
        has_span = best_score > -float("inf")
        start, end = tf.gather(start, chosen), tf.gather(end, chosen)
        positions = tf.range(max_seq_length, dtype=tf.int64)[None, :]
        in_span = (positions >= tf.cast(start, tf.int64)[:, None]) & (positions <= tf.cast(end, tf.int64)[:, None])
        span_ids = tf.ragged.boolean_mask(tf.gather(packed["input_ids"], chosen), in_span)
        span_text = tf.where(has_span, text.detokenizer.detokenize(span_ids), "")

        def per_window(value):
            return tf.RaggedTensor.from_value_rowids(value, windows["example"], batch_size).to_tensor()

        result = {name: per_window(value) for name, value in outputs.items()}
        result.update(input_ids=per_window(packed["input_ids"]), segment_ids=per_window(packed["segment_ids"]),
                      num_windows=tf.cast(windows["num_windows"], tf.int32),
                      answer_window=tf.cast(tf.gather(windows["index"], chosen), tf.int32),
                      answer_start=start, answer_end=end,
                      answer_score=tf.cast(tf.where(has_span, best_score, -NEG_INF), tf.float32),
                      answer_text=span_text)
        if version_2:
            null_score = tf.math.segment_min(outputs["cls_logits"], windows["example"])
            impossible = null_score > text.threshold
            result.update(null_score=null_score, is_impossible=impossible, best_non_null_text=span_text,
                          answer_text=tf.where(impossible, "", span_text))
        return result

    text.answer = answer
    text_signatures = {"serving_default": answer,
                       "tokenization_info": attach_tokenizer(text, spm_model_file, do_lower_case)}
    dirs["text"] = save_module(text, _target(export_dir, "text", version), text_signatures, overwrite=overwrite)
    return dirs
