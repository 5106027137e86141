"""The classifier SavedModel: signatures on ids, serialized tf.Examples, text and text pairs."""

import tensorflow as tf

from albert_tf.serving.savedmodel import ID_FEATURES, ExportError, attach_tokenizer, checked_ids, save_module
from albert_tf.text.preprocessor import AlbertTextPreprocessor
from albert_tf.text.tokenization import TokenizerError, load_sentencepiece


def export_classifier(model, export_dir, tokenizer_file, do_lower_case=True, max_seq_length=128, threshold=None,
                      overwrite=False, label_list=None):
    """Writes a SavedModel of an `AlbertClassifier` that TF Serving (or `tensorflow` + `tensorflow_text` alone)
    can run. Returns the export directory.

    Signatures (every one returns float32 `probabilities` [B, num_labels] — softmax, or the score [B, 1] for
    regression — and `predictions` [B] — int32 label index, or the float score; plus, when `threshold` is given,
    float32 `threshold` [B] holding that constant, and with `label_list` the string `labels` [B] of the predicted
    classes):
      * `serving_default`: int32 `input_ids`, `input_mask`, `segment_ids` [B, T], T <= max_position_embeddings;
      * `serialized_example`: string `serialized_example` [B], serialized `tf.train.Example`s with int64
        `input_ids`, `input_mask`, `segment_ids` (the original's record features; other features are ignored;
        lengths up to max_position_embeddings, shorter ones padded);
      * `text`: string `text` [B], tokenized in the graph (`AlbertTextPreprocessor`, `max_seq_length`);
      * `text_pair`: string `text_a`, `text_b` [B] for sentence-pair tasks (an empty `text_b` is a single text);
      * `tokenization_info`: the tokenizer file (an asset) and `do_lower_case`.
    """
    if not tokenizer_file:
        raise ExportError("export_classifier needs the tokenizer file (--spm_model_file or --vocab_file)")
    config = model.config
    config.check_sequence_length(max_seq_length, "max_seq_length")
    regression = model.num_labels == 1
    if label_list is not None and not regression and len(label_list) != model.num_labels:
        raise ExportError(f"label_list has {len(label_list)} labels, the model {model.num_labels}")
    try:  # a SentencePiece model (else a WordPiece vocabulary, one token per line)
        load_sentencepiece(tokenizer_file)
        is_spm = True
    except TokenizerError:
        is_spm = False
    preprocessor = AlbertTextPreprocessor(spm_model_file=tokenizer_file if is_spm else None,
                                          vocab_file=None if is_spm else tokenizer_file,
                                          do_lower_case=do_lower_case, max_seq_length=max_seq_length)
    preprocessor.ensure_resources()

    module = tf.Module()
    module.model = model
    module.preprocessor = preprocessor
    max_positions = config.max_position_embeddings
    labels_table = tf.constant([str(label) for label in label_list]) if label_list and not regression else None

    def outputs(input_ids, input_mask, segment_ids):
        input_ids = checked_ids(input_ids, max_positions, vocab_size=config.vocab_size)
        logits = tf.cast(model({"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids},
                               training=False), tf.float32)
        if regression:
            result = {"probabilities": logits, "predictions": logits[:, 0]}
        else:
            result = {"probabilities": tf.nn.softmax(logits, axis=-1),
                      "predictions": tf.argmax(logits, axis=-1, output_type=tf.int32)}
            if labels_table is not None:
                result["labels"] = tf.gather(labels_table, result["predictions"])
        if threshold is not None:
            result["threshold"] = tf.fill(tf.shape(logits)[:1], tf.constant(float(threshold), tf.float32))
        return result

    def from_packed(packed):
        # Drop the columns that are padding in every row: same outputs, less work. Every row holds at least
        # [CLS] and [SEP]; an empty batch keeps no column and gives empty outputs.
        length = tf.reduce_max(tf.reduce_sum(packed["input_mask"], axis=1))
        return outputs(packed["input_ids"][:, :length], packed["input_mask"][:, :length],
                       packed["segment_ids"][:, :length])

    ids = [tf.TensorSpec([None, None], tf.int32, name=n) for n in ID_FEATURES]

    @tf.function(input_signature=ids)
    def serve(input_ids, input_mask, segment_ids):
        return outputs(input_ids, input_mask, segment_ids)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="serialized_example")])
    def serve_examples(serialized_example):
        parsed = tf.io.parse_example(serialized_example,
                                     {n: tf.io.RaggedFeature(tf.int64) for n in ID_FEATURES})
        dense = [tf.cast(parsed[n].to_tensor(0), tf.int32) for n in ID_FEATURES]
        return outputs(*dense)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve_text(text):
        return from_packed(preprocessor(text))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                  tf.TensorSpec([None], tf.string, name="text_b")])
    def serve_text_pair(text_a, text_b):
        return from_packed(preprocessor((text_a, text_b)))

    module.serve, module.serve_examples = serve, serve_examples
    module.serve_text, module.serve_text_pair = serve_text, serve_text_pair
    module.max_seq_length = tf.Variable(int(max_seq_length), trainable=False, name="max_seq_length")
    signatures = {"serving_default": serve, "serialized_example": serve_examples, "text": serve_text,
                  "text_pair": serve_text_pair,
                  "tokenization_info": attach_tokenizer(module, tokenizer_file, do_lower_case)}
    return save_module(module, export_dir, signatures, overwrite=overwrite)
