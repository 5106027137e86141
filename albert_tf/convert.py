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
encoder-only checkpoint, a keras-hub backbone) the output holds the encoder only, and the log says so. A
fine-tuned classifier (`--num_labels`, or the `task.json` of its run) is converted with its head in every output
format; a task head the output would not hold is refused (one line), never dropped.

`--albert_config_file` may be left out when the input carries its config (a Hugging Face `config.json`, a
keras-hub preset) or when an `albert_config.json` sits beside the input (or in its `assets/`), as in the
original release's tarballs and TF-Hub modules. A fine-tuning run's `task.json` and `albert_config.json` are in
its output folder: they are found from the folder, a checkpoint in it, and its `best_checkpoint/`
(`albert_tf.checkpoints.run_files`). The config is always written as `albert_config.json` beside
the output (inside the output directory for Hugging Face and keras-hub), so every output is self-describing.
Existing output is never replaced without `--overwrite`.

Output paths: `original` and `native` write a checkpoint prefix (`<output_path>.index`, `.data-*`); an
existing directory means `<output_path>/model.ckpt`. `huggingface` writes a folder `<output_path>` (replaced
whole with `--overwrite`) that transformers opens with nothing else: `model.safetensors`, `config.json` naming
the class of the input's head (`AlbertModel`, `AlbertForPreTraining`, `AlbertForSequenceClassification` with
the label names of `--label_list` or `task.json`, `AlbertForQuestionAnswering` for the SQuAD v1.1 head), the
tokenizer (`spiece.model`, `tokenizer.json`, `tokenizer_config.json`, `special_tokens_map.json`; or a WordPiece
`vocab.txt` as a `BertTokenizer`) from `--spm_model_file` / `--vocab_file` or found beside the input, and
`albert_config.json`. `keras_hub` writes a keras-hub preset folder
`<output_path>` (replaced whole with `--overwrite`) that `keras_hub.models.AlbertBackbone.from_preset` and
`AlbertTokenizer.from_preset` open, with `albert_config.json` inside:

    python -m albert_tf.convert --input_checkpoint=albert_base --output_format=keras_hub \
      --output_path=albert_base_keras_hub [--spm_model_file=albert_base/30k-clean.model]

Its tokenizer is the SentencePiece model `--spm_model_file`, else the one `*.model` beside the input (or in its
`assets/`; a keras-hub preset's `assets/tokenizer/vocabulary.spm`); keras-hub's `AlbertTokenizer` is
SentencePiece only, so a WordPiece `--vocab_file` is refused. A fine-tuned classifier (`--num_labels`, or the
`task.json` that `run_classifier.py` leaves in its output folder) is written as a
`keras_hub.models.AlbertTextClassifier` preset (its `logits` layer is the original's `output_weights` and
`output_bias`).
"""

import dataclasses
import glob
import json
import os

from absl import flags, logging

from albert_tf import cli, fileio
from albert_tf.errors import MissingDataError, UsageError
from albert_tf.settings import POSITIVE, setting

OUTPUT_FORMATS = ("original", "huggingface", "native", "keras_hub")
FOLDER_FORMATS = ("huggingface", "keras_hub")  # written as one folder, staged and replaced whole
TASK_JSON = "task.json"  # what run_classifier.py / run_squad.py leave in their output folder: the task, its labels
CONFIG_NAME = "albert_config.json"


@dataclasses.dataclass
class ConvertRequest:
    """What one conversion reads and writes: each field is the converter's flag of the same name."""

    input_checkpoint: str = setting(None, "Checkpoint to convert: original TF1 prefix or directory, TF-Hub module or "
                                          "SavedModel directory, Hugging Face directory or .safetensors file, "
                                          "keras-hub preset directory, Model Garden TF2 checkpoint, or native TF2 "
                                          "checkpoint.", role="input_checkpoint")
    output_format: str = setting(None, "original: TF1 name-based checkpoint as the original release's; huggingface: "
                                       "a folder transformers opens (weights, config.json, tokenizer); native: this "
                                       "project's TF2 checkpoint; keras_hub: a keras-hub preset folder "
                                       "(AlbertBackbone, AlbertTokenizer; AlbertTextClassifier for a fine-tuned "
                                       "classifier).", choices=OUTPUT_FORMATS)
    # A prefix (original, native: <output_path>.index, .data-*) or a folder written whole (huggingface, keras_hub,
    # whose replacement the manifest rule guards when it is written).
    output_path: str = setting(None, "Checkpoint prefix (original, native; an existing directory means "
                                     "<dir>/model.ckpt) or directory (huggingface, keras_hub).",
                               role="output_prefix", writes=("", ".index"))
    albert_config_file: str = setting(None, "albert_config.json of the model (the original's format, or a Hugging "
                                            "Face config.json). Optional when the input carries its config (Hugging "
                                            "Face, keras-hub preset) or has an albert_config.json beside it.",
                                      role="input_file")
    init_from_group0: bool = setting(False, "Original input only: initialise every group of the config from the "
                                            "checkpoint's group_0 (the original's flag, to grow a 1-group checkpoint "
                                            "into more groups).")
    overwrite: bool = setting(False, "Replace an existing output.")
    spm_model_file: str = setting(None, "huggingface / keras_hub output: the SentencePiece model of the tokenizer; "
                                        "default: the one *.model beside the input (or in its assets/).",
                                  role="input_file")
    vocab_file: str = setting(None, "huggingface output: a WordPiece vocabulary (the Chinese models), written as a "
                                    "BertTokenizer; default: the one vocab*.txt beside the input when there is no "
                                    "*.model. keras-hub's AlbertTokenizer is SentencePiece only, so keras_hub output "
                                    "refuses it.", role="input_file")
    do_lower_case: bool = setting(True, "huggingface / keras_hub output: whether the model's text is lowercased "
                                        "before tokenizing (as the scripts' flag); written into the Hugging Face "
                                        "tokenizer_config.json. keras-hub's AlbertTokenizer does not lowercase (or "
                                        "strip accents): the log says what to do to the text before it.")
    num_labels: int = setting(None, "Write the input's classifier head (output_weights [num_labels, H]): huggingface "
                                    "as AlbertForSequenceClassification, keras_hub as AlbertTextClassifier, original "
                                    "/ native as the classifier's weights; default: the labels of run_classifier's "
                                    "task.json beside the input (or, for a run's best_checkpoint/, in the run "
                                    "folder), else no classifier.", bounds=POSITIVE)
    label_list: list = setting(None, "huggingface output: the classifier's label names in index order (id2label / "
                                     "label2id); default: those of run_classifier's task.json (see --num_labels), "
                                     "else LABEL_0, LABEL_1, ...")


def define_flags(flag_values=flags.FLAGS):
    """Defines the converter's flags (`ConvertRequest`'s settings) on `flag_values` (the global FLAGS when run as a
    script, where `albert_tf.cli.run` then guards its declared files)."""
    cli.define_flags(ConvertRequest, flag_values)


# ---------------------------------------------------------------- helpers
def _input_config_path(path):
    """An `albert_config.json` beside (or inside) the input checkpoint, in its `assets/` (a TF-Hub module or
    SavedModel), or in the run folder of a run's `best_checkpoint/`, if there is one."""
    from albert_tf.checkpoints import run_files  # pylint: disable=import-outside-toplevel

    return run_files.config_file(path)


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
        f"(its weights do not give the number of layers and heads) and has no {CONFIG_NAME} beside it, in "
        "its assets/ or, for a run's best_checkpoint/, in the run folder")


def output_files(output_path, output_format):
    """(the path handed to `save_checkpoint`, the config file to write, the files the output consists of)."""
    if output_format == "keras_hub":
        from albert_tf.checkpoints import keras_hub_writer  # pylint: disable=import-outside-toplevel

        return output_path, os.path.join(output_path, CONFIG_NAME), keras_hub_writer.preset_files(
            output_path, classifier=True)
    if output_format == "huggingface":
        from albert_tf.checkpoints import huggingface  # pylint: disable=import-outside-toplevel

        files = sorted(set(huggingface.folder_files(output_path, spm_model_file=True))
                       | set(huggingface.folder_files(output_path, vocab_file=True)))
        return output_path, os.path.join(output_path, CONFIG_NAME), files
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


def _beside(input_checkpoint, pattern):
    """Files matching `pattern` beside the input (in its folder) or in its `assets/`, sorted."""
    folder = _input_folder(input_checkpoint)
    places = [folder, os.path.join(folder, "assets")]
    return sorted(path for place in places for path in glob.glob(os.path.join(glob.escape(place), pattern)))


def _one(found, kind, flag):
    """The one file of `found` (logged as the tokenizer), None for none; several is a `UsageError` naming `flag`."""
    if len(found) > 1:
        raise UsageError(f"several {kind} beside the input ({', '.join(found)}); pass {flag} to say which is the "
                         "model's")
    if found:
        logging.info("Tokenizer: %s (beside the input)", found[0])
        return found[0]
    return None


def _existing_file(flag, path):
    if not os.path.isfile(path):
        raise MissingDataError(f"{flag}: no such file: {path}")
    return path


def keras_hub_tokenizer(input_checkpoint, spm_model_file=None, vocab_file=None):
    """The SentencePiece model for a keras_hub output: `spm_model_file`, else the one `*.model` beside the input
    or in its `assets/` (a keras-hub preset's `assets/tokenizer/vocabulary.spm`). Raises `UsageError` for a
    WordPiece vocabulary (given, or all there is beside the input) or several models to choose from, and
    `MissingDataError` when there is none."""
    if vocab_file:
        raise UsageError(f"--vocab_file {vocab_file}: keras-hub's AlbertTokenizer is SentencePiece only, so a "
                         "WordPiece vocabulary cannot go into a keras_hub preset; pass --spm_model_file")
    if spm_model_file:
        return _existing_file("--spm_model_file", spm_model_file)
    found = _beside(input_checkpoint, "*.model")
    preset_spm = os.path.join(_input_folder(input_checkpoint), "assets", "tokenizer", "vocabulary.spm")
    if not found and os.path.isfile(preset_spm):
        found = [preset_spm]
    found = _one(found, "SentencePiece models", "--spm_model_file")
    if found:
        return found
    vocabs = _beside(input_checkpoint, "vocab*.txt")
    if vocabs:
        raise UsageError(f"the tokenizer beside the input is the WordPiece vocabulary {vocabs[0]}; keras-hub's "
                         "AlbertTokenizer is SentencePiece only, so it cannot go into a keras_hub preset")
    raise MissingDataError(f"no tokenizer for the keras_hub preset: no SentencePiece *.model beside the input "
                           f"{input_checkpoint} (or in its assets/); pass --spm_model_file")


def huggingface_tokenizer(input_checkpoint, spm_model_file=None, vocab_file=None):
    """(spm_model_file, vocab_file) for a huggingface output, one of them None: the flag given (SentencePiece
    first, as the scripts), else the one `*.model` beside the input or in its `assets/`, else the one
    `vocab*.txt` there (WordPiece). (None, None) when there is none: the folder then holds the model only, which
    `AutoModel` opens and `AutoTokenizer` does not (logged). Raises `MissingDataError` for a flag naming no file
    and `UsageError` for several candidates."""
    if spm_model_file:
        return _existing_file("--spm_model_file", spm_model_file), None
    if vocab_file:
        return None, _existing_file("--vocab_file", vocab_file)
    found = _one(_beside(input_checkpoint, "*.model"), "SentencePiece models", "--spm_model_file")
    if found:
        return found, None
    found = _one(_beside(input_checkpoint, "vocab*.txt"), "WordPiece vocabularies", "--vocab_file")
    if found:
        return None, found
    logging.warning("No tokenizer beside the input %s (no *.model or vocab*.txt): the Hugging Face folder holds "
                    "the model only, and AutoTokenizer will not open it; pass --spm_model_file (or --vocab_file) "
                    "to add it", input_checkpoint)
    return None, None


def _task_json(input_checkpoint):
    """(path, contents) of the `task.json` that run_classifier.py and run_squad.py leave beside their checkpoints
    (for a run's `best_checkpoint/`, in the run folder above it); contents None when there is no such file (or it
    is no JSON object)."""
    from albert_tf.checkpoints import run_files  # pylint: disable=import-outside-toplevel

    return run_files.task_record(input_checkpoint)


def _task_record(input_checkpoint):
    """(path, contents) of a classifier's `task.json`; contents None when there is none (or it records no
    labels)."""
    path, record = _task_json(input_checkpoint)
    return path, record if record is not None and isinstance(record.get("labels"), list) else None


def classifier_head(input_checkpoint, num_labels=None, label_list=None):
    """(number of outputs, label names or None, regression) of the input's classifier head, or (None, None,
    False) for no classifier: from `num_labels` / `label_list` and the `task.json` that run_classifier.py leaves
    beside its checkpoints (a regression task has one output and no names). Raises `UsageError` when they
    disagree."""
    path, record = _task_record(input_checkpoint)
    names, regression = None, False
    if record is not None:
        regression = bool(record.get("regression"))
        names = None if regression else [str(label) for label in record["labels"]]
    recorded = (1 if regression else len(names)) if record is not None else None
    if label_list:
        if names is not None and list(label_list) != names:
            raise UsageError(f"--label_list={','.join(label_list)}, but {path} beside the input names the "
                             f"classifier's labels {names}")
        names = list(label_list)
    if num_labels is not None and names is not None and num_labels != len(names):
        raise UsageError(f"--num_labels={num_labels}, but there are {len(names)} label names ({names}, from "
                         f"{'--label_list' if label_list else path})")
    if num_labels is not None and recorded is not None and num_labels != recorded:
        raise UsageError(f"--num_labels={num_labels}, but {path} beside the input gives the classifier "
                         f"{recorded} label(s) ({record.get('labels')})")
    count = num_labels if num_labels is not None else len(names) if names is not None else recorded
    return count, names, regression


def _missing_variable_ids(model, result):
    """ids of the model's variables that the checkpoint did not provide."""
    from albert_tf.checkpoints import native  # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints.original import tf1_entries  # pylint: disable=import-outside-toplevel

    missing = set(result.missing)
    if result.format == "native":
        return {id(v) for key, v in native.object_keys(model).items() if key in missing}
    return {id(e.variable) for e in tf1_entries(model) if e.name in missing}


def convert(input_checkpoint, output_path, output_format, albert_config_file=None, init_from_group0=False,
            overwrite=False, spm_model_file=None, vocab_file=None, do_lower_case=True, num_labels=None,
            label_list=None):
    """Converts `input_checkpoint` to `output_format` at `output_path`; returns the `LoadResult`.

    huggingface and keras_hub output (folders, replaced whole with `overwrite`): the tokenizer (`spm_model_file`,
    else `vocab_file` for huggingface, else found beside the input; see `huggingface_tokenizer` and
    `keras_hub_tokenizer`), `do_lower_case` (the tokenizer's rule), and a classifier head (`num_labels`,
    huggingface's `label_list`, or the input's `task.json`: see `classifier_head`). Without a classifier the
    model is `AlbertForPretraining`, or, when the input has no pretraining heads but the SQuAD v1.1 head (by its
    TF1 name, or run_squad.py's `task.json` beside a native checkpoint), `AlbertForSquad` (huggingface:
    `AlbertForQuestionAnswering`).

    Raises `UsageError` for bad arguments or an existing output, `CheckpointError` / `ConfigError` /
    `MissingDataError` for inputs that are missing, cannot be read or do not fit the config.
    """
    from albert_tf.checkpoints import registry  # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints.errors import CheckpointMismatchError  # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints.original import tf1_entries  # pylint: disable=import-outside-toplevel

    if not input_checkpoint:
        raise UsageError("--input_checkpoint is required")
    if not output_path:
        raise UsageError("--output_path is required")
    if output_format not in OUTPUT_FORMATS:
        raise UsageError(f"--output_format must be one of {', '.join(OUTPUT_FORMATS)}, got {output_format!r}")
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

    config, config_source, backbone = resolve_config(input_checkpoint, albert_config_file)
    logging.info("Config from %s: %s", config_source, json.dumps(config.to_dict(), sort_keys=True))
    target, config_path, files = output_files(output_path, output_format)
    if output_format == "keras_hub":
        spm_model_file = keras_hub_tokenizer(input_checkpoint, spm_model_file, vocab_file)
    elif output_format == "huggingface":
        spm_model_file, vocab_file = huggingface_tokenizer(input_checkpoint, spm_model_file, vocab_file)
    num_labels, labels, regression = classifier_head(input_checkpoint, num_labels, label_list)
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
        from albert_tf.checkpoints import keras_hub_writer  # pylint: disable=import-outside-toplevel

        keras_hub_writer.check_config(config)  # before loading: a config keras-hub cannot compute
    _refuse_keras_hub_task(input_checkpoint)
    model, result = _load_model(config, backbone if backbone is not None else input_checkpoint, num_labels,
                                init_from_group0)
    logging.info("Loaded %s into %s", result, type(model).__name__)
    _refuse_dropped_head(input_checkpoint, model, result)
    missing_ids = _missing_variable_ids(model, result)
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
        from albert_tf.checkpoints import huggingface  # pylint: disable=import-outside-toplevel

        logging.info("Hugging Face folder: %s (%s)", target, huggingface.architecture(names))
    if write_config:
        fileio.write_text(config_path, config.to_json_string())
    logging.info("Wrote %s (%s format, %d weights) and %s", target, output_format,
                 len(model.weights) - len(missing_ids), config_path)
    return result


def _load_model(config, source, num_labels, init_from_group0):
    """(model, LoadResult) of the input: `AlbertClassifier` with `num_labels`; else `AlbertForPretraining`, unless
    the input lacks the masked-LM head and has the SQuAD v1.1 head (`_has_squad_head`), then `AlbertForSquad`."""
    from albert_tf import checkpoints  # pylint: disable=import-outside-toplevel
    # pylint: disable-next=import-outside-toplevel
    from albert_tf.model import AlbertClassifier, AlbertForPretraining, AlbertForSquad, dummy_inputs

    if num_labels:
        model = AlbertClassifier(config, num_labels)
        return model, checkpoints.load_checkpoint(model, source, init_from_group0=init_from_group0)
    model = AlbertForPretraining(config)
    result = checkpoints.load_checkpoint(model, source, init_from_group0=init_from_group0)
    if not _lacks_mlm_head(model, result) or not _has_squad_head(source, result):
        return model, result
    squad = AlbertForSquad(config)
    squad(dummy_inputs(seq_length=4), training=False)
    squad_result = checkpoints.load_checkpoint(squad, source, init_from_group0=init_from_group0)
    if not squad_result.missing:
        return squad, squad_result
    return model, result


def _refuse_keras_hub_task(input_checkpoint):
    """A keras-hub preset holding a task (keras-hub's `task.json`, `task.weights.h5`) is refused: the converter
    reads its backbone only, and would drop the task's head."""
    from albert_tf.checkpoints import run_files  # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints.errors import CheckpointMismatchError  # pylint: disable=import-outside-toplevel

    task = run_files.keras_hub_task(input_checkpoint)
    if task:
        raise CheckpointMismatchError(
            f"the input {input_checkpoint} is a keras-hub {task} preset; the converter reads a preset's backbone "
            "only and would drop the task's head (task.weights.h5): convert the checkpoint the preset was made from")


def _refuse_dropped_head(input_checkpoint, model, result):
    """The output never drops a task head of the input: when the model chosen has none (`AlbertForPretraining`)
    and the input holds one, a classifier's is a `UsageError` (`--num_labels` writes it), another a
    `CheckpointMismatchError`."""
    from albert_tf.checkpoints import run_files  # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints.errors import CheckpointMismatchError  # pylint: disable=import-outside-toplevel
    from albert_tf.model import AlbertForPretraining  # pylint: disable=import-outside-toplevel

    head = run_files.task_head(result) if isinstance(model, AlbertForPretraining) else []
    if not head:
        return
    shown = ", ".join(head[:2]) + (", ..." if len(head) > 2 else "")
    path, _ = _task_json(input_checkpoint)
    if run_files.is_output_layer(head):
        raise UsageError(f"the input {input_checkpoint} holds a classifier head ({shown}) and no {path} gives its "
                         "labels; pass --num_labels (and, for huggingface output, --label_list), or convert the "
                         "run folder (or its best_checkpoint/) whose task.json does")
    raise CheckpointMismatchError(f"the input {input_checkpoint} holds a task head ({shown}) that the converter "
                                  "cannot write; it would be dropped, so nothing is written")


def _has_squad_head(source, result):
    """Whether the input left unused by `AlbertForPretraining` holds the SQuAD v1.1 head: by its TF1 name, or, in
    a native checkpoint (whose head key a classifier's shares), as the `task.json` of run_squad.py says."""
    if "cls/squad/output_weights" in result.unused:
        return True
    if result.format != "native" or not isinstance(source, str):
        return False
    record = _task_json(source)[1]
    return bool(record) and record.get("task_name") == "squad" and not record.get("version_2_with_negative")


def _lacks_mlm_head(model, result):
    """Whether the load left the masked-LM head of `model` (an `AlbertForPretraining`) unloaded."""
    from albert_tf.checkpoints.original import pretraining_head_entries  # pylint: disable=import-outside-toplevel

    missing = _missing_variable_ids(model, result)
    return any(id(e.variable) in missing for e in pretraining_head_entries(model)
               if e.name.startswith("cls/predictions/"))


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
            num_labels=flag_values.num_labels, label_list=flag_values.label_list)


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
