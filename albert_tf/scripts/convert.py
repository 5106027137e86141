r"""Converts ALBERT checkpoints between the original TF1 release, Hugging Face, keras-hub and this project's format.

    python -m albert_tf.convert \
      --input_checkpoint=albert_base/model.ckpt-best \
      --albert_config_file=albert_base/albert_config.json \
      --output_format=huggingface --output_path=albert_base_hf

The input is detected as `albert_tf.load_checkpoint` detects it: it is in the first of these formats that
recognises its path (`--output_format` names those that can be written)

{input_formats}

The model is `AlbertForPretraining`: the MLM and SOP heads are converted when the input has them; when it does not (an
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
import sys

from absl import flags

from albert_tf import cli
from albert_tf.settings import POSITIVE, flag_specs, setting

# The choices of --output_format, in the order its help lists them: the registry's writable formats (a test checks).
OUTPUT_FORMATS = ("original", "huggingface", "native", "keras_hub")


@dataclasses.dataclass
class ConvertRequest:
    """What one conversion reads and writes: each field is the converter's flag of the same name."""

    input_checkpoint: str = setting(None, "Checkpoint to convert, in one of the formats listed above (detected from "
                                          "the path).", role="input_checkpoint")
    output_format: str = setting(None, "original: TF1 name-based checkpoint as the original release's; huggingface: "
                                       "a folder transformers opens (weights, config.json, tokenizer); native: this "
                                       "project's TF2 checkpoint; keras_hub: a keras-hub preset folder "
                                       "(AlbertBackbone, AlbertTokenizer; AlbertTextClassifier for a fine-tuned "
                                       "classifier).", choices=OUTPUT_FORMATS)
    # A prefix (original, native: <output_path>.index, .data-*) or a folder written whole (huggingface, keras_hub,
    # whose replacement the manifest rule guards when it is written).
    output_path: str = setting(None, "Checkpoint prefix (original, native; an existing directory means "
                                     "<dir>/model.ckpt) or directory (huggingface, keras_hub).",
                               role="output_prefix", writes=("", ".index"), records=True)
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


cli.define_flags(ConvertRequest)


def main(argv, flag_values=flags.FLAGS):
    """Converts as the flags say (the command runs it under `albert_tf.cli.run`'s guard; `convert_argv` under the
    same). A flag missing, malformed or contradicting another is a `UsageError` (exit status 2 from the command);
    an input that is missing, unreadable or does not fit the config raises the reader's error (`CheckpointError`,
    `ConfigError`, `MissingDataError`: exit status 1, as in the training scripts)."""
    del argv  # no positional arguments: refused before
    from albert_tf.checkpoints import conversion  # pylint: disable=import-outside-toplevel  (TensorFlow)

    request = cli.params_from_flags(ConvertRequest, flag_values)
    conversion.convert(**dataclasses.asdict(request))


def convert_argv(argv):
    """Parses `argv` (argv[0] is the program name) into fresh flags and converts, under the guard the command runs
    under (its declared files checked, locked and protected): for tests and tools that call the converter
    in-process without touching the global FLAGS."""
    flag_values = flags.FlagValues()
    cli.define_flags(ConvertRequest, flag_values)
    args = flag_values(list(argv))
    cli.refuse_arguments(args)
    declared = {spec.name: spec for spec in flag_specs(ConvertRequest).values()}
    with cli.guarded_settings(list(argv), flag_values, declared):
        main(args, flag_values=flag_values)


def usage():
    """This module's docstring with the registry's input formats in it: what `--help` prints."""
    from albert_tf.checkpoints import conversion  # pylint: disable=import-outside-toplevel  (TensorFlow)

    return __doc__.format(input_formats=conversion.input_formats())


def _asks_for_help(argv):
    """Whether `argv` asks absl for the usage (`--help`, `--helpshort`, `--helpfull`, `--helpxml`, `-?`)."""
    return any(arg.lstrip("-").split("=", 1)[0] in ("help", "helpshort", "helpfull", "helpxml", "?")
               for arg in argv[1:])


def run():
    """The console command (`albert-convert`, `python -m albert_tf.convert`): `main` under `albert_tf.cli.run`.
    The usage is built only for `--help`: the registry it lists imports TensorFlow, which a flag error need not
    wait for."""
    cli.run(main, usage() if _asks_for_help(sys.argv) else None)


if __name__ == "__main__":
    run()
