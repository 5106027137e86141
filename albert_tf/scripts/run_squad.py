r"""Fine-tune ALBERT on SQuAD v1.1 or v2.0, predict, score with the official metrics, and export (the original's
`run_squad_v1.py` / `run_squad_v2.py` flags in one script; `--version_2_with_negative` selects v2.0).

    python run_squad.py --albert_config_file=albert_base/albert_config.json \
      --spm_model_file=albert_base/30k-clean.model --init_checkpoint=albert_base/model.ckpt-best \
      --train_file=train-v2.0.json --predict_file=dev-v2.0.json --version_2_with_negative \
      --train_feature_file=out/train.tf_record --predict_feature_file=out/dev.tf_record \
      --output_dir=out --do_train --do_predict --export_dir=out/export

Writes to --output_dir: checkpoints (resumed when the run restarts), `predictions.json`, `nbest_predictions.json`,
for v2.0 `null_odds.json` (null score per question: the lowest answerability logit over its windows), and when
the predict file has answers `eval_results.txt` with the official scores:

* v1.1: `exact_match`, `f1`.
* v2.0: `exact`, `f1`, `HasAns_*`, `NoAns_*`: predictions.json as written (a question is answered "" when its
  null score is above the threshold: --null_score_diff_threshold, else the best-F1 threshold tuned on this same
  file, as the original did); `heldout_*`: the threshold chosen on held-out questions (the file split by article
  in two halves, each scored with the threshold tuned on the other); `dev_tuned_best_*`: the official best
  threshold search on the whole file (optimistic: the threshold is tuned on the questions it is scored on).

Exports (with --export_dir): `ids/` (input ids -> logits, and the v2.0 answerability logit) and `text/` (question
and context strings -> the same plus the best span), both loadable with tensorflow + tensorflow_text alone. With
--export_huggingface_dir (v1.1), a folder transformers' AutoModelForQuestionAnswering and AutoTokenizer open.
"""

import time

from absl import flags, logging

from albert_tf import cli

flags.DEFINE_string("albert_config_file", None, "The albert_config.json of the pre-trained model.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary: not supported for SQuAD (see --spm_model_file).")
flags.DEFINE_string("spm_model_file", None, "The SentencePiece model the model was trained with (30k-clean.model).")
flags.DEFINE_string("output_dir", None, "Where checkpoints, predictions and eval_results.txt are written.")
flags.DEFINE_string("train_file", None, "SQuAD JSON for training, e.g. train-v1.1.json (a .zip holding it works).")
flags.DEFINE_string("predict_file", None, "SQuAD JSON to predict, e.g. dev-v1.1.json; scored when it has answers.")
flags.DEFINE_string("train_feature_file", None, "Training feature cache (TFRecord); written if missing or stale, "
                                                "else read. Default: <output_dir>/train.tf_record.")
flags.DEFINE_string("predict_feature_file", None, "Prediction feature cache (TFRecord), as --train_feature_file. "
                                                  "Default: <output_dir>/predict.tf_record.")
flags.DEFINE_string("predict_feature_left_file", None, "Accepted for compatibility and unused: what the original "
                                                       "pickled there is stored in --predict_feature_file.")
flags.DEFINE_string("init_checkpoint", None, "Initial weights: an original TF1, Hugging Face, keras-hub or albert_tf "
                                             "checkpoint (pre-trained, or fine-tuned for --do_predict alone).")
flags.DEFINE_bool("do_lower_case", True, "Lowercase the input (True for the released uncased models).")
flags.DEFINE_integer("max_seq_length", 384, "Length of each window: [CLS] question [SEP] context [SEP] + padding.")
flags.DEFINE_integer("doc_stride", 128, "Context pieces between the starts of consecutive windows.")
flags.DEFINE_integer("max_query_length", 64, "Questions longer than this many pieces keep their first pieces.")
flags.DEFINE_bool("do_train", False, "Whether to fine-tune on --train_file.")
flags.DEFINE_bool("do_predict", False, "Whether to predict (and score) --predict_file.")
flags.DEFINE_integer("train_batch_size", 32, "Global batch size for training.")
flags.DEFINE_integer("predict_batch_size", 8, "Batch size for predictions.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate (AdamW, as the original).")
flags.DEFINE_float("num_train_epochs", 3.0, "Epochs over the training questions (steps = questions / batch x "
                                            "epochs, as the original).")
flags.DEFINE_float("warmup_proportion", 0.1, "Proportion of the steps with linear learning-rate warmup.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save a checkpoint.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "How many checkpoints to keep.")
flags.DEFINE_integer("iterations_per_loop", 1000, "Steps per call into the device (Keras steps_per_execution).")
flags.DEFINE_integer("n_best_size", 20, "Candidates per window (v1.1) and length of the n-best lists.")
flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in pieces.")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD 2.0: questions may have no answer (the v2 head).")
flags.DEFINE_integer("start_n_top", 5, "v2.0: beam size for the start positions.")
flags.DEFINE_integer("end_n_top", 5, "v2.0: beam size for the end positions.")
flags.DEFINE_float("dropout_prob", 0.1, "v2.0: dropout of the answerability layer.")
flags.DEFINE_float("null_score_diff_threshold", None, "v2.0: answer \"\" when a question's null score is above "
                                                      "this. Default: tuned on --predict_file when it has answers "
                                                      "(as the original), else 0.0.")
flags.DEFINE_bool("use_einsum", True, "Accepted for compatibility and unused: the attention here always runs as "
                                       "einsums.")
flags.DEFINE_string("export_dir", None, "Where to write the SavedModels (ids/ and text/).")
flags.DEFINE_string("export_huggingface_dir", None, "SQuAD v1.1: where to write, after the run, the Hugging Face "
                                                    "folder of the final weights (AlbertForQuestionAnswering, "
                                                    "config and tokenizer); an earlier export there is replaced.")
flags.DEFINE_bool("dynamic_padding", True, "SQuAD 2.0: predict in batches of windows of similar length, each cut to "
                                           "its longest window (same predictions, less work; else padded to "
                                           "--max_seq_length). v1.1 and TPUs always pad to --max_seq_length (the "
                                           "original's v1.1 n-best ranks padding positions too).")
flags.DEFINE_integer("random_seed", 12345, "Seed of the initialisation, the example shuffle and the input order.")
cli.define_hub_module_flag()
cli.define_tpu_flags()
cli.define_runtime_flags()

FLAGS = flags.FLAGS

WORDPIECE_MESSAGE = (
    "run_squad.py needs --spm_model_file. SQuAD answers are located by aligning SentencePiece pieces to the "
    "context characters; a WordPiece --vocab_file (the Chinese ALBERT models) is not supported for SQuAD, as in "
    "the original release, whose SQuAD code uses the SentencePiece model directly. Nothing was read or written.")


def _check_flags():
    if not FLAGS.spm_model_file:
        raise cli.UsageError(WORDPIECE_MESSAGE if FLAGS.vocab_file else "--spm_model_file is required")
    for name in ("albert_config_file", "output_dir"):
        if not FLAGS[name].value:
            raise cli.UsageError(f"--{name} is required")
    if FLAGS.predict_feature_left_file:
        logging.info("--predict_feature_left_file is not needed: the windows' metadata is in the feature file")


def _print_results(outcome, version_2):
    results = outcome.get("eval_results")
    if not results:
        return
    if not version_2:
        print(f"  SQuAD v1.1: exact_match={results['exact_match']:.2f} f1={results['f1']:.2f} "
              f"({outcome['predict_examples']} questions)")
        return
    print(f"  SQuAD v2.0 ({results['total']} questions):")
    print(f"    held-out threshold (2-fold by article, thresholds {results['heldout_thresholds']}): "
          f"exact={results['heldout_exact']:.2f} f1={results['heldout_f1']:.2f}")
    print(f"    threshold tuned on this file (optimistic; the original's report): "
          f"exact={results['dev_tuned_best_exact']:.2f} f1={results['dev_tuned_best_f1']:.2f} "
          f"(f1 threshold {results['dev_tuned_best_f1_thresh']:.4f})")
    print(f"    predictions.json (threshold {outcome['null_score_diff_threshold']:.4f}, "
          f"{outcome['null_score_diff_threshold_source']}): exact={results['exact']:.2f} f1={results['f1']:.2f}")


def main(argv):
    del argv
    _check_flags()
    # pylint: disable=import-outside-toplevel
    from albert_tf.config import AlbertConfig
    from albert_tf.tasks.squad import SquadParams, SquadTask, run_squad

    params = cli.params_from_flags(SquadParams, albert_config=AlbertConfig.from_json_file(FLAGS.albert_config_file),
                                   init_checkpoint=cli.init_checkpoint())
    start = time.time()
    task = SquadTask()
    outcome = run_squad(params, task)
    print(f"\nDone in {time.time() - start:.0f} s.")
    if task.train is not None:
        print(f"  trained to step {outcome['step']} ({len(task.train.examples)} questions, "
              f"{task.train.num_features} windows): {outcome['output_dir']}")
    for name, path in outcome.get("files", {}).items():
        print(f"  {name}: {path}")
    _print_results(outcome, FLAGS.version_2_with_negative)
    for kind, path in (outcome.get("export_dir") or {}).items():
        print(f"  SavedModel ({kind}): {path}")
    if outcome.get("export_huggingface_dir"):
        print(f"  Hugging Face folder: {outcome['export_huggingface_dir']}")


def run():
    """The console command: `main` under `albert_tf.cli.run`."""
    cli.run(main, __doc__)


if __name__ == "__main__":
    run()
