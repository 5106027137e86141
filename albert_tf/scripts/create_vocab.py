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

import os

from absl import flags, logging

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf import cli  # noqa: E402  pylint: disable=wrong-import-position
from albert_tf.text import vocab  # noqa: E402  pylint: disable=wrong-import-position

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None, "Input text files: comma-separated files or glob patterns (.gz/.bz2 too); "
                    "one sentence per line, blank lines between documents (skipped).")
flags.DEFINE_string("model_prefix", None, "Output prefix: writes <prefix>.model and <prefix>.vocab (SentencePiece) "
                    "or <prefix>.txt (WordPiece).")
flags.DEFINE_integer("vocab_size", vocab.DEFAULT_VOCAB_SIZE, "Vocabulary size (WordPiece: approximate).")
flags.DEFINE_enum("model_type", vocab.DEFAULT_MODEL_TYPE, list(vocab.MODEL_TYPES),
                  "SentencePiece algorithm, or wordpiece (BERT-style vocabulary, as the Chinese models use).")
flags.DEFINE_float("character_coverage", vocab.DEFAULT_CHARACTER_COVERAGE,
                   "Share of characters the model covers (SentencePiece).")
flags.DEFINE_integer("input_sentence_size", vocab.DEFAULT_INPUT_SENTENCE_SIZE,
                     "Sentences sampled from the input (uniformly, in one pass); bounds memory.")
flags.DEFINE_integer("pad_id", vocab.PAD_ID, "Id of <pad> (SentencePiece; -1: none).")
flags.DEFINE_integer("unk_id", vocab.UNK_ID, "Id of <unk> (SentencePiece).")
flags.DEFINE_integer("bos_id", vocab.BOS_ID, "Id of <s> (SentencePiece; -1: none).")
flags.DEFINE_integer("eos_id", vocab.EOS_ID, "Id of </s> (SentencePiece; -1: none).")
flags.DEFINE_list("control_symbols", list(vocab.CONTROL_SYMBOLS), "Control symbols, after <pad> and <unk>.")
flags.DEFINE_list("user_defined_symbols", list(vocab.USER_DEFINED_SYMBOLS),
                  "Pieces always kept whole (SentencePiece).")
flags.DEFINE_integer("num_threads", vocab.DEFAULT_NUM_THREADS, "SentencePiece trainer threads.")
flags.DEFINE_integer("max_sentence_length", vocab.DEFAULT_MAX_SENTENCE_LENGTH,
                     "Longer sentences (in bytes) are skipped by SentencePiece.")
flags.DEFINE_integer("max_sentencepiece_length", vocab.DEFAULT_MAX_SENTENCEPIECE_LENGTH,
                     "Longest piece (SentencePiece).")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the text (True for uncased models), as the tokenizer will.")
flags.DEFINE_integer("random_seed", vocab.DEFAULT_SEED, "Seed of the sentence sample and of SentencePiece.")
flags.DEFINE_float("progress_interval", 10.0, "Seconds between progress lines (0: none).")


def main(argv):
    if len(argv) > 1:
        raise cli.UsageError(f"unexpected arguments: {argv[1:]}")
    if not FLAGS.input_file:
        raise cli.UsageError("--input_file is required")
    if not FLAGS.model_prefix:
        raise cli.UsageError("--model_prefix is required")
    options = vocab.SentencePieceOptions(
        vocab_size=FLAGS.vocab_size, model_type=FLAGS.model_type, character_coverage=FLAGS.character_coverage,
        pad_id=FLAGS.pad_id, unk_id=FLAGS.unk_id, bos_id=FLAGS.bos_id, eos_id=FLAGS.eos_id,
        control_symbols=tuple(FLAGS.control_symbols), user_defined_symbols=tuple(FLAGS.user_defined_symbols),
        num_threads=FLAGS.num_threads, max_sentence_length=FLAGS.max_sentence_length,
        max_sentencepiece_length=FLAGS.max_sentencepiece_length)
    result = vocab.create_vocab(
        FLAGS.input_file, FLAGS.model_prefix, options, input_sentence_size=FLAGS.input_sentence_size,
        seed=FLAGS.random_seed, do_lower_case=FLAGS.do_lower_case, progress_interval=FLAGS.progress_interval)
    logging.info("%s", result.summary())
    return 0


def run():
    """The console command: `main` under `albert_tf.cli.run`."""
    cli.run(main, __doc__)


if __name__ == "__main__":
    run()
