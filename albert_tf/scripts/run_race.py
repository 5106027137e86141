r"""Fine-tune ALBERT on RACE (multiple-choice reading comprehension): the original's flags, plus strategy options.

    python run_race.py --data_dir=/data/race --albert_config_file=albert_config.json \
      --spm_model_file=30k-clean.model --init_checkpoint=albert_base/model.ckpt-best --output_dir=out/race \
      --do_train --do_eval --do_predict --max_seq_length=512 --max_qa_length=128 --train_batch_size=32 \
      --learning_rate=1e-5 --train_step=12000 --warmup_step=1000 --strategy=tpu --tpu_name=local

`--data_dir` holds `RACE/{train,dev,test}/{middle,high}/*.txt` (the official archive unpacked). As in the
original, --do_train and --do_eval default to True. Outputs in --output_dir: checkpoints (the run resumes from
them), eval_results.txt (accuracy, accuracy_middle, accuracy_high, eval_accuracy, eval_loss, global_step),
eval_predictions.{json,tsv} and, with --do_predict, test_predictions.{json,tsv} (question id -> predicted letter
and probabilities) and predict_results.txt when the test set has answers; after training, a SavedModel.

Run with no --data_dir, it is a self-contained demo: a tiny ALBERT trained for a minute on CPU on the RACE
sample shipped in data/race (a few dozen questions of the official dev set), then evaluated, used for
prediction and exported.
"""

import os
import time

from absl import flags

from albert_tf import cli
from albert_tf.tasks.race import RaceParams, run_race

cli.define_flags(RaceParams, exclude=cli.runtime_settings())
flags.DEFINE_flag(flags.Flag(flags.EnumParser(["race"], case_sensitive=False), flags.ArgumentSerializer(),
                             "task_name", "race", "The name of the task: race, in any case (as the original)."))
cli.define_hub_module_flag()
cli.define_tpu_flags()
cli.define_runtime_flags()

FLAGS = flags.FLAGS


def main(argv):
    del argv
    # pylint: disable=import-outside-toplevel
    from albert_tf.config import AlbertConfig

    if cli.demo_running():
        print("No --data_dir: running the embedded demo (tiny ALBERT on the RACE sample in data/race).")
    config = AlbertConfig.from_json_file(FLAGS.albert_config_file)
    export_dir = FLAGS.export_dir or (os.path.join(FLAGS.output_dir, "saved_model") if FLAGS.do_train else None)
    params = cli.params_from_flags(RaceParams, albert_config=config,
                                   init_checkpoint=cli.init_checkpoint(), export_dir=export_dir)
    start = time.time()
    outcome = run_race(params)

    print(f"\nDone in {time.time() - start:.0f} s, at step {outcome['step']}.")
    print(f"  checkpoints and TensorBoard logs: {outcome['output_dir']}")
    if "train_examples_per_second" in outcome:
        print(f"  training speed: {outcome['train_examples_per_second']:.1f} questions/s")
    if "eval_results" in outcome:
        results = outcome["eval_results"]
        levels = " ".join(f"accuracy_{level}={results[f'accuracy_{level}']:.4f}"
                          for level in ("middle", "high") if f"accuracy_{level}" in results)
        print(f"  dev (best checkpoint, step {outcome.get('best_step')}): accuracy={results['accuracy']:.4f} {levels} "
              f"over {results['num_examples']} questions")
    if "predictions" in outcome:
        print(f"  test predictions: {', '.join(outcome['predictions'])}")
    if "predict_results" in outcome:
        print(f"  test accuracy ({outcome['predict_results_file']}): {outcome['predict_results']['accuracy']:.4f}")
    if outcome.get("export_dir"):
        print(f"  SavedModel (serving_default: input_ids, input_mask, segment_ids [batch, 4, seq] -> probabilities,"
              f" logits, prediction, answer): {outcome['export_dir']}")


run = cli.console_command(main, __doc__, cli.Demo("race", when_missing="data_dir"))  # data/demos/race.json

if __name__ == "__main__":
    run()
