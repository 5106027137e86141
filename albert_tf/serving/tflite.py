"""TFLite: the id-input model (an encoder, a task model, or an exported SavedModel) as a flatbuffer with a fixed
sequence length, in float32 or with dynamic-range int8 weights, checked against the model it came from.

The conversion uses TFLite's builtin ops only (ALBERT's encoder and heads need nothing else), so the file runs
on any TFLite runtime. A model that needs TensorFlow ops is refused naming them, unless `allow_select_tf_ops`,
which converts with SELECT_TF_OPS (the file then needs the TensorFlow-ops delegate, "Flex").

`TFLiteModel` runs one; `compare_outputs` measures agreement and accuracy.
"""

import dataclasses
import os
import re
import shutil
import tempfile
import warnings

import numpy as np
import tensorflow as tf

from albert_tf import fileio
from albert_tf.checkpoints import ensure_built
from albert_tf.serving.loading import load_saved_model
from albert_tf.serving.savedmodel import ID_FEATURES, ExportError, refusal, serving_root

QUANTIZE_MODES = (None, "dynamic_int8")
_NOT_BUILTIN = re.compile(r"'(tf\.[A-Za-z0-9_]+)' op is neither a custom op nor a flex op")

@dataclasses.dataclass
class TFLiteExport:
    """What `export_tflite` wrote: the file, its size, its fixed input shape, its outputs, and (with `verify`)
    the largest absolute difference of each float output from the source model on sample inputs, or why it
    could not be measured (`unverified`: SELECT_TF_OPS without a Flex delegate in this Python)."""

    path: str
    size_bytes: int
    quantize: str
    seq_length: int
    input_shape: tuple
    outputs: tuple
    max_abs_diff: dict = None
    select_tf_ops: bool = False
    unverified: str = None

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
        if self.unverified:
            lines.append(f"  not verified: {self.unverified}")
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
        loaded = load_saved_model(path, ExportError)
        if "serving_default" not in loaded.signatures:
            raise ExportError(f"the SavedModel in {path} has no serving_default signature")
        signature = loaded.signatures["serving_default"]
        specs = signature.structured_input_signature[1]
        if set(specs) != set(ID_FEATURES):
            raise ExportError(f"the SavedModel's serving_default takes {', '.join(sorted(specs))}; TFLite export "
                              f"needs the id-input model ({', '.join(ID_FEATURES)})")
        outputs = {name: spec for name, spec in signature.structured_outputs.items()
                   if spec.dtype.is_floating or spec.dtype.is_integer}
        inner = specs["input_ids"].shape.as_list()[1:-1]  # e.g. RACE's number of choices
        if None in inner:
            raise ExportError(f"the SavedModel's input_ids have shape {specs['input_ids'].shape}; TFLite export "
                              "needs every dimension but the batch and the sequence fixed")

        def fn(**inputs):
            result = signature(**inputs)
            return {name: result[name] for name in outputs}

        dims = [None] + inner + [seq_length]
        return fn, loaded, dims, None, None

    model = model_or_savedmodel
    if not hasattr(model, "config"):
        raise ExportError(f"cannot export a {type(model).__name__} to TFLite: expected an albert_tf model or a "
                          "SavedModel directory")

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
    """Deterministic id inputs of `shape` (batch first) with varied real lengths and both segments.

    Real ids are drawn from [5, min(vocab_size or 1000, 30000)): past the five special pieces and inside the
    vocabulary; each row holds at least [CLS] and one piece, and the first row is full.
    """
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


def ops_not_builtin(error):
    """The TensorFlow ops a failed builtin-only conversion could not express (sorted names such as "tf.Cumprod"),
    from the converter's structured errors or, failing those, its message."""
    names = {e.operator.name for e in getattr(error, "errors", None) or ()
             if "neither a custom op nor a flex op" in e.error_message and e.operator.name}
    return sorted(names or set(_NOT_BUILTIN.findall(str(error))))


def _convert(converter, allow_select_tf_ops):
    """(flatbuffer, whether SELECT_TF_OPS was needed): builtin ops first; SELECT_TF_OPS only if allowed."""
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    try:
        return converter.convert(), False
    except Exception as err:  # pylint: disable=broad-except  (ConverterError and friends)
        ops = ops_not_builtin(err)
        if not ops:
            first = next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)
            raise ExportError(f"TFLite conversion failed: {first[:500]}") from None
        if not allow_select_tf_ops:
            raise ExportError(f"the model needs TensorFlow ops that are not TFLite builtins: {', '.join(ops)}; "
                              "pass --allow_select_tf_ops (allow_select_tf_ops=True) to convert with "
                              "SELECT_TF_OPS, which needs the TensorFlow-ops (Flex) delegate at run time") from None
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS, tf.lite.OpsSet.SELECT_TF_OPS]
    return converter.convert(), True


def export_tflite(model_or_savedmodel, path, quantize=None, seq_length=128, overwrite=False, verify=True,
                  allow_select_tf_ops=False):
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
      allow_select_tf_ops: if the builtin TFLite ops cannot express the model, convert with SELECT_TF_OPS
        (recorded in the result) instead of raising an ExportError that names the ops. ALBERT's encoder and
        heads convert with builtin ops only.
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
            raise ExportError(f"the SavedModel does not take seq_length {seq_length}: {refusal(err)}") from None

    module = tf.Module()
    module.model = owner
    work = tempfile.mkdtemp(prefix="albert_tflite_")
    try:
        tf.saved_model.save(serving_root(module), work, signatures={"serving_default": serve})
        converter = tf.lite.TFLiteConverter.from_saved_model(work)
        if quantize == "dynamic_int8":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        flatbuffer, select_tf_ops = _convert(converter, allow_select_tf_ops)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    with fileio.atomic_write(path, "wb") as f:
        f.write(flatbuffer)

    lite = TFLiteModel(path)
    result = TFLiteExport(path=path, size_bytes=os.path.getsize(path), quantize=quantize, seq_length=seq_length,
                          input_shape=tuple(-1 if d is None else d for d in dims), outputs=lite.output_names,
                          select_tf_ops=select_tf_ops)
    if verify:
        sample = sample_id_inputs([2] + dims[1:], vocab_size)
        expected = {k: v.numpy() for k, v in serve(**{k: tf.constant(v) for k, v in sample.items()}).items()}
        try:
            got = lite(**sample)
        except RuntimeError as err:
            if not select_tf_ops or "Flex" not in str(err):
                raise
            result.unverified = "this Python's TFLite interpreter has no Flex delegate to run SELECT_TF_OPS"
            return result
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
            result["reference_accuracy"] = float(np.mean(ref_pred == labels))
            result["candidate_accuracy"] = float(np.mean(cand_pred == labels))
            result["accuracy_change"] = result["candidate_accuracy"] - result["reference_accuracy"]
    return result
