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
from albert_tf.tasks.squad import SquadParams, SquadTask, run_squad

cli.define_flags(SquadParams, exclude=cli.runtime_settings())
flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary: not supported for SQuAD (see --spm_model_file).")
flags.DEFINE_string("predict_feature_left_file", None, "Accepted for compatibility and unused: what the original "
                                                       "pickled there is stored in --predict_feature_file.")
flags.DEFINE_bool("use_einsum", True, "Accepted for compatibility and unused: the attention here always runs as "
                                       "einsums.")
cli.define_hub_module_flag()
cli.define_tpu_flags()
cli.define_runtime_flags()

FLAGS = flags.FLAGS


def _note_unused_flags():
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
    _note_unused_flags()
    # pylint: disable=import-outside-toplevel
    from albert_tf.config import AlbertConfig

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


run = cli.console_command(main, __doc__)

if __name__ == "__main__":
    run()
