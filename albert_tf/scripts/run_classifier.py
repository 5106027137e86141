"""Fine-tune ALBERT on a GLUE task or on your own text-classification data (the original's flags, plus strategy
options).

GLUE (data_dir holds the GLUE folders, e.g. glue_data/SST-2/train.tsv):

    python run_classifier.py --task_name=sst-2 --data_dir=glue_data --output_dir=out/sst2 \
      --albert_config_file=albert_base/albert_config.json --spm_model_file=albert_base/30k-clean.model \
      --init_checkpoint=albert_base/model.ckpt-best --do_train --do_eval --do_predict --max_seq_length=128 \
      --train_batch_size=32 --learning_rate=3e-5 --train_step=20935 --warmup_step=1256 \
      --save_checkpoints_steps=1000 --export_dir=out/sst2/saved_model

Your own files (columns by position or, with a header row, by name; labels inferred from the train file unless
--label_list is given):

    python run_classifier.py --task_name=reviews --train_file=train.csv --dev_file=dev.csv --test_file=test.csv \
      --delimiter=comma --text_a_column=review --label_column=stars --output_dir=out/reviews ...

Outputs in --output_dir: checkpoints (the last --keep_checkpoint_max), eval_results.txt and eval_history.json
(every checkpoint's dev results), best_checkpoint/ and best_checkpoint.json (the best by the task's metric and its
step), test_results.tsv (probabilities) and submit_results.tsv (GLUE submission), with --export_dir a
SavedModel for TF Serving, and with --export_huggingface_dir a folder transformers'
AutoModelForSequenceClassification and AutoTokenizer open (label names included).
"""

import math

from absl import flags

from albert_tf import cli

flags.DEFINE_string("data_dir", None, "The input data dir: the GLUE folder holding the task's folder (e.g. SST-2/), "
                                      "or the task's folder itself. With --train_file etc., relative paths are "
                                      "looked up here.")
flags.DEFINE_string("albert_config_file", None, "The albert_config.json of the model (its architecture).")
flags.DEFINE_string("task_name", None, "The task: cola, mnli, mismnli, mrpc, qnli, qqp, rte, sst-2, sts-b, wnli; or "
                                       "any name for your own files (default 'custom').")
flags.DEFINE_string("vocab_file", None, "The WordPiece vocabulary (used when no --spm_model_file is given, e.g. the "
                                        "Chinese models).")
flags.DEFINE_string("spm_model_file", None, "The SentencePiece model (30k-clean.model).")
flags.DEFINE_string("output_dir", None, "Where checkpoints, results and predictions are written.")
flags.DEFINE_string("cached_dir", None, "Where the feature TFRecords are cached (default: --output_dir). Files are "
                                        "keyed by task, split, sequence length, data and tokenizer, so a stale cache "
                                        "is never reused.")
flags.DEFINE_string("init_checkpoint", None, "Initial weights: an original TF1, Hugging Face, keras-hub or albert_tf "
                                             "checkpoint (usually a pretrained model).")
flags.DEFINE_bool("do_lower_case", True, "Lowercase the input text (True for the uncased English models).")
flags.DEFINE_integer("max_seq_length", 512, "The maximum total input sequence length after tokenization; longer "
                                            "sequences are truncated.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to evaluate the checkpoints on the dev set.")
flags.DEFINE_bool("do_predict", False, "Whether to predict the test set.")
flags.DEFINE_integer("train_batch_size", 32, "Total (global) batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate.")
flags.DEFINE_integer("train_step", 1000, "Total number of training steps.")
flags.DEFINE_integer("warmup_step", 0, "Number of steps of linear learning-rate warmup.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save (and, with --do_eval, evaluate) a checkpoint.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "How many checkpoints to keep (0: all). The best one is kept apart "
                                               "in best_checkpoint/.")
flags.DEFINE_integer("iterations_per_loop", 1000, "Steps run per call into the device (Keras steps_per_execution).")
flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "The optimizer.")
flags.DEFINE_string("export_dir", None, "Where to write the SavedModel (signatures on ids, tf.Examples and text).")
flags.DEFINE_string("export_huggingface_dir", None, "Where to write, after the run, the Hugging Face folder of the "
                                                    "final weights (AlbertForSequenceClassification with the label "
                                                    "names, config and tokenizer); an earlier export there is "
                                                    "replaced.")
flags.DEFINE_float("threshold_to_export", float("nan"), "A classification threshold to serve with the exported model (output "
                                                "'threshold').")
flags.DEFINE_float("dropout_prob", 0.1, "Dropout rate on the pooled output before the classifier (the original "
                                        "hard-codes 0.1).")
flags.DEFINE_bool("dynamic_padding", True, "Pad each batch to its longest example (else to --max_seq_length): same "
                                           "predictions, less work. TPUs always pad to --max_seq_length.")
flags.DEFINE_bool("length_bucketing", False, "With --dynamic_padding, put training examples of similar length in "
                                             "the same batch (faster; changes which examples share a batch, where "
                                             "the original draws batches in shuffled order).")
flags.DEFINE_string("best_metric", None, "Result that picks the best checkpoint (default: the task's: eval_accuracy; "
                                         "f1 for mrpc/qqp; matthew_corr for cola; pearson for sts-b and regression).")
flags.DEFINE_integer("random_seed", 12345, "Seed of the initialisation and of the input order.")
# Your own data.
flags.DEFINE_string("train_file", None, "Your own data: the training file (CSV/TSV).")
flags.DEFINE_string("dev_file", None, "Your own data: the dev file.")
flags.DEFINE_string("test_file", None, "Your own data: the test file (no label column needed).")
flags.DEFINE_string("text_a_column", "0", "Your own data: column of the (first) text: 0-based position or header name.")
flags.DEFINE_string("text_b_column", None, "Your own data: column of the second text of a pair.")
flags.DEFINE_string("label_column", "1", "Your own data: column of the label.")
flags.DEFINE_string("guid_column", None, "Your own data: column of an example id (the index in submit_results.tsv).")
flags.DEFINE_string("delimiter", "tab", "Your own data: field separator: tab, comma, or one character.")
flags.DEFINE_bool("has_header", True, "Your own data: whether the files' first row is a header.")
flags.DEFINE_list("label_list", None, "Your own data: the labels in index order (default: sorted labels of the train "
                                      "file).")
flags.DEFINE_bool("regression", False, "Your own data: the label is a number (one output, squared-error loss).")
cli.define_hub_module_flag()
cli.define_tpu_flags()
cli.define_runtime_flags()

FLAGS = flags.FLAGS


def _processor():
    from albert_tf.data import glue  # pylint: disable=import-outside-toplevel

    if FLAGS.train_file or FLAGS.dev_file or FLAGS.test_file:
        return glue.get_processor(
            FLAGS.task_name, train_file=FLAGS.train_file, dev_file=FLAGS.dev_file, test_file=FLAGS.test_file,
            text_a_column=FLAGS.text_a_column, text_b_column=FLAGS.text_b_column, label_column=FLAGS.label_column,
            guid_column=FLAGS.guid_column, delimiter=FLAGS.delimiter, header=FLAGS.has_header,
            labels=FLAGS.label_list or None, regression=FLAGS.regression)
    if not FLAGS.data_dir:
        raise cli.UsageError("--data_dir is required for a GLUE task (or give your own --train_file/--dev_file/"
                             "--test_file)")
    return glue.get_processor(FLAGS.task_name)


def main(argv):
    del argv
    # pylint: disable=import-outside-toplevel
    from albert_tf.config import AlbertConfig
    from albert_tf.tasks.classification import ClassifierParams, run_classifier

    if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict):
        raise cli.UsageError("At least one of --do_train, --do_eval or --do_predict must be True.")
    for name in ("albert_config_file", "output_dir"):
        if not FLAGS[name].value:
            raise cli.UsageError(f"--{name} is required")
    if not (FLAGS.spm_model_file or FLAGS.vocab_file):
        raise cli.UsageError("--spm_model_file (or --vocab_file for WordPiece models) is required")
    threshold = FLAGS.threshold_to_export
    if threshold is not None and math.isnan(threshold):
        threshold = None  # the original's default: no threshold
    params = cli.params_from_flags(ClassifierParams, albert_config=AlbertConfig.from_json_file(FLAGS.albert_config_file),
                                   processor=_processor(), init_checkpoint=cli.init_checkpoint(),
                                   threshold_to_export=threshold)
    outcome = run_classifier(params)

    print(f"\nDone at step {outcome['step']}. Output: {outcome['output_dir']}")
    if "train_examples_per_second" in outcome:
        print(f"  training: {outcome['train_seconds']:.0f} s, {outcome['train_examples_per_second']:.1f} examples/s")
    if "eval_results" in outcome:
        shown = ", ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in sorted(outcome["eval_results"].items()))
        where = f"best checkpoint (step {outcome['best_step']})" if "best_step" in outcome else "eval"
        print(f"  {where}: {shown}")
    if "test_results_file" in outcome:
        print(f"  predictions: {outcome['test_results_file']}, {outcome['submit_results_file']}")
    if outcome.get("export_dir"):
        print(f"  SavedModel: {outcome['export_dir']}")
    if outcome.get("export_huggingface_dir"):
        print(f"  Hugging Face folder: {outcome['export_huggingface_dir']}")


def run():
    """The console command: `main` under `albert_tf.cli.run`."""
    cli.run(main, __doc__)


if __name__ == "__main__":
    run()
