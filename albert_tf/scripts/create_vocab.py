"""Trains a vocabulary for pretraining from scratch: SentencePiece with the original release's recipe, or WordPiece.

The defaults are the original's `spm_train` command (its README; the settings stored in `30k-clean.model`): a
30,000-piece unigram model, `pad_id=0 unk_id=1 eos_id=-1 bos_id=-1`, control symbols `[CLS] [SEP] [MASK]`, its
user-defined symbols, `character_coverage` 0.99995, at most `--input_sentence_size` shuffled sentences. The model
has the ids of `30k-clean.model` (`<pad>` 0, `<unk>` 1, `[CLS]` 2, `[SEP]` 3, `[MASK]` 4) and works with every
script through `--spm_model_file`. Input is the pretraining input format (one sentence per line, blank lines
between documents; comma-separated globs, `.gz` / `.bz2` read too). Unlike spm_train:

  * sentences are lowercased (`--do_lower_case`) and normalised by the tokenizer's own `preprocess_text` first;
  * the sample is drawn in one streaming pass (seeded reservoir), so memory is bounded on any corpus;
  * the same input and `--random_seed` give the same model bytes.

Writes `<model_prefix>.model` and `<model_prefix>.vocab`; with `--model_type=wordpiece` (the Chinese models'
kind, learned by tensorflow-text's `bert_vocab_from_dataset`) `<model_prefix>.txt`, for `--vocab_file`.
More in docs/vocabulary.md.

Example:
  python create_vocab.py --input_file='data/corpus/*.txt' --model_prefix=/tmp/vocab/8k --vocab_size=8000
  python create_pretraining_data.py --input_file='data/corpus/*.txt' --spm_model_file=/tmp/vocab/8k.model ...
"""

import dataclasses
import os

from absl import flags, logging

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf import cli  # noqa: E402  pylint: disable=wrong-import-position
from albert_tf.settings import NON_NEGATIVE, POSITIVE, setting  # noqa: E402  pylint: disable=wrong-import-position
from albert_tf.text import vocab  # noqa: E402  pylint: disable=wrong-import-position

FLAGS = flags.FLAGS


@dataclasses.dataclass
class VocabRequest:
    """What one run reads and writes: each field is this script's flag of the same name (the trainer's flags are
    `vocab.SentencePieceOptions`')."""

    input_file: str = setting(None, "Input text files: comma-separated files or glob patterns (.gz/.bz2 too); one "
                                    "sentence per line, blank lines between documents (skipped).", role="input_files",
                              required=True)
    model_prefix: str = setting(None, "Output prefix: writes <prefix>.model and <prefix>.vocab (SentencePiece) or "
                                      "<prefix>.txt (WordPiece).",
                                role="output_prefix", writes=(".model", ".vocab", ".txt"), records=True,
                                required=True)
    input_sentence_size: int = setting(vocab.DEFAULT_INPUT_SENTENCE_SIZE, "Sentences sampled from the input "
                                                                          "(uniformly, in one pass); bounds memory.",
                                       bounds=POSITIVE)
    do_lower_case: bool = setting(True, "Lower-case the text (True for uncased models), as the tokenizer will.")
    random_seed: int = setting(vocab.DEFAULT_SEED, "Seed of the sentence sample and of SentencePiece.")
    progress_interval: float = setting(10.0, "Seconds between progress lines (0: none).", bounds=NON_NEGATIVE)


cli.define_flags(VocabRequest)
cli.define_flags(vocab.SentencePieceOptions)


def main(argv):
    del argv  # cli.run refuses positional arguments
    request = cli.params_from_flags(VocabRequest)
    options = cli.params_from_flags(vocab.SentencePieceOptions, control_symbols=tuple(FLAGS.control_symbols),
                                    user_defined_symbols=tuple(FLAGS.user_defined_symbols))
    result = vocab.create_vocab(
        request.input_file, request.model_prefix, options, input_sentence_size=request.input_sentence_size,
        seed=request.random_seed, do_lower_case=request.do_lower_case, progress_interval=request.progress_interval)
    logging.info("%s", result.summary())
    return 0


run = cli.console_command(main, __doc__)

if __name__ == "__main__":
    run()
