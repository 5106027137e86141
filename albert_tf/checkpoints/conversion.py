"""One conversion from any readable checkpoint format to a writable one: what `python -m albert_tf.convert` runs.

`convert` reads top-down: the arguments checked, the config resolved (`--albert_config_file`, else the input's
own when its format carries one, else an `albert_config.json` beside it or in its run folder), the output's files
and tokenizer found, the output refused when it exists (without `overwrite`) or holds an input, the input loaded
into the model of its heads (`task_heads`), and the output written by its format, with the config beside it
(inside the folder for the folder formats). `input_formats` lists the formats read, from the registry, for the
converter's usage.
"""

import glob
import json
import os
import textwrap

from absl import logging

from albert_tf import fileio
from albert_tf.checkpoints import huggingface, keras_hub_writer, registry, run_files, task_heads
from albert_tf.checkpoints.errors import CheckpointMismatchError
from albert_tf.checkpoints.input_tokenizer import huggingface_tokenizer, keras_hub_tokenizer
from albert_tf.checkpoints.name_table import tf1_entries
from albert_tf.config import AlbertConfig, ConfigError
from albert_tf.errors import MissingDataError, UsageError

FOLDER_FORMATS = ("huggingface", "keras_hub")  # written as one folder, staged and replaced whole, with a tokenizer
CONFIG_NAME = "albert_config.json"


def output_formats():
    """The names of the formats a conversion can write, in detection order."""
    return tuple(f.name for f in registry.REGISTRY if f.writable)


def input_formats():
    """The usage's list of the formats a conversion reads: one `  * name: description` line each, in the order
    they are asked."""
    return "\n".join(textwrap.fill(f"* {f.name}: {f.description}", 116, initial_indent="  ", subsequent_indent="    ")
                     for f in registry.REGISTRY)


def resolve_config(input_checkpoint, albert_config_file=None):
    """(AlbertConfig, description of where it came from): `albert_config_file`, else the config the input's
    format carries (`CheckpointFormat.read_config`), else an `albert_config.json` beside the input, in its
    `assets/` or in the run folder of a run's `best_checkpoint/` (`run_files.config_file`)."""
    if albert_config_file:
        if not os.path.isfile(albert_config_file):
            raise MissingDataError(f"--albert_config_file: no such file: {albert_config_file}")
        return AlbertConfig.from_json_file(albert_config_file), albert_config_file
    fmt = registry.detect(input_checkpoint)
    config = fmt.read_config(input_checkpoint)
    if config is not None:
        return config, f"the input's own ({fmt.name} format)"
    beside = run_files.config_file(input_checkpoint)
    if beside:
        return AlbertConfig.from_json_file(beside), beside
    raise UsageError(
        f"--albert_config_file is required: the input {input_checkpoint!r} ({fmt.name} format) carries no config "
        f"(its weights do not give the number of layers and heads) and has no {CONFIG_NAME} beside it, in "
        "its assets/ or, for a run's best_checkpoint/, in the run folder")


def output_files(output_path, output_format):
    """(the path handed to the format's `write`, the config file to write, the files the output consists of). A
    folder format's output is the folder itself, replaced whole, with its albert_config.json inside."""
    if output_format in FOLDER_FORMATS:
        return output_path, os.path.join(output_path, CONFIG_NAME), []
    prefix = os.path.join(output_path, "model.ckpt") if os.path.isdir(output_path) else output_path
    config_path = os.path.join(os.path.dirname(os.path.abspath(prefix)), CONFIG_NAME)
    return prefix, config_path, [prefix + ".index"] + glob.glob(glob.escape(prefix) + ".data-*")


def _input_files(input_checkpoint):
    """The files of the input: everything under a directory, else the files of a prefix (and the path)."""
    if os.path.isdir(input_checkpoint):
        return [os.path.join(d, name) for d, _, names in os.walk(input_checkpoint) for name in names]
    return [input_checkpoint, *glob.glob(glob.escape(input_checkpoint) + ".*")]


def _existing_output(files, config_path, config, whole_directory=None):
    """The output files already present (an identical albert_config.json beside a prefix is not a conflict);
    with `whole_directory` (an output replacing a folder whole), whatever that folder holds."""
    if whole_directory is not None:
        if not os.path.isdir(whole_directory):
            return []
        return [os.path.join(whole_directory, name) for name in sorted(os.listdir(whole_directory))]

    existing = [f for f in files if os.path.exists(f) and f != config_path]
    if os.path.exists(config_path):
        try:
            same = AlbertConfig.from_json_file(config_path) == config
        except ConfigError:
            same = False
        if not same:
            existing.append(config_path)
    return existing


def _check_arguments(input_checkpoint, output_path, output_format, spm_model_file, vocab_file, label_list):
    """Raises `UsageError` for an argument missing or one the output format cannot take."""
    if not input_checkpoint:
        raise UsageError("--input_checkpoint is required")
    if not output_path:
        raise UsageError("--output_path is required")
    if output_format not in output_formats():
        raise UsageError(f"--output_format must be one of {', '.join(output_formats())}, got {output_format!r}")
    folder_out = output_format in FOLDER_FORMATS
    if folder_out and os.path.exists(output_path) and not os.path.isdir(output_path):
        raise UsageError(f"--output_path {output_path!r} is a file; the {output_format} format writes a directory")
    if not folder_out:
        for flag, value in (("--spm_model_file", spm_model_file), ("--vocab_file", vocab_file)):
            if value is not None:
                raise UsageError(f"{flag} applies to --output_format=huggingface or keras_hub only (the "
                                 f"{output_format} format holds no tokenizer)")
    if label_list and output_format != "huggingface":
        raise UsageError(f"--label_list applies to --output_format=huggingface only ({output_format} stores no "
                         "label names)")


def convert(input_checkpoint, output_path, output_format, albert_config_file=None, init_from_group0=False,
            overwrite=False, spm_model_file=None, vocab_file=None, do_lower_case=True, num_labels=None,
            label_list=None):
    """Converts `input_checkpoint` to `output_format` at `output_path`; returns the `LoadResult`.

    huggingface and keras_hub output (folders, replaced whole with `overwrite`): the tokenizer (`spm_model_file`,
    else `vocab_file` for huggingface, else found beside the input; see `input_tokenizer`), `do_lower_case` (the
    tokenizer's rule), and a classifier head (`num_labels`, huggingface's `label_list`, or the input's
    `task.json`: see `task_heads.classifier_head`). Without a classifier the model is `AlbertForPretraining`, or,
    when the input has no pretraining heads but the SQuAD v1.1 head (by its TF1 name, or run_squad.py's
    `task.json` beside a native checkpoint), `AlbertForSquad` (huggingface: `AlbertForQuestionAnswering`).

    Raises `UsageError` for bad arguments or an existing output, `CheckpointError` / `ConfigError` /
    `MissingDataError` for inputs that are missing, cannot be read or do not fit the config.
    """
    _check_arguments(input_checkpoint, output_path, output_format, spm_model_file, vocab_file, label_list)
    folder_out = output_format in FOLDER_FORMATS
    config, config_source = resolve_config(input_checkpoint, albert_config_file)
    logging.info("Config from %s: %s", config_source, json.dumps(config.to_dict(), sort_keys=True))
    target, config_path, files = output_files(output_path, output_format)
    if output_format == "keras_hub":
        spm_model_file = keras_hub_tokenizer(input_checkpoint, spm_model_file, vocab_file)
    elif output_format == "huggingface":
        spm_model_file, vocab_file = huggingface_tokenizer(input_checkpoint, spm_model_file, vocab_file)
    num_labels, labels, regression = task_heads.classifier_head(input_checkpoint, num_labels, label_list)
    existing = _existing_output(files, config_path, config, whole_directory=target if folder_out else None)
    if existing and not overwrite:
        raise UsageError(f"--output_path {output_path!r} already holds {', '.join(existing)}; pass "
                         "--overwrite to replace it")
    write_config = not folder_out and (config_path in existing or not os.path.exists(config_path))
    outputs = [("--output_path", path) for path in [target, *files] + ([config_path] if write_config else [])]
    if folder_out:  # the folder is replaced whole: no input may be inside it
        outputs.append(("--output_path", target, True))
    fileio.refuse_inputs_as_outputs(
        outputs,
        [("--input_checkpoint", path) for path in _input_files(input_checkpoint)]
        + [("--albert_config_file", albert_config_file), ("--spm_model_file", spm_model_file),
           ("--vocab_file", vocab_file)])

    if output_format == "keras_hub":
        keras_hub_writer.check_config(config)  # before loading: a config keras-hub cannot compute
    task_heads.refuse_keras_hub_task(input_checkpoint)
    model, result = task_heads.load_model(config, input_checkpoint, num_labels, init_from_group0)
    logging.info("Loaded %s into %s", result, type(model).__name__)
    task_heads.refuse_dropped_head(input_checkpoint, model, result)
    missing_ids = task_heads.missing_variable_ids(model, result)
    if result.missing:
        logging.warning("Not in the input, so left out of the output: %s", ", ".join(result.missing))
    if result.unused:
        logging.warning("In the input but not used by the model: %s", ", ".join(result.unused))

    names = {e.name for e in tf1_entries(model) if id(e.variable) not in missing_ids}  # what the output holds
    if num_labels and "output_weights" not in names:
        raise CheckpointMismatchError(
            f"the input {input_checkpoint} has no classifier head (output_weights, output_bias) for the "
            f"{num_labels} label(s) asked for; leave out --num_labels to write the backbone only")
    what = f"--output_path {target}"
    if output_format == "keras_hub":
        _warn_keras_hub_heads(names, num_labels)
        options = {"spm_model_file": spm_model_file, "num_labels": num_labels, "overwrite": overwrite, "what": what}
    elif output_format == "huggingface":
        options = {"folder": True, "spm_model_file": spm_model_file, "vocab_file": vocab_file,
                   "do_lower_case": do_lower_case, "labels": labels, "regression": regression,
                   "overwrite": overwrite, "what": what,
                   "model_max_length": min(512, config.max_position_embeddings)}
    else:
        options = {"what": what} if output_format == "native" else {}
    # The heads the input lacked are left out (never random weights); the native format keeps the usual keys.
    registry.get(output_format).write(model, target, exclude_ids=missing_ids, **options)
    if output_format == "keras_hub":
        _warn_keras_hub_text(do_lower_case)
    elif output_format == "huggingface":
        logging.info("Hugging Face folder: %s (%s)", target, huggingface.architecture(names))
    if write_config:
        fileio.write_text(config_path, config.to_json_string())
    logging.info("Wrote %s (%s format, %d weights) and %s", target, output_format,
                 len(model.weights) - len(missing_ids), config_path)
    return result


def _warn_keras_hub_heads(names, num_labels):
    """Logs the heads (by TF1 name) a keras_hub output leaves out: it holds the backbone (and a classifier's
    head)."""
    left_out = sorted(name for name in names if name.startswith("cls/"))
    if left_out:
        logging.warning("The keras_hub preset holds the backbone%s; the heads are left out: %s",
                        " and the classifier head" if num_labels else "", ", ".join(left_out))


def _warn_keras_hub_text(do_lower_case):
    """Logs what a keras_hub output's user must do to the text: keras-hub's tokenizer neither lowercases nor
    strips accents."""
    accents = "strip accents (NFKD, combining marks dropped)"
    logging.warning("keras-hub's AlbertTokenizer runs SentencePiece on the raw text: %s%s before it, as this "
                    "model's tokenizer did (albert_tf.text.tokenization.preprocess_text(text, lower=%s))",
                    "lowercase and " if do_lower_case else "", accents, do_lower_case)
