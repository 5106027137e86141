"""The encoder and preprocessing SavedModels (TF-Hub style).

`export_encoder` writes:
  * `serving_default`: int32 `input_ids`, `input_mask`, `segment_ids` [batch, seq] (any seq up to
    max_position_embeddings) -> `sequence_output` [batch, seq, H], `pooled_output` [batch, H];
  * `mlm` (pretraining models): the same plus `masked_lm_positions` [batch, P] -> `mlm_logits` [batch, P, V];
  * `sop` (pretraining models): -> `sop_log_probs` [batch, 2];
  * `tokenization_info` (when a tokenizer file is given): the tokenizer file, attached as an asset, and
    `do_lower_case`, so the tokenizer can be rebuilt from the export alone.

`export_preprocessing` writes the text-in half of a two-model pipeline (preprocessing -> encoder, as TF Hub's
BERT preprocessors): `serving_default` takes string `text` [batch], `encode_pair` strings `text_a`, `text_b`
[batch], both returning int32 `input_ids`, `input_mask`, `segment_ids` [batch, max_seq_length] with the ids of
the Python tokenizer (`albert_tf.text.preprocessor.AlbertTextPreprocessor`), plus `tokenization_info`.
"""

import tensorflow as tf

from albert_tf.checkpoints import ensure_built
from albert_tf.serving.savedmodel import ExportError, attach_tokenizer, checked_ids, ids_spec, save_module
from albert_tf.serving.text_module import TextPreprocessorModule
from albert_tf.text.preprocessor import AlbertTextPreprocessor


def export_encoder(model, export_dir, tokenizer_file=None, do_lower_case=True, overwrite=False):
    """Exports an `AlbertModel` or `AlbertForPretraining` (see module docstring); returns the directory.

    A task model (classifier, SQuAD, RACE) exports its encoder (`model.albert`): the fine-tuned encoder weights,
    without the head. A model not yet built is built first (its weights must exist outside the traced functions).
    """
    ensure_built(model)
    encoder = getattr(model, "albert", model)
    module = tf.Module()
    module.model = model
    max_positions = encoder.config.max_position_embeddings
    vocab_size = encoder.config.vocab_size

    @tf.function(input_signature=[ids_spec("input_ids"), ids_spec("input_mask"), ids_spec("segment_ids")])
    def serve(input_ids, input_mask, segment_ids):
        input_ids = checked_ids(input_ids, max_positions, vocab_size=vocab_size)
        outputs = encoder({"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids},
                          training=False)
        return {"sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
                "pooled_output": tf.cast(outputs["pooled_output"], tf.float32)}

    module.serve = serve
    signatures = {"serving_default": serve}
    if hasattr(model, "masked_lm"):
        @tf.function(input_signature=[ids_spec("input_ids"), ids_spec("input_mask"), ids_spec("segment_ids"),
                                      ids_spec("masked_lm_positions")])
        def mlm(input_ids, input_mask, segment_ids, masked_lm_positions):
            input_ids = checked_ids(input_ids, max_positions, vocab_size=vocab_size)
            outputs = encoder({"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids},
                              training=False, output_positions=masked_lm_positions)  # the last layer there only
            table = encoder.embeddings.word_embeddings.embeddings
            return {"mlm_logits": model.masked_lm(outputs["sequence_output"], None, table)}

        @tf.function(input_signature=[ids_spec("input_ids"), ids_spec("input_mask"), ids_spec("segment_ids")])
        def sop(input_ids, input_mask, segment_ids):
            input_ids = checked_ids(input_ids, max_positions, vocab_size=vocab_size)
            no_positions = tf.zeros([tf.shape(input_ids)[0], 0], tf.int32)  # the last layer at position 0 only
            outputs = encoder({"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids},
                              training=False, output_positions=no_positions)
            logits = tf.cast(model.seq_relationship(outputs["pooled_output"]), tf.float32)
            return {"sop_log_probs": tf.nn.log_softmax(logits, axis=-1)}

        module.mlm, module.sop = mlm, sop
        signatures.update(mlm=mlm, sop=sop)
    if tokenizer_file:
        signatures["tokenization_info"] = attach_tokenizer(module, tokenizer_file, do_lower_case)
    return save_module(module, export_dir, signatures, overwrite=overwrite)


def export_preprocessing(export_dir, spm_model_file=None, vocab_file=None, do_lower_case=True, max_seq_length=128,
                         max_position_embeddings=None, overwrite=False):
    """Exports the in-graph tokenizer as a SavedModel (see module docstring); returns the directory.

    Args:
      spm_model_file / vocab_file: the SentencePiece model, or (without one) the WordPiece vocabulary.
      do_lower_case: as the Python tokenizer's.
      max_seq_length: the length of every output row (the encoder takes up to max_position_embeddings).
      max_position_embeddings: when given (from the model's config), a longer `max_seq_length` is refused.
    """
    if not (spm_model_file or vocab_file):
        raise ExportError("the preprocessing export needs the tokenizer: spm_model_file (SentencePiece) or "
                          "vocab_file (WordPiece)")
    if max_position_embeddings and max_seq_length > max_position_embeddings:
        raise ExportError(f"max_seq_length {max_seq_length} exceeds max_position_embeddings "
                          f"{max_position_embeddings}")
    preprocessor = AlbertTextPreprocessor(spm_model_file=spm_model_file, vocab_file=vocab_file,
                                          do_lower_case=do_lower_case, max_seq_length=max_seq_length)
    module = TextPreprocessorModule(preprocessor)  # reads the tokenizer file: a bad file fails here
    # TextPreprocessorModule builds the tokenization graph once (nested tf.functions) for all its functions.
    signatures = {"serving_default": module.encode, "encode_pair": module.encode_pair,
                  "tokenization_info": module.tokenization_info}
    return save_module(module, export_dir, signatures, overwrite=overwrite)
