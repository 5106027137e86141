"""The in-graph tokenizer as a SavedModel of its own, and as the `text_tokenizer` of every text export.

`TextPreprocessorModule` wraps an `albert_tf.text.preprocessor.AlbertTextPreprocessor` in functions with string
input signatures; `export_text_preprocessor` saves one on its own.
"""

import tensorflow as tf


class TextPreprocessorModule(tf.Module):
    """A `tf.Module` exposing an `AlbertTextPreprocessor` through functions with string input signatures.

    Functions (all take [batch] string tensors): `encode(text)` and `encode_pair(text_a, text_b)` return the dict
    of `input_ids`/`input_mask`/`segment_ids`; `tokenize(text)` returns ragged string tokens,
    `tokenize_to_ids(text)` ragged int32 ids, and `tokenize_with_ids(text)` both (keys `tokens`, `ids`);
    `tokenization_info()` returns the attached tokenizer file's path (`vocab_file`, as in the original's TF-Hub
    modules, even for a SentencePiece model) and `do_lower_case`. The tokenization graph is built once, in
    `tokenize_with_ids`, and the other functions call it, which keeps tracing, the SavedModel and loading small.
    """

    def __init__(self, preprocessor, name=None):
        super().__init__(name=name)
        preprocessor.ensure_resources()
        self.preprocessor = preprocessor
        self.tokenizer_file = preprocessor.tokenizer_asset
        self.do_lower_case = tf.Variable(preprocessor.do_lower_case, trainable=False, name="do_lower_case")
        self.max_seq_length = tf.Variable(preprocessor.max_seq_length, trainable=False, name="max_seq_length")
        self.is_sentencepiece = tf.Variable(preprocessor.is_sentencepiece, trainable=False, name="is_sentencepiece")

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def tokenize_with_ids(self, text):
        tokens = self.preprocessor.tokenize(text)
        return {"tokens": tokens, "ids": self.preprocessor.convert_tokens_to_ids(tokens)}

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def tokenize(self, text):
        return self.tokenize_with_ids(text)["tokens"]

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def tokenize_to_ids(self, text):
        return self.tokenize_with_ids(text)["ids"]

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                                   tf.TensorSpec([None], tf.string, name="text_b")])
    def encode_pair(self, text_a, text_b):
        ids = self.tokenize_with_ids(tf.concat([text_a, text_b], axis=0))["ids"]
        batch_size = tf.shape(text_a, out_type=tf.int64)[0]
        return self.preprocessor.pack(ids[:batch_size], ids[batch_size:])

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def encode(self, text):
        # An empty second text gives the single-text layout (as in `tokenization.encode_pair`).
        return self.encode_pair(text, tf.fill(tf.shape(text), ""))

    @tf.function(autograph=False, input_signature=[])
    def tokenization_info(self):
        return {"vocab_file": self.tokenizer_file.asset_path, "do_lower_case": self.do_lower_case}


def export_text_preprocessor(preprocessor, export_dir):
    """Saves `preprocessor` (an `AlbertTextPreprocessor`) as a self-contained SavedModel in `export_dir`.

    Load it with `tf.saved_model.load(export_dir)` after `import tensorflow_text` (which registers the ops); the
    loaded object has the functions of `TextPreprocessorModule`, and the signatures `serving_default`
    (= `encode`, input `text`) and `encode_pair` (inputs `text_a`, `text_b`).
    """
    module = TextPreprocessorModule(preprocessor)
    # Passing the tf.functions (not concrete functions traced beforehand) lets saving trace each one only once.
    signatures = {"serving_default": module.encode, "encode_pair": module.encode_pair}
    tf.saved_model.save(module, export_dir, signatures=signatures)
    return export_dir
