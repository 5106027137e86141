r"""Converts ALBERT checkpoints between the original TF1 release, Hugging Face, keras-hub and this project's format.

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
original release's tarballs and TF-Hub modules. The config is always written as `albert_config.json` beside
the output (inside the output directory for Hugging Face and keras-hub), so every output is self-describing.
Existing output is never replaced without `--overwrite`.

Output paths: `original` and `native` write a checkpoint prefix (`<output_path>.index`, `.data-*`); an
existing directory means `<output_path>/model.ckpt`. `huggingface` writes `config.json` and
`model.safetensors` into the directory `<output_path>`. `keras_hub` writes a keras-hub preset folder
`<output_path>` (replaced whole with `--overwrite`) that `keras_hub.models.AlbertBackbone.from_preset` and
`AlbertTokenizer.from_preset` open, with `albert_config.json` inside:

    python -m albert_tf.convert --input_checkpoint=albert_base --output_format=keras_hub \
      --output_path=albert_base_keras_hub [--spm_model_file=albert_base/30k-clean.model]

Its tokenizer is the SentencePiece model `--spm_model_file`, else the one `*.model` beside the input (or in its
`assets/`; a keras-hub preset's `assets/tokenizer/vocabulary.spm`); keras-hub's `AlbertTokenizer` is
SentencePiece only, so a WordPiece `--vocab_file` is refused. A fine-tuned classifier (`--num_labels`, or the
`task.json` that `run_classifier.py` leaves in its output folder beside the checkpoint) is written as a
`keras_hub.models.AlbertTextClassifier` preset (its `logits` layer is the original's `output_weights` and
`output_bias`).
"""

import glob
import json
import os

from absl import flags, logging

from albert_tf import cli, fileio
from albert_tf.errors import MissingDataError, UsageError

OUTPUT_FORMATS = ("original", "huggingface", "native", "keras_hub")
TASK_JSON = "task.json"  # what run_classifier.py leaves in its output folder: the labels of the head
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
                      "config.json + model.safetensors; native: this project's TF2 checkpoint; keras_hub: a "
                      "keras-hub preset folder (AlbertBackbone, AlbertTokenizer; AlbertTextClassifier for a "
                      "fine-tuned classifier).",
                      flag_values=flag_values)
    flags.DEFINE_string("output_path", None,
                        "Checkpoint prefix (original, native; an existing directory means <dir>/model.ckpt) or "
                        "directory (huggingface, keras_hub).", flag_values=flag_values)
    flags.DEFINE_bool("init_from_group0", False,
                      "Original input only: initialise every group of the config from the checkpoint's group_0 "
                      "(the original's flag, to grow a 1-group checkpoint into more groups).",
                      flag_values=flag_values)
    flags.DEFINE_bool("overwrite", False, "Replace an existing output.", flag_values=flag_values)
    flags.DEFINE_string("spm_model_file", None,
                        "keras_hub output: the SentencePiece model of the tokenizer; default: the one *.model "
                        "beside the input (or in its assets/).", flag_values=flag_values)
    flags.DEFINE_string("vocab_file", None,
                        "A WordPiece vocabulary, as the scripts take it; keras-hub's AlbertTokenizer is "
                        "SentencePiece only, so keras_hub output refuses it.", flag_values=flag_values)
    flags.DEFINE_bool("do_lower_case", True,
                      "keras_hub output: whether the model's text is lowercased before SentencePiece (as the "
                      "scripts' flag). keras-hub's AlbertTokenizer does not lowercase (or strip accents): the log "
                      "says what to do to the text before it.", flag_values=flag_values)
    flags.DEFINE_integer("num_labels", None,
                         "keras_hub output: write the input's classifier head (output_weights [num_labels, H]) as "
                         "a keras-hub AlbertTextClassifier; default: the labels of run_classifier's task.json "
                         "beside the input, else the backbone only.", lower_bound=1, flag_values=flag_values)


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
    if output_format == "keras_hub":
        from albert_tf.checkpoints import keras_hub_writer  # pylint: disable=import-outside-toplevel

        return output_path, os.path.join(output_path, CONFIG_NAME), keras_hub_writer.preset_files(
            output_path, classifier=True)
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


def _existing_output(files, config_path, config, whole_directory=None):
    """The output files already present (an identical albert_config.json beside a prefix is not a conflict);
    with `whole_directory` (an output replacing a folder whole, keras_hub), whatever that folder holds."""
    from albert_tf.config import AlbertConfig, ConfigError  # pylint: disable=import-outside-toplevel

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


def _input_folder(input_checkpoint):
    """The folder an input lives in: the input itself when it is a directory, else the prefix's directory."""
    if os.path.isdir(input_checkpoint):
        return input_checkpoint
    return os.path.dirname(os.path.abspath(input_checkpoint))


def keras_hub_tokenizer(input_checkpoint, spm_model_file=None, vocab_file=None):
    """The SentencePiece model for a keras_hub output: `spm_model_file`, else the one `*.model` beside the input
    or in its `assets/` (a keras-hub preset's `assets/tokenizer/vocabulary.spm`). Raises `UsageError` for a
    WordPiece vocabulary (given, or all there is beside the input) or several models to choose from, and
    `MissingDataError` when there is none."""
    if vocab_file:
        raise UsageError(f"--vocab_file {vocab_file}: keras-hub's AlbertTokenizer is SentencePiece only, so a "
                         "WordPiece vocabulary cannot go into a keras_hub preset; pass --spm_model_file")
    if spm_model_file:
        if not os.path.isfile(spm_model_file):
            raise MissingDataError(f"--spm_model_file: no such file: {spm_model_file}")
        return spm_model_file
    folder = _input_folder(input_checkpoint)
    places = [folder, os.path.join(folder, "assets")]
    found = sorted(path for place in places for path in glob.glob(os.path.join(glob.escape(place), "*.model")))
    preset_spm = os.path.join(folder, "assets", "tokenizer", "vocabulary.spm")
    if not found and os.path.isfile(preset_spm):
        found = [preset_spm]
    if len(found) == 1:
        logging.info("Tokenizer: %s (beside the input)", found[0])
        return found[0]
    if found:
        raise UsageError(f"several SentencePiece models beside the input ({', '.join(found)}); pass "
                         "--spm_model_file to say which is the model's")
    vocabs = sorted(path for place in places for path in glob.glob(os.path.join(glob.escape(place), "vocab*.txt")))
    if vocabs:
        raise UsageError(f"the tokenizer beside the input is the WordPiece vocabulary {vocabs[0]}; keras-hub's "
                         "AlbertTokenizer is SentencePiece only, so it cannot go into a keras_hub preset")
    raise MissingDataError(f"no tokenizer for the keras_hub preset: no SentencePiece *.model beside the input "
                           f"{input_checkpoint} (or in its assets/); pass --spm_model_file")


def classifier_labels(input_checkpoint, num_labels=None):
    """How many classes the input's classifier head has, for a keras_hub output: `num_labels`, else the labels
    of the `task.json` that run_classifier.py leaves beside its checkpoints (1 for regression), else None (no
    classifier). Raises `UsageError` when both are there and disagree."""
    record_path = os.path.join(_input_folder(input_checkpoint), TASK_JSON)
    labels = None
    if os.path.isfile(record_path):
        try:
            with open(record_path, encoding="utf-8") as f:
                record = json.load(f)
        except (OSError, ValueError) as err:
            raise MissingDataError(f"cannot read {record_path}: {err}") from None
        if isinstance(record, dict) and isinstance(record.get("labels"), list):
            labels = 1 if record.get("regression") else len(record["labels"])
    if num_labels is not None and labels is not None and num_labels != labels:
        raise UsageError(f"--num_labels={num_labels}, but {record_path} beside the input gives the classifier "
                         f"{labels} label(s) ({record.get('labels')})")
    return num_labels if num_labels is not None else labels


def _missing_variable_ids(model, result):
    """ids of the model's variables that the checkpoint did not provide."""
    from albert_tf.checkpoints import native  # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints.original import tf1_entries  # pylint: disable=import-outside-toplevel

    missing = set(result.missing)
    if result.format == "native":
        return {id(v) for key, v in native.object_keys(model).items() if key in missing}
    return {id(e.variable) for e in tf1_entries(model) if e.name in missing}


def convert(input_checkpoint, output_path, output_format, albert_config_file=None, init_from_group0=False,
            overwrite=False, spm_model_file=None, vocab_file=None, do_lower_case=True, num_labels=None):
    """Converts `input_checkpoint` to `output_format` at `output_path`; returns the `LoadResult`.

    keras_hub output only: the tokenizer (`spm_model_file`, else found beside the input; a WordPiece
    `vocab_file` is refused), `do_lower_case` (logged: keras-hub's tokenizer does not lowercase) and
    `num_labels` (a classifier head to write as an `AlbertTextClassifier`; see `classifier_labels`).

    Raises `UsageError` for bad arguments or an existing output, `CheckpointError` / `ConfigError` /
    `MissingDataError` for inputs that are missing, cannot be read or do not fit the config.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf import checkpoints  # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints import huggingface, original  # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints.errors import CheckpointMismatchError  # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints.original import tf1_entries  # pylint: disable=import-outside-toplevel
    from albert_tf.model import AlbertClassifier, AlbertForPretraining  # pylint: disable=import-outside-toplevel

    if not input_checkpoint:
        raise UsageError("--input_checkpoint is required")
    if not output_path:
        raise UsageError("--output_path is required")
    if output_format not in OUTPUT_FORMATS:
        raise UsageError(f"--output_format must be one of {', '.join(OUTPUT_FORMATS)}, got {output_format!r}")
    if (output_format in ("huggingface", "keras_hub") and os.path.exists(output_path)
            and not os.path.isdir(output_path)):
        raise UsageError(f"--output_path {output_path!r} is a file; the {output_format} format writes a directory")
    keras_hub_out = output_format == "keras_hub"
    if not keras_hub_out:
        for flag, value in (("--spm_model_file", spm_model_file), ("--vocab_file", vocab_file),
                            ("--num_labels", num_labels)):
            if value is not None:
                raise UsageError(f"{flag} applies to --output_format=keras_hub only (the {output_format} format "
                                 "holds no tokenizer and keeps every head the input has)")

    config, config_source, backbone = resolve_config(input_checkpoint, albert_config_file)
    logging.info("Config from %s: %s", config_source, json.dumps(config.to_dict(), sort_keys=True))
    target, config_path, files = output_files(output_path, output_format)
    if keras_hub_out:
        spm_model_file = keras_hub_tokenizer(input_checkpoint, spm_model_file, vocab_file)
        num_labels = classifier_labels(input_checkpoint, num_labels)
    existing = _existing_output(files, config_path, config, whole_directory=target if keras_hub_out else None)
    if existing and not overwrite:
        raise UsageError(f"--output_path {output_path!r} already holds {', '.join(existing)}; pass "
                             "--overwrite to replace it")
    write_config = not keras_hub_out and (config_path in existing or not os.path.exists(config_path))
    outputs = [("--output_path", path) for path in [target, *files] + ([config_path] if write_config else [])]
    if keras_hub_out:  # the folder is replaced whole: no input may be inside it
        outputs.append(("--output_path", target, True))
    fileio.refuse_inputs_as_outputs(
        outputs,
        [("--input_checkpoint", path) for path in _input_files(input_checkpoint)]
        + [("--albert_config_file", albert_config_file), ("--spm_model_file", spm_model_file)])

    if keras_hub_out:
        from albert_tf.checkpoints import keras_hub_writer  # pylint: disable=import-outside-toplevel

        keras_hub_writer.check_config(config)  # before loading: a config keras-hub cannot compute
    model = AlbertClassifier(config, num_labels) if num_labels else AlbertForPretraining(config)
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
        elif output_format == "keras_hub":
            if num_labels and "output_weights" not in arrays:
                raise CheckpointMismatchError(
                    f"the input {input_checkpoint} has no classifier head (output_weights, output_bias) for the "
                    f"{num_labels} label(s) asked for; leave out --num_labels to write the backbone only")
            left_out = sorted(name for name in arrays if name.startswith("cls/"))
            if left_out:
                logging.warning("The keras_hub preset holds the backbone%s; the pretraining heads are left out: "
                                "%s", " and the classifier head" if num_labels else "", ", ".join(left_out))
            keras_hub_writer.write_preset(target, config, arrays, spm_model_file, num_labels=num_labels,
                                          overwrite=overwrite, what=f"--output_path {target}")
            accents = "strip accents (NFKD, combining marks dropped)"
            logging.warning("keras-hub's AlbertTokenizer runs SentencePiece on the raw text: %s%s before it, as "
                            "this model's tokenizer did (albert_tf.text.tokenization.preprocess_text(text, "
                            "lower=%s))", "lowercase and " if do_lower_case else "", accents, do_lower_case)
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
            overwrite=flag_values.overwrite, spm_model_file=flag_values.spm_model_file,
            vocab_file=flag_values.vocab_file, do_lower_case=flag_values.do_lower_case,
            num_labels=flag_values.num_labels)


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
