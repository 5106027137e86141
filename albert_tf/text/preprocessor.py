"""In-graph tokenization: raw strings to ALBERT inputs inside a TensorFlow graph (and so inside a SavedModel).

`AlbertTextPreprocessor` is a Keras layer that maps a batch of strings (or a pair of batches) to the int32
`input_ids`, `input_mask` and `segment_ids` that `tokenization.encode_pair` builds in Python, id for id. It works
in both of `FullTokenizer`'s modes:

* SentencePiece (`spm_model_file`): `preprocess_text` is rebuilt from tf.strings / tensorflow-text ops
  (whitespace folding, NFKD with combining marks removed, lowercasing; with `map_latex_quotes`, `` and '' to "
  as in Hugging Face's tokenizer), the model runs in
  `tensorflow_text.FastSentencepieceTokenizer` (which, unlike `SentencepieceTokenizer`, breaks ties between
  equal-score segmentations such as "e|ee" / "ee|e" as the Python package does), and the digit-comma rule of
  `encode_pieces` is applied to the pieces with ragged ops.
* WordPiece (`vocab_file`): BERT's basic tokenization is rebuilt from regular expressions, followed by
  `tensorflow_text.WordpieceTokenizer` over a lookup table holding the vocabulary.

The tokenizer's file (model proto or vocabulary) is read into the graph as constants and also attached as a
SavedModel asset, so an exported model needs nothing but `tensorflow` and `tensorflow_text` to run
(`albert_tf.serving.text_module`).

The string rules themselves (`preprocess_text`, BERT's basic tokenization) are rebuilt in
`albert_tf.text.unicode_graph`.

Known disagreements (`tests/text/test_preprocessor.py::test_known_disagreements` pins the first two down):

* SentencePiece near-ties. Segmentations whose scores are equal but for floating-point rounding (e.g. "6"+"66"
  versus "66"+"6") can come out in the other order when the text also holds a character outside the model's
  vocabulary before them (its large penalty score shifts the running sums): "٣666" gives ids [13, 1, 379, 3526]
  in Python and [13, 1, 3526, 379] in the graph. None occurred in 210,000 lines of GLUE and Gutenberg text.
* In SentencePiece mode `tokenize` returns "<unk>" for a piece outside the vocabulary where Python returns the
  piece's text ("😀"); the ids are the same.
* Locale. `tf.strings.lower` uses ICU's default locale; under a Turkish, Azeri or Lithuanian process locale its
  I/i mappings differ from Python's locale-independent `str.lower`. Run with a neutral locale (C, en_*).
* Subword sampling (`FullTokenizer.tokenize(text, sample=True)`) has no in-graph counterpart: the graph always
  gives the deterministic segmentation.
"""

import os
import shutil
import tempfile
import weakref

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.text import wordpiece
from albert_tf.text.common import SPIECE_UNDERLINE, TokenizerError
from albert_tf.text.unicode_graph import (basic_tokenize_graph, build_tables, char_class, graph_code,
                                           preprocess_text_graph)


@graph_code
def _ragged_first_n(rt, n):
    """Keeps the first `n[i]` items of row `i` of a 2-D ragged tensor."""
    positions = tf.ragged.range(rt.row_lengths())
    return tf.ragged.boolean_mask(rt, positions < tf.expand_dims(n, 1))


@graph_code
def _column(value, batch_size, dtype):
    return tf.RaggedTensor.from_tensor(tf.fill(tf.stack([batch_size, 1]), tf.cast(value, dtype)))


@graph_code
def pack_inputs(ids_a, ids_b, max_seq_length, cls_id, sep_id):
    """`[CLS] A [SEP] (B [SEP])`, truncated and zero-padded to `max_seq_length`, from ragged int32 ids.

    Rows of `ids_b` with no tokens get the single-text layout, as `tokenization.encode_pair` does. Truncation
    gives the lengths that `tokenization.truncate_seq_pair` reaches (it removes from the end of the longer
    segment, from B on ties, so the final lengths have a closed form).
    """
    ids_a = tf.cast(ids_a, tf.int32)
    batch_size = ids_a.nrows()
    len_a = ids_a.row_lengths()
    if ids_b is None:
        ids_b = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), tf.zeros_like(len_a))
    ids_b = tf.cast(ids_b, tf.int32)
    len_b = ids_b.row_lengths()
    has_b = len_b > 0
    budget = tf.where(has_b, tf.constant(max_seq_length - 3, tf.int64), tf.constant(max_seq_length - 2, tf.int64))
    keep_a = tf.minimum(len_a, tf.maximum(budget - len_b, (budget + 1) // 2))
    keep_b = tf.minimum(len_b, budget - keep_a)
    ids_a = _ragged_first_n(ids_a, keep_a)
    ids_b = _ragged_first_n(ids_b, keep_b)
    num_b = tf.cast(has_b, tf.int64)
    sep_b = tf.RaggedTensor.from_row_lengths(tf.fill([tf.reduce_sum(num_b)], tf.cast(sep_id, tf.int32)), num_b)
    cls = _column(cls_id, batch_size, tf.int32)
    sep = _column(sep_id, batch_size, tf.int32)
    ids = tf.concat([cls, ids_a, sep, ids_b, sep_b], axis=1)
    segments = tf.concat([tf.zeros_like(cls), tf.zeros_like(ids_a), tf.zeros_like(sep), tf.ones_like(ids_b),
                          tf.ones_like(sep_b)], axis=1)
    shape = [None, max_seq_length]
    return {
        "input_ids": ids.to_tensor(0, shape=shape),
        "input_mask": tf.ones_like(ids).to_tensor(0, shape=shape),
        "segment_ids": segments.to_tensor(0, shape=shape),
    }


# ------------------------------------------------------------------------------------------------------------------
# The layer.

@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTextPreprocessor(keras.layers.Layer):
    """Raw text to ALBERT inputs in the graph, with the same ids as `FullTokenizer` + `tokenization.encode_pair`.

    Call it on a string tensor of shape [batch] (single texts) or on a tuple `(text_a, text_b)` of two such
    tensors (text pairs). It returns a dict of int32 tensors of shape [batch, max_seq_length]: `input_ids`
    (`[CLS] A [SEP] (B [SEP])`, zero-padded), `input_mask` (1 on tokens) and `segment_ids` (1 on `B [SEP]`).
    A pair longer than `max_seq_length - 3` tokens loses tokens from the end of its longer text, one at a time,
    as the original's `_truncate_seq_pair`; a single text keeps its first `max_seq_length - 2` tokens; a pair whose
    second text has no tokens is laid out as a single text.

    `tokenize(texts)` gives the tokens (ragged strings) and `tokenize_to_ids(texts)` their ids (ragged int32)
    without packing; `pack(ids_a, ids_b=None)` packs ragged ids.

    The tokenizer file is read when the layer is first used, not at construction; `get_config` stores the paths,
    and a `.keras` archive also stores the file itself (`save_assets`/`load_assets`). Inside a SavedModel the
    file's contents are graph constants and the file is attached as an asset (`tokenizer_asset`).

    Args:
      spm_model_file: a SentencePiece model such as `30k-clean.model` (takes precedence, as in `FullTokenizer`).
      vocab_file: a WordPiece vocabulary such as `vocab_chinese.txt`, used when no `spm_model_file` is given.
      do_lower_case: lowercase (and, in WordPiece mode, strip accents) as `FullTokenizer` does.
      max_seq_length: length of every output row (at least 3).
      max_input_chars_per_word: WordPiece mode: longer words become `[UNK]` (the original's default is 200).
      map_latex_quotes: SentencePiece mode: `` and '' become " first, as `FullTokenizer(map_latex_quotes=True)`
        (Hugging Face's rule; the original's, the default, leaves them).
    """

    def __init__(self, spm_model_file=None, vocab_file=None, do_lower_case=True, max_seq_length=128,
                 max_input_chars_per_word=wordpiece.DEFAULT_MAX_INPUT_CHARS_PER_WORD, map_latex_quotes=False,
                 **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        if not spm_model_file and not vocab_file:
            raise TokenizerError("AlbertTextPreprocessor needs spm_model_file (SentencePiece) or vocab_file "
                                 "(WordPiece)")
        if max_seq_length < 3:
            raise ValueError(f"max_seq_length must be at least 3, got {max_seq_length}")
        self.spm_model_file = spm_model_file or None
        self.vocab_file = None if spm_model_file else vocab_file
        self.do_lower_case = bool(do_lower_case)
        self.max_seq_length = int(max_seq_length)
        self.max_input_chars_per_word = int(max_input_chars_per_word)
        self.map_latex_quotes = bool(map_latex_quotes)
        if self.map_latex_quotes and not self.is_sentencepiece:
            raise TokenizerError("map_latex_quotes applies to SentencePiece models (spm_model_file) only")
        self._file_contents = None  # bytes of the model/vocabulary file, read lazily or from load_assets()
        self._resources = None
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True

    # -- configuration and assets ----------------------------------------------------------------------------------

    @property
    def is_sentencepiece(self):
        return self.spm_model_file is not None

    @property
    def _tokenizer_file(self):
        return self.spm_model_file if self.is_sentencepiece else self.vocab_file

    @property
    def _asset_name(self):
        return os.path.basename(self._tokenizer_file)

    def get_config(self):
        config = super().get_config()
        config.update({
            "spm_model_file": self.spm_model_file,
            "vocab_file": self.vocab_file,
            "do_lower_case": self.do_lower_case,
            "max_seq_length": self.max_seq_length,
            "max_input_chars_per_word": self.max_input_chars_per_word,
            "map_latex_quotes": self.map_latex_quotes,
        })
        return config

    def save_assets(self, dir_path):
        with open(os.path.join(dir_path, self._asset_name), "wb") as f:
            f.write(self._read_file())

    def load_assets(self, dir_path):
        path = os.path.join(dir_path, self._asset_name)
        with open(path, "rb") as f:
            self._file_contents = f.read()
        self._resources = None

    def _read_file(self):
        if self._file_contents is None:
            path = self._tokenizer_file
            kind = "SentencePiece model" if self.is_sentencepiece else "WordPiece vocabulary"
            if not os.path.isfile(path):
                raise TokenizerError(f"{kind} file not found: {path!r}")
            with open(path, "rb") as f:
                self._file_contents = f.read()
        return self._file_contents

    # -- lazily created TensorFlow resources ----------------------------------------------------------------------

    def ensure_resources(self):
        """Creates the tokenizer's TF resources (lookup tables, the SentencePiece op) now, outside any trace, so
        a SavedModel tracks them; returns them."""
        if self._resources is not None:
            return self._resources
        contents = self._read_file()
        with tf.init_scope():
            resources = {}
            if self.is_sentencepiece:
                import sentencepiece as spm  # pylint: disable=import-outside-toplevel

                sp_model = spm.SentencePieceProcessor()
                try:
                    sp_model.load_from_serialized_proto(contents)
                except (RuntimeError, OSError) as err:
                    raise TokenizerError(f"cannot read SentencePiece model {self.spm_model_file!r}: {err}") from None
                resources["cls_id"] = sp_model.piece_to_id("[CLS]")
                resources["sep_id"] = sp_model.piece_to_id("[SEP]")
                # FastSentencepieceTokenizer resolves ties between equal-score segmentations as the Python
                # sentencepiece package does (SentencepieceTokenizer's bundled library does not, e.g. "eee").
                resources["sentencepiece"] = tf_text.FastSentencepieceTokenizer(contents)
                pieces = [sp_model.id_to_piece(i) for i in range(sp_model.get_piece_size())]
                resources["id_to_piece"] = tf.lookup.StaticHashTable(
                    tf.lookup.KeyValueTensorInitializer(tf.range(len(pieces), dtype=tf.int64),
                                                        tf.constant(pieces, tf.string)),
                    default_value=sp_model.id_to_piece(sp_model.unk_id()))
                resources["piece_table"] = tf.lookup.StaticHashTable(
                    tf.lookup.KeyValueTensorInitializer(tf.constant(pieces, tf.string),
                                                        tf.range(len(pieces), dtype=tf.int64)),
                    default_value=sp_model.unk_id())
            else:
                vocab = wordpiece.parse_vocab(contents, self.vocab_file)
                for special in ("[CLS]", "[SEP]", wordpiece.UNK_TOKEN):
                    if special not in vocab:
                        raise TokenizerError(f"WordPiece vocabulary {self.vocab_file!r} has no {special!r} token")
                resources["cls_id"] = vocab["[CLS]"]
                resources["sep_id"] = vocab["[SEP]"]
                table = tf.lookup.StaticHashTable(
                    tf.lookup.KeyValueTensorInitializer(
                        tf.constant(list(vocab.keys()), tf.string),
                        tf.constant(list(vocab.values()), tf.int64)),
                    default_value=-1)
                resources["table"] = table
                resources["wordpiece"] = tf_text.WordpieceTokenizer(
                    table, suffix_indicator=wordpiece.SUFFIX_INDICATOR,
                    max_bytes_per_word=4 * max(self.max_input_chars_per_word, 1),
                    token_out_type=tf.string, unknown_token=wordpiece.UNK_TOKEN, split_unknown_characters=False)
            # Build the regular expressions now (not while tracing) so the first trace is not slowed by them.
            build_tables("NFKD" if self.is_sentencepiece else "NFD", self.do_lower_case)
            asset = tf.saved_model.Asset(self._asset_path())
        # Attributes (not a dict) so that Keras/TensorFlow tracking saves the resources with the layer.
        self._sp_tokenizer = resources.get("sentencepiece")
        self._id_to_piece = resources.get("id_to_piece")
        self._piece_table = resources.get("piece_table")
        self._vocab_table = resources.get("table")
        self._wp_tokenizer = resources.get("wordpiece")
        self.tokenizer_asset = asset  # the tokenizer file travels with any SavedModel that tracks this layer
        self._resources = resources
        return resources

    def _asset_path(self):
        path = self._tokenizer_file
        if os.path.isfile(path):
            with open(path, "rb") as f:
                if f.read() == self._file_contents:
                    return path
        # Loaded from a .keras archive (or the file changed): write the contents we use to a private copy, removed
        # with the layer (or at exit).
        directory = tempfile.mkdtemp(prefix="albert_tf_tokenizer_")
        weakref.finalize(self, shutil.rmtree, directory, True)
        path = os.path.join(directory, self._asset_name)
        with open(path, "wb") as f:
            f.write(self._file_contents)
        return path

    @property
    def cls_id(self):
        return self.ensure_resources()["cls_id"]

    @property
    def sep_id(self):
        return self.ensure_resources()["sep_id"]

    # -- tokenization -----------------------------------------------------------------------------------------------

    @staticmethod
    def _as_batch(texts):
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        if texts.shape.rank == 2:
            texts = tf.squeeze(texts, axis=-1)
        elif texts.shape.rank == 0:
            texts = tf.expand_dims(texts, 0)
        return texts

    @graph_code
    def tokenize(self, texts):
        """Tokens of each text (ragged [batch, (tokens)] strings), as `FullTokenizer.tokenize` gives them."""
        self.ensure_resources()
        texts = self._as_batch(texts)
        if self.is_sentencepiece:
            return self._sentencepiece_pieces(texts)
        words = basic_tokenize_graph(texts, self.do_lower_case)
        flat = words.flat_values
        too_long = tf.strings.length(flat, unit="UTF8_CHAR") > self.max_input_chars_per_word
        words = words.with_flat_values(tf.where(too_long, wordpiece.UNK_TOKEN, flat))
        return self._wp_tokenizer.tokenize(words).merge_dims(1, 2)

    @graph_code
    def tokenize_to_ids(self, texts):
        """Token ids of each text (ragged [batch, (tokens)] int32), as `FullTokenizer.convert_tokens_to_ids`."""
        return self.convert_tokens_to_ids(self.tokenize(texts))

    @graph_code
    def convert_tokens_to_ids(self, tokens):
        """Ids of string tokens (any shape, ragged or not) as int32, as `FullTokenizer.convert_tokens_to_ids`.

        Tokens outside the vocabulary get the unknown id in SentencePiece mode and -1 in WordPiece mode (where
        the Python tokenizer would raise a KeyError; `tokenize` never produces such tokens).
        """
        self.ensure_resources()
        table = self._piece_table if self.is_sentencepiece else self._vocab_table
        if isinstance(tokens, tf.RaggedTensor):
            return tf.cast(tf.ragged.map_flat_values(table.lookup, tokens), tf.int32)
        return tf.cast(table.lookup(tf.convert_to_tensor(tokens, tf.string)), tf.int32)

    @graph_code
    def _sentencepiece_pieces(self, texts):
        def sp_pieces(text):
            ids = self._sp_tokenizer.tokenize(text).with_row_splits_dtype(tf.int64)
            return ids.with_flat_values(self._id_to_piece.lookup(tf.cast(ids.flat_values, tf.int64)))

        pieces = sp_pieces(preprocess_text_graph(texts, lower=self.do_lower_case,
                                                 map_latex_quotes=self.map_latex_quotes))
        flat = pieces.flat_values
        # Digit-comma rule: "▁1,000," -> pieces of "1,000" (no "▁" kept if the piece had none) + ",".
        matched = tf.strings.regex_full_match(flat, "(?s).*" + char_class("python_digit") + ",")
        hits = tf.boolean_mask(flat, matched)
        hit_lengths = tf.strings.length(hits)
        body = tf.strings.substr(hits, tf.zeros_like(hit_lengths), hit_lengths - 1)
        body = tf.strings.regex_replace(body, SPIECE_UNDERLINE, "")
        sub = sp_pieces(body)
        had_prefix = tf.strings.regex_full_match(hits, SPIECE_UNDERLINE + "(?s).*")
        values = sub.values
        first = tf.ragged.range(sub.row_lengths()).flat_values == 0
        starts_with_prefix = tf.strings.regex_full_match(values, SPIECE_UNDERLINE + "(?s).*")
        fix = first & starts_with_prefix & ~tf.gather(had_prefix, sub.value_rowids())
        drop = fix & tf.equal(values, SPIECE_UNDERLINE)
        values = tf.where(fix, tf.strings.regex_replace(values, "^" + SPIECE_UNDERLINE, ""), values)
        sub = tf.ragged.boolean_mask(sub.with_values(values), sub.with_values(~drop))
        comma = tf.RaggedTensor.from_tensor(tf.fill(tf.stack([tf.size(hits), 1]), ","))
        replaced = tf.concat([sub, comma], axis=1)
        kept = tf.RaggedTensor.from_tensor(tf.expand_dims(tf.boolean_mask(flat, ~matched), 1))
        # Interleave the kept pieces and the replacements back into the original order.
        num_kept = tf.reduce_sum(tf.cast(~matched, tf.int64))
        kept_rank = tf.cumsum(tf.cast(~matched, tf.int64), exclusive=True)
        hit_rank = tf.cumsum(tf.cast(matched, tf.int64), exclusive=True) + num_kept
        per_piece = tf.gather(tf.concat([kept, replaced], axis=0), tf.where(matched, hit_rank, kept_rank))
        return pieces.with_flat_values(per_piece).merge_dims(1, 2)

    @graph_code
    def pack(self, ids_a, ids_b=None):
        """Packs ragged int ids of one or two segments into the output dict (see the class docstring)."""
        resources = self.ensure_resources()
        return pack_inputs(ids_a, ids_b, self.max_seq_length, resources["cls_id"], resources["sep_id"])

    # -- Keras ------------------------------------------------------------------------------------------------------

    def build(self, input_shape=None):
        self.built = True

    @graph_code
    def call(self, inputs):
        if isinstance(inputs, dict):
            raise TypeError("AlbertTextPreprocessor takes a string tensor or a tuple (text_a, text_b), not a dict")
        if isinstance(inputs, (list, tuple)) and len(inputs) == 2 and not isinstance(inputs[0], (str, bytes)):
            text_a, text_b = self._as_batch(inputs[0]), self._as_batch(inputs[1])
            # One tokenization pass over both halves keeps the graph (and a SavedModel) half the size.
            ids = self.tokenize_to_ids(tf.concat([text_a, text_b], axis=0))
            batch_size = tf.shape(text_a, out_type=tf.int64)[0]
            return self.pack(ids[:batch_size], ids[batch_size:])
        if isinstance(inputs, (list, tuple)) and len(inputs) == 1 and not isinstance(inputs[0], (str, bytes)):
            inputs = inputs[0]
        return self.pack(self.tokenize_to_ids(inputs))

    def compute_output_shape(self, input_shape):
        shape = input_shape[0] if isinstance(input_shape, (list, tuple)) and input_shape and \
            isinstance(input_shape[0], (list, tuple)) else input_shape
        batch = shape[0] if shape else None
        out = (batch, self.max_seq_length)
        return {"input_ids": out, "input_mask": out, "segment_ids": out}

    def compute_output_spec(self, inputs):
        first = inputs[0] if isinstance(inputs, (list, tuple)) else inputs
        batch = first.shape[0] if first.shape else None
        out = (batch, self.max_seq_length)
        return {name: keras.KerasTensor(out, dtype="int32") for name in ("input_ids", "input_mask", "segment_ids")}


# ------------------------------------------------------------------------------------------------------------------
# SavedModel export.
