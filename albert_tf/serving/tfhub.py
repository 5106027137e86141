"""SavedModels with TF Model Garden's TF-Hub interface (`albert_en_base/3`, `albert_en_preprocess/3`).

A program written against Model Garden's ALBERT models runs unchanged on an export of a model trained here.

`export_tfhub` writes the encoder:
  * `model(inputs, training=False)` with `inputs` a dict of int32 `input_word_ids`, `input_mask`,
    `input_type_ids` [batch, seq] returns float32 `sequence_output` [batch, seq, H], `pooled_output` and its
    alias `default` [batch, H], and `encoder_outputs` (a list: each layer's output [batch, seq, H], the last
    equal to `sequence_output`); `training=True` applies dropout, as `hub.KerasLayer(..., trainable=True)` asks;
  * `model.mlm(inputs)` (pretraining models), `inputs` also holding int32 `masked_lm_positions`
    [batch, P]: the same outputs (but `default`) plus `mlm_logits` [batch, P, vocab];
  * `model.variables` / `model.trainable_variables` (and `model.mlm`'s, the encoder's first), named as
    Model Garden names them and laid out as it does (attention kernels per head), so the export loads back
    with `albert_tf.load_checkpoint` or any tool that reads Model Garden's names;
  * the signature `serving_default` (kwargs `input_word_ids`, `input_mask`, `input_type_ids`), whose outputs
    are named as Keras names Model Garden's: `albert_encoder`, `albert_encoder_1`, ... in the order of
    the flattened outputs (`default`, `encoder_outputs[0..L-1]`, `pooled_output`, `sequence_output`);
  * the tokenizer: `model.sp_model_file` (a SentencePiece asset, lower-casing implied, as Model Garden), or
    `model.vocab_file` (WordPiece) and `model.do_lower_case`; and `albert_config.json` as an asset
    (`model.albert_config_file`), so the directory is self-describing.
The sentence-order head is not part of the interface and is not exported.

`export_tfhub_preprocessing` writes the text-in model:
  * `preprocess(sentences)`: string [batch] -> int32 `input_word_ids`, `input_mask`, `input_type_ids`
    [batch, seq_length] ([CLS] pieces [SEP], truncated to fit);
  * `preprocess.tokenize(sentences)`: int32 RaggedTensor [batch, (pieces)] (WordPiece: [batch, (words),
    (pieces)]), and `preprocess.tokenize.get_special_tokens_dict()`: int32 `vocab_size`,
    `start_of_sequence_id`, `end_of_segment_id`, `padding_id`, `mask_id`;
  * `preprocess.bert_pack_inputs(segments, seq_length=seq_length)`: one or two tokenized segments -> the
    three inputs; the segments are truncated round robin (one piece at a time to each that needs it);
  * the signature `serving_default` (kwarg `sentences`; outputs `bert_pack_inputs` = `input_mask`,
    `bert_pack_inputs_1` = `input_type_ids`, `bert_pack_inputs_2` = `input_word_ids`, Model Garden's names).
Its text normalisation is Model Garden's, not the original's `preprocess_text`: SentencePiece text is NFD-
normalised with non-spacing marks dropped, then (do_lower_case) Unicode case-folded, and tokenized without the
original's digit-comma rule; so a few inputs get other ids than `FullTokenizer` gives ("ß" folds to "ss",
"1,000," is not re-split, compatibility characters such as "ﬁ" are kept). Use `--export_type=preprocessing`
for the original's ids.

Both are written with `serving.savedmodel.save_module` (staged, then renamed into place). The encoder's functions
read only the plain `tf.Variable`s they list (the Keras model runs through `stateless_call` with their values),
so the SavedModel holds each weight once and TF Serving's session loader and the TFLite converter can read it.
"""

import os
import tempfile

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf import keras_internals
from albert_tf.checkpoints import ensure_built, model_garden
from albert_tf.checkpoints.name_table import encoder_entries, pretraining_head_entries
from albert_tf.serving.savedmodel import ExportError, checked_ids, save_module

ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
MLM_INPUTS = ENCODER_INPUTS + ("masked_lm_positions",)
SIGNATURE_PREFIX = "albert_encoder"  # the Keras name of Model Garden's AlbertEncoder, which names its outputs
PACK_SIGNATURE_PREFIX = "bert_pack_inputs"
_SENTENCEPIECE_SPECIALS = {"start_of_sequence_id": "[CLS]", "end_of_segment_id": "[SEP]", "padding_id": "<pad>",
                           "mask_id": "[MASK]"}
_WORDPIECE_SPECIALS = {"start_of_sequence_id": "[CLS]", "end_of_segment_id": "[SEP]", "padding_id": "[PAD]",
                       "mask_id": "[MASK]"}


def _node():
    return keras_internals.plain_trackable()


def _ids_spec(names):
    return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in names}


def _keras_style_call(fn, spec):
    """`fn(inputs, training)` as a tf.function `__call__(inputs, training=False, mask=None)` traced for both
    values of `training` (the calling convention of a Keras SavedModel, which TF Hub relies on)."""
    @tf.function(autograph=False)
    def call(inputs, training=False, mask=None):
        del mask  # accepted as Keras models accept it
        return fn(inputs, training)

    for training in (False, True):
        call.get_concrete_function(spec, training)
    return call


def signature_outputs(outputs, prefix):
    """A signature's outputs named as Keras names a functional model's: `prefix`, `prefix_1`, ... in the order of
    `tf.nest.flatten(outputs)` (dict keys sorted, lists in order)."""
    return {(prefix if i == 0 else f"{prefix}_{i}"): t for i, t in enumerate(tf.nest.flatten(outputs))}


# ------------------------------------------------------------------------------------------------------------------
# The encoder.

class _StatelessPart:
    """A built Keras layer run on Model Garden tf.Variables: `values()` are its weights in the order of
    `layer.trainable_variables` (each a read of the Model Garden variable reshaped to the Keras shape)."""

    def __init__(self, layer, entries, variables):
        by_id = {id(e.variable): e for e in entries}
        self.layer = layer
        self.sources = []
        for variable in layer.trainable_variables:
            entry = by_id.get(id(variable))
            if entry is None or entry.name not in variables:
                raise ExportError(f"weight {variable.path} has no place in Model Garden's ALBERT")
            self.sources.append((variables[entry.name], tuple(variable.shape)))
        # Dropout seed states (the only non-trainable variables): copied, and advanced by training calls.
        self.seeds = [tf.Variable(v.numpy(), trainable=False, name=f"dropout_seed_{i}")
                      for i, v in enumerate(layer.non_trainable_variables)]

    def __call__(self, *args, **kwargs):
        values = [tf.reshape(source, shape) for source, shape in self.sources]
        outputs, seeds = self.layer.stateless_call(values, [s.read_value() for s in self.seeds], *args, **kwargs)
        if kwargs.get("training"):  # inference draws no masks: its states come back unchanged
            for state, value in zip(self.seeds, seeds):
                state.assign(value)  # run by tf.function with the call (automatic control dependencies)
        return outputs


def _model_garden_variables(model, num_heads):
    """({TF1 name: Model Garden-named tf.Variable}, the TF1 entries, the encoder's variables, the MLM head's),
    the lists in Model Garden's order."""
    encoder = getattr(model, "albert", model)
    entries = encoder_entries(encoder)
    if hasattr(model, "masked_lm"):
        entries += [e for e in pretraining_head_entries(model) if e.name.startswith("cls/predictions/")]
    arrays = {e.name: e.to_tf1(e.variable.numpy()) for e in entries}
    by_tf1, lists = {}, {"encoder": [], "mlm": []}
    for part, table in (("encoder", model_garden.ENCODER_TABLE), ("mlm", model_garden.MLM_TABLE)):
        for mg_name, tf1_name, layout in table:
            if tf1_name not in arrays:
                continue
            value = model_garden.from_tf1(tf1_name, layout, arrays[tf1_name], num_heads)
            by_tf1[tf1_name] = tf.Variable(value.astype("float32"), name=mg_name)
            lists[part].append(by_tf1[tf1_name])
    return by_tf1, entries, lists["encoder"], lists["mlm"]


def _check_exportable(model):
    encoder = getattr(model, "albert", model)
    c = encoder.config
    if c.num_hidden_groups != 1 or c.inner_group_num != 1:
        raise ExportError(f"Model Garden's ALBERT has one shared Transformer block; this model has "
                          f"num_hidden_groups {c.num_hidden_groups} and inner_group_num {c.inner_group_num}")
    return encoder, c


def _attach_tokenizer(root, spm_model_file, vocab_file, do_lower_case):
    tokenizer_file = spm_model_file or vocab_file
    if not tokenizer_file:
        raise ExportError("the tfhub export needs the tokenizer: spm_model_file (SentencePiece) or vocab_file "
                          "(WordPiece)")
    if not tf.io.gfile.exists(tokenizer_file):
        raise ExportError(f"tokenizer file not found: {tokenizer_file}")
    if spm_model_file:
        root.sp_model_file = tf.saved_model.Asset(spm_model_file)
    else:
        root.vocab_file = tf.saved_model.Asset(vocab_file)
        root.do_lower_case = tf.Variable(bool(do_lower_case), trainable=False, name="do_lower_case")


def export_tfhub(model, export_dir, spm_model_file=None, vocab_file=None, do_lower_case=True, overwrite=False):
    """Writes `model` (an `AlbertModel`, or an `AlbertForPretraining` for the `mlm` sub-object) with Model
    Garden's TF-Hub encoder interface (see the module docstring); returns `export_dir`.

    Raises ExportError for a model Model Garden's ALBERT cannot express (more than one group or inner group), a
    missing tokenizer, or an existing `export_dir` without `overwrite`.
    """
    encoder, config = _check_exportable(model)
    ensure_built(model)
    by_tf1, entries, encoder_variables, mlm_variables = _model_garden_variables(model, config.num_attention_heads)
    run_encoder = _StatelessPart(encoder, entries, by_tf1)
    max_positions = config.max_position_embeddings

    def encode(inputs, training):
        outputs = run_encoder({"input_ids": checked_ids(inputs["input_word_ids"], max_positions),
                               "input_mask": inputs["input_mask"], "segment_ids": inputs["input_type_ids"]},
                              training=training)
        return {"sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
                "pooled_output": tf.cast(outputs["pooled_output"], tf.float32),
                "encoder_outputs": [tf.cast(t, tf.float32) for t in outputs["encoder_outputs"]]}

    def encode_with_default(inputs, training):
        outputs = encode(inputs, training)
        outputs["default"] = outputs["pooled_output"]
        return outputs

    root = _node()
    root.variables = list(encoder_variables)
    root.trainable_variables = list(encoder_variables)
    root.dropout_seeds = list(run_encoder.seeds)
    root.__call__ = _keras_style_call(encode_with_default, _ids_spec(ENCODER_INPUTS))

    if hasattr(model, "masked_lm"):
        run_mlm = _StatelessPart(model.masked_lm, entries, by_tf1)
        word_table = by_tf1["bert/embeddings/word_embeddings"]

        def mlm(inputs, training):
            outputs = encode(inputs, training)
            outputs["mlm_logits"] = tf.cast(run_mlm(outputs["sequence_output"], inputs["masked_lm_positions"],
                                                    tf.convert_to_tensor(word_table)), tf.float32)
            return outputs

        root.mlm = _node()
        root.mlm.variables = encoder_variables + mlm_variables
        root.mlm.trainable_variables = encoder_variables + mlm_variables
        root.mlm.__call__ = _keras_style_call(mlm, _ids_spec(MLM_INPUTS))

    @tf.function(input_signature=list(_ids_spec(ENCODER_INPUTS).values()))
    def serving_default(input_word_ids, input_mask, input_type_ids):
        outputs = encode_with_default({"input_word_ids": input_word_ids, "input_mask": input_mask,
                                       "input_type_ids": input_type_ids}, False)
        return signature_outputs(outputs, SIGNATURE_PREFIX)

    _attach_tokenizer(root, spm_model_file, vocab_file, do_lower_case)
    with tempfile.TemporaryDirectory() as tmp:
        config_file = os.path.join(tmp, model_garden.CONFIG_NAME)
        config.to_json_file(config_file)
        root.albert_config_file = tf.saved_model.Asset(config_file)
        return save_module(root, export_dir, {"serving_default": serving_default}, overwrite=overwrite)


# ------------------------------------------------------------------------------------------------------------------
# The preprocessing model.

class _Tokenizer:
    """Model Garden's tokenization: strings [batch] -> int32 ragged ids, and the special tokens' ids."""

    def __init__(self, spm_model_file, vocab_file, do_lower_case):
        self.do_lower_case = bool(do_lower_case)
        self.sentencepiece = bool(spm_model_file)
        if spm_model_file:
            with tf.io.gfile.GFile(spm_model_file, "rb") as f:
                proto = f.read()
            try:
                self.tokenizer = tf_text.SentencepieceTokenizer(model=proto, out_type=tf.int32)
                self.specials = self._sentencepiece_specials()
            except (tf.errors.OpError, ValueError) as err:
                raise ExportError(f"{spm_model_file} is not a SentencePiece model: {err}") from None
            self.resources = [self.tokenizer]
        else:
            self.vocab_asset = tf.saved_model.Asset(vocab_file)
            initializer = tf.lookup.TextFileInitializer(
                self.vocab_asset, key_dtype=tf.string, key_index=tf.lookup.TextFileIndex.WHOLE_LINE,
                value_dtype=tf.int64, value_index=tf.lookup.TextFileIndex.LINE_NUMBER)
            # Anonymous: a named table is shared by name, and TF names it after the Asset object's address, which a
            # later tokenizer in the same process can get again (it then read the earlier vocabulary).
            self.table = tf.lookup.StaticHashTable(initializer, default_value=-1, experimental_is_anonymous=True)
            self.tokenizer = tf_text.BertTokenizer(self.table, lower_case=self.do_lower_case)
            self.specials = self._wordpiece_specials(vocab_file)
            self.resources = [self.vocab_asset, self.table, self.tokenizer]
        for key in ("start_of_sequence_id", "end_of_segment_id", "padding_id"):
            if key not in self.specials:
                names = _SENTENCEPIECE_SPECIALS if self.sentencepiece else _WORDPIECE_SPECIALS
                raise ExportError(f"{spm_model_file or vocab_file} has no {names[key]} token ({key})")

    def _sentencepiece_specials(self):
        tokens = list(_SENTENCEPIECE_SPECIALS.values())
        ids = self.tokenizer.string_to_id(tf.constant(tokens)).numpy()
        back = self.tokenizer.id_to_string(tf.constant(ids)).numpy()
        specials = {"vocab_size": int(self.tokenizer.vocab_size().numpy())}
        for (key, token), i, token_back in zip(_SENTENCEPIECE_SPECIALS.items(), ids, back):
            if token_back.decode("utf-8") == token:  # string_to_id gives <unk>'s id for an unknown piece
                specials[key] = int(i)
        return specials

    def _wordpiece_specials(self, vocab_file):
        ids = self.table.lookup(tf.constant(list(_WORDPIECE_SPECIALS.values()))).numpy()
        specials = {"vocab_size": int(self.table.size().numpy())}
        specials.update({key: int(i) for key, i in zip(_WORDPIECE_SPECIALS, ids) if i >= 0})
        if not specials["vocab_size"]:
            raise ExportError(f"vocabulary file {vocab_file} is empty")
        return specials

    def __call__(self, sentences):
        batch_size = tf.shape(sentences)[0]
        if self.sentencepiece:
            text = tf_text.normalize_utf8(sentences, "NFD")
            text = tf.strings.regex_replace(text, r"\p{Mn}", "")
            if self.do_lower_case:
                text = tf_text.case_fold_utf8(text)
            tokens = self.tokenizer.tokenize(text)
        else:
            tokens = tf.cast(self.tokenizer.tokenize(sentences), tf.int32)
        # Fix the number of rows, which the ops leave unknown.
        return tf.RaggedTensor.from_row_splits(tokens.values, tf.reshape(tokens.row_splits, [batch_size + 1]))


def pack_segments(segments, seq_length, specials):
    """One or two int32 ragged segments [batch, (pieces)] (or [batch, (words), (pieces)]) -> the encoder's
    inputs [batch, seq_length]: [CLS] a [SEP] (b [SEP]), segments truncated round robin, padded."""
    if not isinstance(segments, (list, tuple)):
        segments = [segments]
    segments = [s.merge_dims(1, -1) if s.shape.rank > 2 else s for s in segments]
    trimmed = tf_text.RoundRobinTrimmer(seq_length - (len(segments) + 1)).trim(segments)
    ids, type_ids = tf_text.combine_segments(trimmed, start_of_sequence_id=specials["start_of_sequence_id"],
                                             end_of_segment_id=specials["end_of_segment_id"])
    word_ids, _ = tf_text.pad_model_inputs(ids, seq_length, pad_value=specials["padding_id"])
    type_ids, mask = tf_text.pad_model_inputs(type_ids, seq_length, pad_value=0)
    shape = tf.stack([segments[0].nrows(out_type=tf.int32), tf.cast(seq_length, tf.int32)])
    return {"input_word_ids": tf.reshape(word_ids, shape), "input_mask": tf.reshape(mask, shape),
            "input_type_ids": tf.reshape(type_ids, shape)}


def export_tfhub_preprocessing(export_dir, spm_model_file=None, vocab_file=None, do_lower_case=True,
                               seq_length=128, overwrite=False):
    """Writes the text-in model with Model Garden's preprocessing interface (see the module docstring); returns
    `export_dir`. `seq_length` is the root call's output length and `bert_pack_inputs`' default."""
    if not (spm_model_file or vocab_file):
        raise ExportError("the tfhub_preprocessing export needs the tokenizer: spm_model_file (SentencePiece) or "
                          "vocab_file (WordPiece)")
    tokenizer_file = spm_model_file or vocab_file
    if not tf.io.gfile.exists(tokenizer_file):
        raise ExportError(f"tokenizer file not found: {tokenizer_file}")
    if seq_length < 3:
        raise ExportError(f"seq_length {seq_length} leaves no room for text between [CLS] and [SEP]")
    tokenizer = _Tokenizer(spm_model_file=spm_model_file, vocab_file=None if spm_model_file else vocab_file,
                           do_lower_case=do_lower_case)
    specials = dict(tokenizer.specials)
    sentences_spec = tf.TensorSpec([None], tf.string, name="sentences")

    root = _node()
    root.tokenizer_resources = tokenizer.resources
    root.tokenize = _node()
    root.tokenize.__call__ = _keras_style_call(lambda sentences, training: tokenizer(sentences), sentences_spec)
    root.tokenize.get_special_tokens_dict = _node()
    root.tokenize.get_special_tokens_dict.__call__ = tf.function(
        lambda: {k: tf.constant(v, tf.int32) for k, v in specials.items()}, input_signature=[])

    @tf.function(autograph=False)
    def bert_pack_inputs(inputs, seq_length=seq_length):
        return pack_segments(inputs, seq_length, specials)

    for ragged_rank in (1, 2):
        for num_segments in (1, 2):
            bert_pack_inputs.get_concrete_function(
                [tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32, ragged_rank=ragged_rank)] * num_segments,
                seq_length=tf.TensorSpec([], tf.int32, name="seq_length"))
    root.bert_pack_inputs = _node()
    root.bert_pack_inputs.__call__ = bert_pack_inputs

    def preprocess(sentences, training):
        del training
        return pack_segments([tokenizer(sentences)], seq_length, specials)

    root.__call__ = _keras_style_call(preprocess, sentences_spec)

    @tf.function(input_signature=[sentences_spec])
    def serving_default(sentences):
        return signature_outputs(preprocess(sentences, False), PACK_SIGNATURE_PREFIX)

    return save_module(root, export_dir, {"serving_default": serving_default}, overwrite=overwrite)
