"""Writing SavedModels that TF Serving (or plain `tensorflow` + `tensorflow_text`) runs without this code.

Every signature declares its inputs as `tf.TensorSpec`s, so a call with another dtype or rank is rejected by the
signature itself (TF Serving answers 400); a sequence longer than max_position_embeddings fails with an
`InvalidArgumentError` saying so (`checked_ids`).

Keras 3 and SavedModels. A Keras 3 variable attached to a `tf.Module` is written to a SavedModel as a second
variable initialised from the first: `tf.saved_model.load` copes, but the session-based loader of TF Serving,
`saved_model_cli run` and the TFLite converter do not ("Could not find variable ...", or a TFLite model whose
weights are uninitialised; keras-team/keras#20095). `save_module` therefore saves a mirror of the module in which
every Keras layer is replaced by a plain trackable node holding the layer's underlying `tf.Variable`s (each once,
shared weights included) and its other resources; the functions are unchanged. Exports are staged beside the
target (`albert_tf.fileio`) and renamed into place when complete.
"""

import json
import os
import re

import tensorflow as tf

from albert_tf import fileio, keras_internals
from albert_tf.errors import AlbertError

ID_FEATURES = ("input_ids", "input_mask", "segment_ids")


class ExportError(AlbertError):
    """The export cannot be written as asked (existing directory, bad model); the message says why."""


def ids_spec(name):
    return tf.TensorSpec([None, None], tf.int32, name=name)


SAVED_MODEL_ENTRIES = frozenset({"saved_model.pb", "saved_model.pbtxt", "fingerprint.pb", "variables", "assets",
                                 "assets.extra"})
TFLITE_ENTRIES = frozenset({"model.tflite", "tflite_info.json"})


def _entries(directory):
    return {name.rstrip("/") for name in tf.io.gfile.listdir(directory)} - {fileio.STAGING_NAME}


def _is_saved_model(directory):
    entries = _entries(directory)
    return "saved_model.pb" in entries and entries <= SAVED_MODEL_ENTRIES


def is_export(directory):
    """Whether `directory` holds one of this program's exports and nothing else: a SavedModel; a SQuAD export
    (`ids/` and `text/` SavedModels, or numbered versions of them); or a TFLite export (`model.tflite`,
    `tflite_info.json` and the tokenizer file the latter names). Only such a directory may be replaced."""
    entries = _entries(directory)
    if _is_saved_model(directory):
        return True
    if entries and entries <= {"ids", "text"}:
        for name in entries:
            path = os.path.join(directory, name)
            if not tf.io.gfile.isdir(path):
                return False
            versions = _entries(path)
            if not (_is_saved_model(path) or (versions and all(
                    v.isdigit() and _is_saved_model(os.path.join(path, v)) for v in versions))):
                return False
        return True
    if TFLITE_ENTRIES <= entries:
        try:
            with tf.io.gfile.GFile(os.path.join(directory, "tflite_info.json")) as f:
                tokenizer = json.load(f).get("tokenizer_file")
        except (ValueError, UnicodeDecodeError, AttributeError, tf.errors.OpError):
            return False
        return entries <= TFLITE_ENTRIES | ({tokenizer} if tokenizer else set())
    return False


def export_dir_problem(export_dir, overwrite):
    """Why `export_dir` cannot be written (a file; not empty without `overwrite`; with it, holding anything but
    an earlier export), or None."""
    if not tf.io.gfile.exists(export_dir):
        return None
    if not tf.io.gfile.isdir(export_dir):
        return f"export directory {export_dir} is a file"
    entries = sorted(_entries(export_dir))
    if entries and not overwrite:
        return f"export directory {export_dir} exists and is not empty; pass --overwrite to replace it"
    if entries and not is_export(export_dir):
        return (f"export directory {export_dir} holds files that are not an export ({', '.join(entries[:3])}"
                f"{', ...' if len(entries) > 3 else ''}); --overwrite replaces only an earlier export: choose another "
                "--export_dir")
    return None


def check_export_dir(export_dir, overwrite):
    """Refuses a file, an existing non-empty directory unless `overwrite`, and with `overwrite` a directory that
    holds anything but an export (`is_export`)."""
    problem = export_dir_problem(export_dir, overwrite)
    if problem:
        raise ExportError(problem)


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
    if keras_internals.is_trackable(child):
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
        result = keras_internals.plain_trackable()
        memo[key] = result  # before the children: shared sub-layers map to one node
        # "checkpoint" children: the weights and resources, without listing (and so tracing) Keras' functions.
        for name, child in keras_internals.trackable_children(obj).items():
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
    result = keras_internals.plain_trackable()
    memo[id(module)] = result
    for name, child in keras_internals.trackable_children(module).items():
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
    return _mirror_module(module, {}, keras_internals.keras_trackable_types())


def save_module(module, export_dir, signatures, overwrite=False):
    """`tf.saved_model.save` of `module` (through `serving_root`) into `export_dir`, staged and renamed into
    place when complete; an existing export is replaced only with `overwrite`."""
    check_export_dir(export_dir, overwrite)
    with fileio.atomic_path(export_dir, f"export directory {export_dir}", directory=True,
                           replace_directory_ok=True) as tmp:
        tf.saved_model.save(serving_root(module), tmp, signatures=signatures)
    return export_dir


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


def checked_ids(input_ids, max_positions, axis=1, vocab_size=None):
    """`input_ids`, passed on only once the sequences are found to fit the position embeddings ("sequence length
    exceeds max_position_embeddings") and, with `vocab_size`, every id to be in the vocabulary ("input_ids
    outside the vocabulary").

    The checks gate the ids alone (an identity with the asserts as control inputs): everything computed from
    the ids waits for them. Wrapping the model call in `tf.control_dependencies` instead would put a control
    edge on each of the model's constants and variable reads (hundreds), which constrains TensorFlow's graph
    optimiser (constant folding, fusions) for no gain."""
    checks = [tf.debugging.assert_less_equal(
        tf.shape(input_ids)[axis], max_positions,
        message=f"sequence length exceeds max_position_embeddings ({max_positions})")]
    if vocab_size is not None:
        with tf.control_dependencies(checks):
            checks = [tf.debugging.assert_equal(
                tf.reduce_all((input_ids >= 0) & (input_ids < vocab_size)), True,
                message=f"input_ids outside the vocabulary [0, {vocab_size})")]
    with tf.control_dependencies(checks):
        return tf.identity(input_ids)


# TF's wording around an assertion's own message: "assertion failed: [<message>] [Condition ...] ...".
_ASSERTION = re.compile(r"assertion failed: \[(?P<message>.*?)\](?= \[|\s*$)", re.MULTILINE)
# The lines TF puts before it: the graph error, the node, its stack.
_TF_CONTEXT = ("Graph execution error", "Detected at node", "<stack traces unavailable>", "  File ")


def refusal(error):
    """The line of `checked_ids`' message that a failed check (an `InvalidArgumentError`) holds, e.g. "sequence
    length exceeds max_position_embeddings (128)", without TF's graph context; else the message of another
    export's own assertion (`tf.debugging.assert_*`); else the first line of the message that is not TF's
    context."""
    message = error.message
    for marker in ("sequence length exceeds", "input_ids outside the vocabulary"):
        if marker in message:
            found = message[message.index(marker):]
            return found[:found.index(")") + 1] if ")" in found else found.split("\n")[0]
    assertion = _ASSERTION.search(message)
    if assertion:
        return assertion.group("message")
    return next((line for line in message.splitlines() if line.strip() and not line.startswith(_TF_CONTEXT)),
                message)


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


