r"""Converts ALBERT checkpoints between the original TF1 release, Hugging Face and this project's format.

    python -m albert_tf.convert \
      --input_checkpoint=albert_base/model.ckpt-best \
      --albert_config_file=albert_base/albert_config.json \
      --output_format=huggingface --output_path=albert_base_hf

The input is detected as `albert_tf.load_checkpoint` detects it: an original TF1 checkpoint (prefix or
directory; a TF-Hub `module/` prefix and optimizer slots are fine) or TF1 TF-Hub module directory, a Hugging
Face directory or `.safetensors` file, a keras-hub ALBERT preset directory, a TF Model Garden TF2 checkpoint
(`AlbertEncoder` or `BertPretrainerV2`) or TF-Hub SavedModel directory, or a native TF2 checkpoint. The model is
`AlbertForPretraining`: the MLM and SOP heads are converted when the input has them; when it does not (an
encoder-only checkpoint, a keras-hub backbone) the output holds the encoder only, and the log says so.

`--albert_config_file` may be left out when the input carries its config (a Hugging Face `config.json`, a
keras-hub preset) or when an `albert_config.json` sits beside the input (or in its `assets/`), as in the
original release's tarballs and TF-Hub modules. The config is always written as `albert_config.json` beside the output (inside the output
directory for Hugging Face), so every output is self-describing. Existing output is never replaced without
`--overwrite`.

Output paths: `original` and `native` write a checkpoint prefix (`<output_path>.index`, `.data-*`); an
existing directory means `<output_path>/model.ckpt`. `huggingface` writes `config.json` and
`model.safetensors` into the directory `<output_path>`.
"""

import glob
import json
import os

from absl import flags, logging

from albert_tf import cli, fileio
from albert_tf.errors import MissingDataError, UsageError

OUTPUT_FORMATS = ("original", "huggingface", "native")
CONFIG_NAME = "albert_config.json"


def define_flags(flag_values=flags.FLAGS):
    """Defines the converter's flags on `flag_values` (the global FLAGS when run as a script)."""
    flags.DEFINE_string("albert_config_file", None,
                        "albert_config.json of the model (the original's format, or a Hugging Face config.json). "
                        "Optional when the input carries its config (Hugging Face, keras-hub preset) or has an "
                        "albert_config.json beside it.", flag_values=flag_values)
    flags.DEFINE_string("input_checkpoint", None,
                        "Checkpoint to convert: original TF1 prefix or directory, TF-Hub module or SavedModel "
                        "directory, Hugging Face directory or .safetensors file, keras-hub preset directory, Model "
                        "Garden TF2 checkpoint, or native TF2 checkpoint.",
                        flag_values=flag_values)
    flags.DEFINE_enum("output_format", None, list(OUTPUT_FORMATS),
                      "original: TF1 name-based checkpoint as the original release's; huggingface: "
                      "config.json + model.safetensors; native: this project's TF2 checkpoint.",
                      flag_values=flag_values)
    flags.DEFINE_string("output_path", None,
                        "Checkpoint prefix (original, native; an existing directory means <dir>/model.ckpt) or "
                        "directory (huggingface).", flag_values=flag_values)
    flags.DEFINE_bool("init_from_group0", False,
                      "Original input only: initialise every group of the config from the checkpoint's group_0 "
                      "(the original's flag, to grow a 1-group checkpoint into more groups).",
                      flag_values=flag_values)
    flags.DEFINE_bool("overwrite", False, "Replace an existing output.", flag_values=flag_values)


# ---------------------------------------------------------------- helpers
def _input_config_path(path):
    """An `albert_config.json` beside (or inside) the input checkpoint, or in its `assets/` (a TF-Hub module or
    SavedModel), if there is one."""
    from albert_tf.checkpoints import model_garden  # pylint: disable=import-outside-toplevel

    return model_garden.config_file_beside(path)


def resolve_config(input_checkpoint, albert_config_file=None):
    """(AlbertConfig, description of where it came from, keras-hub backbone or None)."""
    from albert_tf.checkpoints import detect_format, huggingface, keras_hub_format  # pylint: disable=import-outside-toplevel
    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel

    if albert_config_file:
        if not os.path.isfile(albert_config_file):
            raise MissingDataError(f"--albert_config_file: no such file: {albert_config_file}")
        return AlbertConfig.from_json_file(albert_config_file), albert_config_file, None
    fmt = detect_format(input_checkpoint)
    if fmt == "huggingface":
        config = huggingface.read_config(input_checkpoint)
        if config is not None:
            return config, "the input's config.json", None
    if fmt == "keras_hub":
        backbone = keras_hub_format.load_backbone(input_checkpoint)
        return keras_hub_format.config_from_backbone(backbone), "the keras-hub preset's config", backbone
    beside = _input_config_path(input_checkpoint)
    if beside:
        return AlbertConfig.from_json_file(beside), beside, None
    raise UsageError(
        f"--albert_config_file is required: the input {input_checkpoint!r} ({fmt} format) carries no config "
        f"(its weights do not give the number of layers and heads) and has no {CONFIG_NAME} beside it or in "
        "its assets/")


def output_files(output_path, output_format):
    """(the path handed to `save_checkpoint`, the config file to write, the files the output consists of)."""
    if output_format == "huggingface":
        directory = output_path
        return output_path, os.path.join(directory, CONFIG_NAME), [
            os.path.join(directory, name) for name in ("config.json", "model.safetensors", CONFIG_NAME)]
    prefix = os.path.join(output_path, "model.ckpt") if os.path.isdir(output_path) else output_path
    config_path = os.path.join(os.path.dirname(os.path.abspath(prefix)), CONFIG_NAME)
    return prefix, config_path, [prefix + ".index"] + glob.glob(glob.escape(prefix) + ".data-*")


def _input_files(input_checkpoint):
    """The files of the input: everything under a directory, else the files of a prefix (and the path)."""
    if os.path.isdir(input_checkpoint):
        return [os.path.join(d, name) for d, _, names in os.walk(input_checkpoint) for name in names]
    return [input_checkpoint, *glob.glob(glob.escape(input_checkpoint) + ".*")]


def _existing_output(files, config_path, config):
    """The output files already present (an identical albert_config.json beside a prefix is not a conflict)."""
    from albert_tf.config import AlbertConfig, ConfigError  # pylint: disable=import-outside-toplevel

    existing = [f for f in files if os.path.exists(f) and f != config_path]
    if os.path.exists(config_path):
        try:
            same = AlbertConfig.from_json_file(config_path) == config
        except ConfigError:
            same = False
        if not same:
            existing.append(config_path)
    return existing


def _missing_variable_ids(model, result):
    """ids of the model's variables that the checkpoint did not provide."""
    from albert_tf.checkpoints import native  # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints.original import tf1_entries  # pylint: disable=import-outside-toplevel

    missing = set(result.missing)
    if result.format == "native":
        return {id(v) for key, v in native.object_keys(model).items() if key in missing}
    return {id(e.variable) for e in tf1_entries(model) if e.name in missing}


def convert(input_checkpoint, output_path, output_format, albert_config_file=None, init_from_group0=False,
            overwrite=False):
    """Converts `input_checkpoint` to `output_format` at `output_path`; returns the `LoadResult`.

    Raises `UsageError` for bad arguments or an existing output, `CheckpointError` / `ConfigError` /
    `MissingDataError` for inputs that are missing, cannot be read or do not fit the config.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf import checkpoints  # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints import huggingface, original  # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints.original import tf1_entries  # pylint: disable=import-outside-toplevel
    from albert_tf.model import AlbertForPretraining  # pylint: disable=import-outside-toplevel

    if not input_checkpoint:
        raise UsageError("--input_checkpoint is required")
    if not output_path:
        raise UsageError("--output_path is required")
    if output_format not in OUTPUT_FORMATS:
        raise UsageError(f"--output_format must be one of {', '.join(OUTPUT_FORMATS)}, got {output_format!r}")
    if output_format == "huggingface" and os.path.exists(output_path) and not os.path.isdir(output_path):
        raise UsageError(f"--output_path {output_path!r} is a file; the huggingface format writes a directory")

    config, config_source, backbone = resolve_config(input_checkpoint, albert_config_file)
    logging.info("Config from %s: %s", config_source, json.dumps(config.to_dict(), sort_keys=True))
    target, config_path, files = output_files(output_path, output_format)
    existing = _existing_output(files, config_path, config)
    if existing and not overwrite:
        raise UsageError(f"--output_path {output_path!r} already holds {', '.join(existing)}; pass "
                             "--overwrite to replace it")
    write_config = config_path in existing or not os.path.exists(config_path)
    fileio.refuse_inputs_as_outputs(
        [("--output_path", path) for path in [target, *files] + ([config_path] if write_config else [])],
        [("--input_checkpoint", path) for path in _input_files(input_checkpoint)]
        + [("--albert_config_file", albert_config_file)])

    model = AlbertForPretraining(config)
    result = checkpoints.load_checkpoint(model, backbone if backbone is not None else input_checkpoint,
                                         init_from_group0=init_from_group0)
    logging.info("Loaded %s", result)
    missing_ids = _missing_variable_ids(model, result)
    if result.missing:
        logging.warning("Not in the input, so left out of the output: %s", ", ".join(result.missing))
    if result.unused:
        logging.warning("In the input but not used by the model: %s", ", ".join(result.unused))

    if output_format == "native":
        # The model's variables at their usual keys, but the heads the input lacked (never random weights).
        from albert_tf.checkpoints import native  # pylint: disable=import-outside-toplevel

        root = native.partial_root(model, missing_ids) if missing_ids else model
        with fileio.atomic_prefix(target, f"--output_path {target}") as staged:
            tf.train.Checkpoint(model=root).write(staged)
    else:
        arrays = {e.name: e.to_tf1(e.variable.numpy()) for e in tf1_entries(model)
                  if id(e.variable) not in missing_ids}
        if output_format == "original":
            original.write_tf1(arrays, target)
        else:
            huggingface.write_hf(arrays, config, target)
    if write_config:
        fileio.write_text(config_path, config.to_json_string())
    logging.info("Wrote %s (%s format, %d weights) and %s", target, output_format,
                 len(model.weights) - len(missing_ids), config_path)
    return result


def main(argv, flag_values=flags.FLAGS):
    """Converts as the flags say. A flag missing, malformed or contradicting another is a `UsageError` (exit
    status 2 from the command); an input that is missing, unreadable or does not fit the config raises the
    reader's error (`CheckpointError`, `ConfigError`, `MissingDataError`: exit status 1, as in the training
    scripts)."""
    if len(argv) > 1:
        raise UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    convert(flag_values.input_checkpoint, flag_values.output_path, flag_values.output_format,
            albert_config_file=flag_values.albert_config_file, init_from_group0=flag_values.init_from_group0,
            overwrite=flag_values.overwrite)


def run(argv):
    """Parses `argv` (argv[0] is the program name) into fresh flags and converts; for tests and scripts that
    call the converter in-process without touching the global FLAGS."""
    flag_values = flags.FlagValues()
    define_flags(flag_values)
    argv = flag_values(list(argv))
    main(argv, flag_values=flag_values)


def console():
    """The `albert-convert` command (and `python -m albert_tf.convert`)."""
    define_flags()
    cli.run(main, __doc__)


if __name__ == "__main__":
    console()
