"""Exports for serving: SavedModels that TF Serving (or plain `tensorflow` + `tensorflow_text`) runs without this
code, and TFLite flatbuffers.

`export_encoder` writes a TF-Hub-style encoder:
  * `serving_default`: int32 `input_ids`, `input_mask`, `segment_ids` [batch, seq] (any seq up to
    max_position_embeddings) -> `sequence_output` [batch, seq, H], `pooled_output` [batch, H];
  * `mlm` (pretraining models): the same plus `masked_lm_positions` [batch, P] -> `mlm_logits` [batch, P, V];
  * `sop` (pretraining models): -> `sop_log_probs` [batch, 2];
  * `tokenization_info` (when a tokenizer file is given): the tokenizer file, attached as an asset, and
    `do_lower_case`, so the tokenizer can be rebuilt from the export alone.

`export_preprocessing` writes the text-in half of a two-model pipeline (preprocessing -> encoder, as TF Hub's
BERT preprocessors): `serving_default` takes string `text` [batch], `encode_pair` strings `text_a`, `text_b`
[batch], both returning int32 `input_ids`, `input_mask`, `segment_ids` [batch, max_seq_length] with the ids of
the Python tokenizer (`albert_tf.text_layers.AlbertTextPreprocessor`), plus `tokenization_info`.

`export_tflite` converts the id-input model (an encoder or a task model, or an exported SavedModel) to a TFLite
flatbuffer with a fixed sequence length, in float32 or with dynamic-range int8 weights, and checks it against the
model it came from (`TFLiteModel` runs one; `compare_outputs` measures agreement and accuracy).

Every signature declares its inputs as `tf.TensorSpec`s, so a call with another dtype or rank is rejected by the
signature itself (TF Serving answers 400); a sequence longer than max_position_embeddings fails with an
`InvalidArgumentError` saying so.

Keras 3 and SavedModels. A Keras 3 variable attached to a `tf.Module` is written to a SavedModel as a second
variable initialised from the first: `tf.saved_model.load` copes, but the session-based loader of TF Serving,
`saved_model_cli run` and the TFLite converter do not ("Could not find variable ...", or a TFLite model whose
weights are uninitialised; keras-team/keras#20095). `save_module` therefore saves a mirror of the module in which
every Keras layer is replaced by a plain trackable node holding the layer's underlying `tf.Variable`s (each once,
shared weights included) and its other resources; the functions are unchanged. Exports are written to a temporary
directory beside the target and renamed into place when complete.
"""

import dataclasses
import os
import shutil
import tempfile
import warnings

import numpy as np
import tensorflow as tf

QUANTIZE_MODES = (None, "dynamic_int8")
ID_FEATURES = ("input_ids", "input_mask", "segment_ids")


class ExportError(ValueError):
    """The export cannot be written as asked (existing directory, bad model); the message says why."""


def _ids_spec(name):
    return tf.TensorSpec([None, None], tf.int32, name=name)


# ------------------------------------------------------------------------------------------------------------------
# Writing SavedModels.

def prepare_export_dir(export_dir, overwrite):
    """Checks `export_dir` and returns a fresh temporary directory beside it to write into."""
    export_dir = os.path.abspath(export_dir)
    if os.path.isfile(export_dir):
        raise ExportError(f"export directory {export_dir} is a file")
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


def _keras_types():
    import keras  # pylint: disable=import-outside-toplevel

    try:
        from keras.src.backend.tensorflow.trackable import KerasAutoTrackable  # pylint: disable=import-outside-toplevel
        objects = (KerasAutoTrackable, keras.layers.Layer)
    except ImportError:  # pragma: no cover - layout of a future Keras
        objects = (keras.layers.Layer,)
    return keras.Variable, objects


_FUNCTION_TYPES = (tf.types.experimental.PolymorphicFunction, tf.types.experimental.ConcreteFunction)


def _mirror_child(child, memo, types):
    """`child` with Keras objects replaced by their mirrors; None if nothing trackable is left."""
    if isinstance(child, (list, tuple)):
        items = [c for c in (_mirror_child(x, memo, types) for x in child) if c is not None]
        return items or None
    if isinstance(child, dict):
        items = {str(k): v for k, v in ((k, _mirror_child(v, memo, types)) for k, v in child.items())
                 if v is not None}
        return items or None
    if isinstance(child, _FUNCTION_TYPES):
        return None  # Keras' own traced functions (e.g. `_default_save_signature`) are not part of the export
    if isinstance(child, tf.__internal__.tracking.Trackable):
        return _mirror(child, memo, types)
    return None


def _mirror(obj, memo, types):
    key = id(obj)
    if key in memo:
        return memo[key]
    variable_type, object_types = types
    if isinstance(obj, variable_type):
        result = obj.value  # the tf.Variable the graph reads
    elif isinstance(obj, object_types):
        result = tf.__internal__.tracking.AutoTrackable()
        memo[key] = result  # before the children: shared sub-layers map to one node
        # "checkpoint" children: the weights and resources, without listing (and so tracing) Keras' functions.
        for name, child in obj._trackable_children("checkpoint").items():  # pylint: disable=protected-access
            mirrored = _mirror_child(child, memo, types)
            if mirrored is not None:
                setattr(result, name, mirrored)
    elif isinstance(obj, tf.Module):  # may hold Keras objects: mirrored too, keeping its functions
        result = _mirror_module(obj, memo, types)
    else:
        result = obj
    memo[key] = result
    return result


def _module_functions(module):
    """The tf.functions of `module`: its attributes and its class's decorated methods (bound to it)."""
    found = {}
    for klass in reversed(type(module).__mro__):
        for name, value in vars(klass).items():
            if isinstance(value, _FUNCTION_TYPES):
                found[name] = getattr(module, name)
    for name, value in vars(module).items():
        if isinstance(value, _FUNCTION_TYPES):
            found[name] = value
    return found


def _mirror_module(module, memo, types):
    result = tf.__internal__.tracking.AutoTrackable()
    memo[id(module)] = result
    for name, child in module._trackable_children("checkpoint").items():  # pylint: disable=protected-access
        mirrored = _mirror_child(child, memo, types)
        if mirrored is not None:
            setattr(result, name, mirrored)
    for name, function in _module_functions(module).items():
        setattr(result, name, function)
    return result


def serving_root(module):
    """A trackable copy of `module` (a `tf.Module`) for `tf.saved_model.save` in which Keras objects are mirrored by
    plain nodes holding their `tf.Variable`s and resources (see the module docstring); its functions (and those of
    nested `tf.Module`s) are the originals.

    Children are listed without tracing anything: each function is traced once, when the SavedModel is written.
    """
    return _mirror_module(module, {}, _keras_types())


def save_module(module, export_dir, signatures, overwrite=False):
    """`tf.saved_model.save` of `module` (through `serving_root`) into `export_dir`, atomically."""
    tmp_dir = prepare_export_dir(export_dir, overwrite)
    try:
        tf.saved_model.save(serving_root(module), tmp_dir, signatures=signatures)
        return publish(tmp_dir, export_dir)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise


def attach_tokenizer(module, tokenizer_file, do_lower_case):
    """Adds the tokenizer file as an asset and a `tokenization_info` function returning its path and
    `do_lower_case` (the original hub module's signature)."""
    if not tf.io.gfile.exists(tokenizer_file):
        raise ExportError(f"tokenizer file not found: {tokenizer_file}")
    module.tokenizer_asset = tf.saved_model.Asset(tokenizer_file)
    module.do_lower_case = tf.Variable(bool(do_lower_case), trainable=False, name="do_lower_case")

    @tf.function(input_signature=[])
    def tokenization_info():
        return {"vocab_file": module.tokenizer_asset.asset_path, "do_lower_case": module.do_lower_case}

    module.tokenization_info = tokenization_info
    return tokenization_info


def _length_check(input_ids, max_positions, axis=1):
    return tf.debugging.assert_less_equal(
        tf.shape(input_ids)[axis], max_positions,
        message=f"sequence length exceeds max_position_embeddings ({max_positions})")


# ------------------------------------------------------------------------------------------------------------------
# Encoder and preprocessing SavedModels.

def export_encoder(model, export_dir, tokenizer_file=None, do_lower_case=True, overwrite=False):
    """Exports an `AlbertModel` or `AlbertForPretraining` (see module docstring); returns the directory.

    A task model (classifier, SQuAD, RACE) exports its encoder (`model.albert`): the fine-tuned encoder weights,
    without the head.
    """
    encoder = getattr(model, "albert", model)
    module = tf.Module()
    module.model = model
    max_positions = encoder.config.max_position_embeddings

    @tf.function(input_signature=[_ids_spec("input_ids"), _ids_spec("input_mask"), _ids_spec("segment_ids")])
    def serve(input_ids, input_mask, segment_ids):
        with tf.control_dependencies([_length_check(input_ids, max_positions)]):
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
            with tf.control_dependencies([_length_check(input_ids, max_positions)]):
                outputs = model({"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
                                 "masked_lm_positions": masked_lm_positions}, training=False)
            return {"mlm_logits": outputs["mlm_logits"]}

        @tf.function(input_signature=[_ids_spec("input_ids"), _ids_spec("input_mask"), _ids_spec("segment_ids")])
        def sop(input_ids, input_mask, segment_ids):
            with tf.control_dependencies([_length_check(input_ids, max_positions)]):
                outputs = encoder({"input_ids": input_ids, "input_mask": input_mask,
                                   "segment_ids": segment_ids}, training=False)
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
    # pylint: disable=import-outside-toplevel
    from albert_tf.text_layers import AlbertTextPreprocessor, TextPreprocessorModule

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


def saved_model_size(export_dir):
    """Bytes on disk: {"variables": ..., "total": ...} (the variables are the weights, stored once each)."""
    total = variables = 0
    for dirpath, _, files in os.walk(export_dir):
        for name in files:
            size = os.path.getsize(os.path.join(dirpath, name))
            total += size
            if os.path.relpath(dirpath, export_dir).split(os.sep)[0] == "variables":
                variables += size
    return {"variables": variables, "total": total}


# ------------------------------------------------------------------------------------------------------------------
# TFLite.

@dataclasses.dataclass
class TFLiteExport:
    """What `export_tflite` wrote: the file, its size, its fixed input shape, its outputs, and (with `verify`)
    the largest absolute difference of each float output from the source model on sample inputs."""

    path: str
    size_bytes: int
    quantize: str
    seq_length: int
    input_shape: tuple
    outputs: tuple
    max_abs_diff: dict = None
    select_tf_ops: bool = False

    def summary(self):
        kind = "float32" if not self.quantize else f"{self.quantize} (dynamic-range int8 weights)"
        lines = [f"TFLite {kind}: {self.path}", f"  size: {self.size_bytes / 1e6:.2f} MB",
                 f"  inputs: {', '.join(ID_FEATURES)} int32 {list(self.input_shape)} (-1 = any batch size)",
                 f"  outputs: {', '.join(self.outputs)}"]
        if self.select_tf_ops:
            lines.append("  uses SELECT_TF_OPS (needs the TensorFlow-ops delegate)")
        if self.max_abs_diff:
            diffs = ", ".join(f"{k} {v:.3g}" for k, v in sorted(self.max_abs_diff.items()))
            lines.append(f"  max abs diff vs the source model: {diffs}")
        return "\n".join(lines)


class TFLiteModel:
    """Runs a TFLite flatbuffer's `serving_default` signature: `model(input_ids=..., ...)` -> {name: array}.

    Inputs are converted to the signature's dtypes; a batch of another size is accepted (the batch dimension is
    resized); other shapes are refused with a ValueError naming the input.
    """

    def __init__(self, path_or_bytes, num_threads=None):
        try:  # LiteRT's interpreter when installed (`pip install ai-edge-litert`), else TensorFlow's own
            from ai_edge_litert.interpreter import Interpreter  # pylint: disable=import-outside-toplevel
        except ImportError:
            Interpreter = tf.lite.Interpreter  # pylint: disable=invalid-name
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tf.lite.Interpreter announces its move to ai_edge_litert
            kwargs = {"num_threads": num_threads} if num_threads else {}
            if isinstance(path_or_bytes, (bytes, bytearray)):
                self.interpreter = Interpreter(model_content=bytes(path_or_bytes), **kwargs)
            else:
                self.interpreter = Interpreter(model_path=str(path_or_bytes), **kwargs)
        signatures = self.interpreter.get_signature_list()
        if "serving_default" not in signatures:
            raise ExportError(f"TFLite model has no serving_default signature (has {', '.join(signatures)})")
        self.runner = self.interpreter.get_signature_runner("serving_default")
        self.input_details = self.runner.get_input_details()
        self.output_names = tuple(sorted(self.runner.get_output_details()))

    @property
    def input_shapes(self):
        return {name: tuple(int(d) for d in detail["shape_signature"]) for name, detail in self.input_details.items()}

    def __call__(self, **inputs):
        missing = sorted(set(self.input_details) - set(inputs))
        unknown = sorted(set(inputs) - set(self.input_details))
        if missing or unknown:
            raise ValueError(f"TFLite model inputs are {', '.join(sorted(self.input_details))}; missing: "
                             f"{', '.join(missing) or 'none'}, unknown: {', '.join(unknown) or 'none'}")
        feeds = {}
        for name, detail in self.input_details.items():
            value = np.asarray(inputs[name])
            expected = detail["shape_signature"]
            if value.ndim != len(expected) or any(e != -1 and e != v for e, v in zip(expected, value.shape)):
                raise ValueError(f"input {name!r} has shape {list(value.shape)}; the TFLite model takes "
                                 f"{[int(e) for e in expected]} (-1 = any)")
            feeds[name] = value.astype(detail["dtype"])
        return self.runner(**feeds)


def _reference_and_shape(model_or_savedmodel, seq_length):
    """(fn of the id inputs -> {name: float32 tensor}, trackable to keep its weights, [dims] of each id input,
    max positions or None, vocab size or None) for a Keras model or a SavedModel directory."""
    if isinstance(model_or_savedmodel, (str, os.PathLike)):
        path = os.fspath(model_or_savedmodel)
        if not tf.saved_model.contains_saved_model(path):
            raise ExportError(f"no SavedModel in {path}")
        loaded = tf.saved_model.load(path)
        if "serving_default" not in loaded.signatures:
            raise ExportError(f"the SavedModel in {path} has no serving_default signature")
        signature = loaded.signatures["serving_default"]
        specs = signature.structured_input_signature[1]
        if set(specs) != set(ID_FEATURES):
            raise ExportError(f"the SavedModel's serving_default takes {', '.join(sorted(specs))}; TFLite export "
                              f"needs the id-input model ({', '.join(ID_FEATURES)})")
        outputs = {name: spec for name, spec in signature.structured_outputs.items()
                   if spec.dtype.is_floating or spec.dtype.is_integer}
        rank = specs["input_ids"].shape.rank

        def fn(**inputs):
            result = signature(**inputs)
            return {name: result[name] for name in outputs}

        dims = [None] * (rank - 1) + [seq_length]
        return fn, loaded, dims, None, None

    model = model_or_savedmodel
    if not hasattr(model, "config"):
        raise ExportError(f"cannot export a {type(model).__name__} to TFLite: expected an albert_tf model or a "
                          "SavedModel directory")
    from albert_tf.checkpoints import ensure_built  # pylint: disable=import-outside-toplevel

    ensure_built(model)
    encoder_only = type(model).__name__ in ("AlbertModel", "AlbertForPretraining")
    encoder = getattr(model, "albert", model)

    def fn(**inputs):
        if encoder_only:
            outputs = encoder(inputs, training=False)
            return {"sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
                    "pooled_output": tf.cast(outputs["pooled_output"], tf.float32)}
        outputs = model(inputs, training=False)
        if isinstance(outputs, dict):
            return {name: tf.cast(value, tf.float32) if value.dtype.is_floating else value
                    for name, value in outputs.items()}
        logits = tf.cast(outputs, tf.float32)
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}

    dims = [None, model.num_choices, seq_length] if hasattr(model, "num_choices") else [None, seq_length]
    return fn, model, dims, model.config.max_position_embeddings, model.config.vocab_size


def sample_id_inputs(shape, vocab_size=None, seed=0):
    """Deterministic id inputs of `shape` (batch first) with varied real lengths and both segments."""
    rng = np.random.RandomState(seed)
    seq = shape[-1]
    ids = rng.randint(5, min(vocab_size or 1000, 30000), size=shape).astype(np.int32)
    lengths = rng.randint(max(2, seq // 3), seq + 1, size=shape[:-1])
    lengths.flat[0] = seq  # one full row
    positions = np.arange(seq)
    mask = (positions < lengths[..., None]).astype(np.int32)
    segments = ((positions >= (lengths[..., None] // 2)) & (mask == 1)).astype(np.int32)
    ids[..., 0] = 2  # [CLS]
    return {"input_ids": ids * mask, "input_mask": mask, "segment_ids": segments}


def export_tflite(model_or_savedmodel, path, quantize=None, seq_length=128, overwrite=False, verify=True,
                  allow_select_tf_ops=True):
    """Converts the id-input model to a TFLite flatbuffer at `path`; returns a `TFLiteExport`.

    Args:
      model_or_savedmodel: an `AlbertModel`/`AlbertForPretraining` (-> `sequence_output`, `pooled_output`), a task
        model (`AlbertClassifier` -> `logits`, `probabilities`; SQuAD -> its heads; RACE -> `logits`,
        `probabilities` over [batch, choices, seq] inputs), or a SavedModel directory whose `serving_default`
        takes `input_ids`, `input_mask`, `segment_ids` (its numeric outputs are kept).
      path: the `.tflite` file to write (refused if it exists, unless `overwrite`).
      quantize: None (float32) or "dynamic_int8" (weights stored as int8, dequantized or run with int8 kernels
        at run time: `tf.lite.Optimize.DEFAULT` without a representative dataset).
      seq_length: the fixed sequence length of the inputs (the batch size stays free); at most
        max_position_embeddings.
      verify: run both models on sample inputs and record each float output's max abs difference.
      allow_select_tf_ops: if the builtin TFLite ops cannot express the model, retry with SELECT_TF_OPS (recorded
        in the result; ALBERT's encoder and heads convert with builtin ops only).
    """
    if quantize not in QUANTIZE_MODES:
        raise ExportError(f"unknown quantize mode {quantize!r}; known: none, {', '.join(QUANTIZE_MODES[1:])}")
    path = os.path.abspath(os.fspath(path))
    if os.path.isdir(path):
        raise ExportError(f"{path} is a directory; give the .tflite file to write")
    if os.path.exists(path) and not overwrite:
        raise ExportError(f"{path} exists; pass --overwrite to replace it")
    if seq_length < 2:
        raise ExportError(f"seq_length must be at least 2, got {seq_length}")
    fn, owner, dims, max_positions, vocab_size = _reference_and_shape(model_or_savedmodel, seq_length)
    if max_positions and seq_length > max_positions:
        raise ExportError(f"seq_length {seq_length} exceeds max_position_embeddings {max_positions}")

    specs = [tf.TensorSpec(dims, tf.int32, name=name) for name in ID_FEATURES]

    @tf.function(input_signature=specs)
    def serve(input_ids, input_mask, segment_ids):
        return fn(input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids)

    if max_positions is None:  # a SavedModel: its own check rejects a seq_length it cannot take
        probe = sample_id_inputs([1] + dims[1:-1] + [seq_length])
        try:
            serve(**{k: tf.constant(v) for k, v in probe.items()})
        except tf.errors.InvalidArgumentError as err:
            raise ExportError(f"the SavedModel does not take seq_length {seq_length}: {err.message}") from None

    module = tf.Module()
    module.model = owner
    module.serve = serve
    work = tempfile.mkdtemp(prefix="albert_tflite_")
    select_tf_ops = False
    try:
        tf.saved_model.save(serving_root(module), work, signatures={"serving_default": serve})
        converter = tf.lite.TFLiteConverter.from_saved_model(work)
        if quantize == "dynamic_int8":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        try:
            flatbuffer = converter.convert()
        except Exception as err:  # pylint: disable=broad-except  (ConverterError and friends)
            if not allow_select_tf_ops:
                raise ExportError(f"TFLite conversion with builtin ops failed: {err}") from None
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS, tf.lite.OpsSet.SELECT_TF_OPS]
            flatbuffer = converter.convert()
            select_tf_ops = True
    finally:
        shutil.rmtree(work, ignore_errors=True)

    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(flatbuffer)
    os.replace(tmp, path)

    lite = TFLiteModel(path)
    result = TFLiteExport(path=path, size_bytes=os.path.getsize(path), quantize=quantize, seq_length=seq_length,
                          input_shape=tuple(-1 if d is None else d for d in dims), outputs=lite.output_names,
                          select_tf_ops=select_tf_ops)
    if verify:
        sample = sample_id_inputs([2] + dims[1:], vocab_size)
        expected = {k: v.numpy() for k, v in serve(**{k: tf.constant(v) for k, v in sample.items()}).items()}
        got = lite(**sample)
        result.max_abs_diff = {name: float(np.max(np.abs(got[name].astype(np.float64) - value)))
                               for name, value in expected.items() if value.dtype.kind == "f"}
    return result


def compare_outputs(reference, candidate, features, labels=None, output="logits", batch_size=32):
    """Agreement of two id-input models on `features` (dict of int arrays [N, ...]), batch by batch.

    Args:
      reference, candidate: callables taking `input_ids=`, `input_mask=`, `segment_ids=` (numpy or tensors) and
        returning {name: array}, e.g. a loaded SavedModel signature and a `TFLiteModel`.
      labels: optional int array [N]: accuracies of both are reported.
      output: the output compared by argmax (when 2-D or more) and reported with max abs diff.
    Returns:
      dict with `max_abs_diff`, `argmax_agreement` (fraction), and with labels `reference_accuracy`,
      `candidate_accuracy` and `accuracy_change` (candidate - reference).
    """
    count = len(features["input_ids"])
    ref_out, cand_out = [], []
    for start in range(0, count, batch_size):
        batch = {name: np.asarray(features[name][start:start + batch_size], np.int32) for name in ID_FEATURES}
        ref = reference(**{k: tf.constant(v) for k, v in batch.items()})[output]
        cand = candidate(**batch)[output]
        ref_out.append(np.asarray(ref))
        cand_out.append(np.asarray(cand))
    ref_all, cand_all = np.concatenate(ref_out), np.concatenate(cand_out)
    result = {"examples": count, "output": output,
              "max_abs_diff": float(np.max(np.abs(ref_all.astype(np.float64) - cand_all)))}
    if ref_all.ndim >= 2:
        ref_pred, cand_pred = ref_all.argmax(-1), cand_all.argmax(-1)
        result["argmax_agreement"] = float(np.mean(ref_pred == cand_pred))
        if labels is not None:
            labels = np.asarray(labels)
            result["reference_accuracy"] = float(np.mean(ref_pred == labels))
            result["candidate_accuracy"] = float(np.mean(cand_pred == labels))
            result["accuracy_change"] = result["candidate_accuracy"] - result["reference_accuracy"]
    return result
