r"""Fine-tune ALBERT on a GLUE task or on your own text-classification data (the original's flags, plus strategy
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
from albert_tf.tasks.classification import ClassifierParams, run_classifier


cli.define_flags(ClassifierParams, exclude=cli.runtime_settings())
cli.define_hub_module_flag()
cli.define_tpu_flags()
cli.define_runtime_flags()

FLAGS = flags.FLAGS


def main(argv):
    del argv
    # pylint: disable=import-outside-toplevel
    from albert_tf.config import AlbertConfig

    threshold = FLAGS.threshold_to_export
    if threshold is not None and math.isnan(threshold):
        threshold = None  # the original's default: no threshold
    config = AlbertConfig.from_json_file(FLAGS.albert_config_file)
    params = cli.params_from_flags(ClassifierParams, albert_config=config, init_checkpoint=cli.init_checkpoint(),
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


run = cli.console_command(main, __doc__)

if __name__ == "__main__":
    run()
