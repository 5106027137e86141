"""The RACE SavedModel: ids [batch, 4, seq] in, the answer out; with the tokenizer also a `text` signature
(article, question and four options as strings, tokenized in the graph as `data.race.convert_example` does)."""

import tensorflow as tf

from albert_tf.serving.savedmodel import ExportError, attach_tokenizer, checked_ids, save_module
from albert_tf.serving.text_module import TextPreprocessorModule
from albert_tf.text.preprocessor import AlbertTextPreprocessor
from albert_tf.text.unicode_graph import drop_invalid_utf8, preprocess_text_graph

LABELS = ("A", "B", "C", "D")
NUM_CHOICES = len(LABELS)


def export_race_model(model, export_dir, tokenizer_file=None, do_lower_case=True, overwrite=False,
                      is_sentencepiece=None, max_seq_length=512, max_qa_length=128):
    """A SavedModel that needs only `tensorflow`, plus `tensorflow_text` (imported before loading, to register
    its ops) when it has the `text` signature.

    `serving_default`: int32 `input_ids`, `input_mask`, `segment_ids` [batch, 4, seq] (seq up to
    max_position_embeddings) -> float32 `probabilities` and `logits` [batch, 4], int32 `prediction` [batch]
    (0-3) and string `answer` [batch] ("A"-"D"). With a tokenizer file, `tokenization_info` as the encoder export;
    and when `is_sentencepiece` also says what the file is (True: a SentencePiece model, False: a WordPiece
    vocabulary), `text`: strings `article` [batch], `question` [batch], `options` [batch, 4] -> the same outputs,
    from the features `convert_example` builds (`max_seq_length`, `max_qa_length`), tokenized in the graph.
    """
    module = tf.Module()
    module.model = model
    max_positions = model.config.max_position_embeddings
    spec = lambda name: tf.TensorSpec([None, NUM_CHOICES, None], tf.int32, name=name)  # noqa: E731

    def run_model(input_ids, input_mask, segment_ids):
        input_ids = checked_ids(input_ids, max_positions, axis=2)
        logits = tf.cast(model({"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids},
                               training=False), tf.float32)
        prediction = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1), "prediction": prediction,
                "answer": tf.gather(tf.constant(LABELS), prediction)}

    serve = tf.function(run_model, input_signature=[spec("input_ids"), spec("input_mask"), spec("segment_ids")])
    module.serve = serve
    signatures = {"serving_default": serve}
    if tokenizer_file:
        signatures["tokenization_info"] = attach_tokenizer(module, tokenizer_file, do_lower_case)
    if tokenizer_file and is_sentencepiece is not None:
        if not 0 < max_qa_length <= max_seq_length - 3:
            raise ExportError(f"max_qa_length {max_qa_length} must be between 1 and max_seq_length - 3 "
                              f"({max_seq_length - 3})")
        model.config.check_sequence_length(max_seq_length, "max_seq_length")
        signatures["text"] = _text_signature(module, run_model, tokenizer_file, do_lower_case, is_sentencepiece,
                                             max_seq_length, max_qa_length)
    return save_module(module, export_dir, signatures, overwrite=overwrite)


def _text_signature(module, run_model, tokenizer_file, do_lower_case, is_sentencepiece, max_seq_length,
                    max_qa_length):
    """The raw-text serving function of `export_race_model` (its tokenizer is tracked by `module`)."""
    preprocessor = AlbertTextPreprocessor(
        spm_model_file=tokenizer_file if is_sentencepiece else None,
        vocab_file=None if is_sentencepiece else tokenizer_file, do_lower_case=do_lower_case,
        max_seq_length=max_seq_length)
    # The tokenizer module creates its lookup tables now, so the SavedModel tracks them.
    module.text_tokenizer = TextPreprocessorModule(preprocessor)
    cls_id, sep_id = preprocessor.cls_id, preprocessor.sep_id

    def process(text):  # `process_text`
        if is_sentencepiece:
            return preprocess_text_graph(text, lower=do_lower_case)
        return drop_invalid_utf8(text)

    def with_option(question, option):  # `question_with_option`, element by element of [n] strings
        parts = tf.strings.split(question, sep="_")
        lengths = parts.row_lengths()
        is_last = tf.ragged.range(lengths) == tf.expand_dims(lengths - 1, -1)
        filler = tf.where(is_last.flat_values, "", tf.gather(option, parts.value_rowids()))
        substituted = tf.strings.reduce_join(
            parts.with_flat_values(tf.strings.join([parts.flat_values, filler])), axis=-1)
        has_blank = tf.strings.regex_full_match(question, "(?s).*_.*")
        return tf.where(has_blank, substituted, tf.strings.join([question, option], separator=" "))

    def column(value, rows):
        return tf.RaggedTensor.from_row_lengths(tf.fill([rows], tf.constant(value, tf.int32)),
                                                tf.ones([rows], tf.int64))

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="article"),
                                                   tf.TensorSpec([None], tf.string, name="question"),
                                                   tf.TensorSpec([None, NUM_CHOICES], tf.string, name="options")])
    def serve_text(article, question, options):
        batch_size = tf.shape(article, out_type=tf.int64)[0]
        questions = tf.repeat(process(question), NUM_CHOICES)  # [batch * 4], choice after choice
        qa = with_option(questions, process(tf.reshape(options, [-1])))
        # One tokenization pass (the texts are preprocessed again: a no-op on already processed text).
        ids = module.text_tokenizer.tokenize_to_ids(tf.concat([process(article), qa], axis=0))
        article_ids, qa_ids = ids[:batch_size], ids[batch_size:]
        qa_lengths = qa_ids.row_lengths()
        positions = tf.ragged.range(qa_lengths)
        qa_ids = tf.ragged.boolean_mask(qa_ids, positions >= tf.expand_dims(qa_lengths - max_qa_length, 1))
        article_ids = tf.gather(article_ids, tf.repeat(tf.range(batch_size), NUM_CHOICES))
        keep = tf.minimum(article_ids.row_lengths(), max_seq_length - 3 - qa_ids.row_lengths())
        article_ids = tf.ragged.boolean_mask(article_ids,
                                             tf.ragged.range(article_ids.row_lengths()) < tf.expand_dims(keep, 1))
        rows = batch_size * NUM_CHOICES
        cls, sep = column(cls_id, rows), column(sep_id, rows)
        input_ids = tf.concat([cls, article_ids, sep, qa_ids, sep], axis=1)
        segments = tf.concat([tf.zeros_like(cls), tf.zeros_like(article_ids), tf.zeros_like(sep),
                              tf.ones_like(qa_ids), tf.ones_like(sep)], axis=1)
        shape = [None, max_seq_length]
        features = {"input_ids": input_ids.to_tensor(0, shape=shape),
                    "input_mask": tf.ones_like(input_ids).to_tensor(0, shape=shape),
                    "segment_ids": segments.to_tensor(0, shape=shape)}
        features = {k: tf.reshape(v, [-1, NUM_CHOICES, max_seq_length]) for k, v in features.items()}
        return run_model(**features)

    module.serve_text = serve_text
    return serve_text
