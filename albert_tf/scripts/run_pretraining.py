r"""Pretrain ALBERT with masked LM + sentence-order prediction (the original's flags, plus strategy options).

    python run_pretraining.py --albert_config_file=albert_config.json --input_file='gs://bucket/data/*.tfrecord' \
      --output_dir=gs://bucket/out --do_train --do_eval --train_batch_size=4096 --num_train_steps=125000 \
      --strategy=tpu --tpu_name=local

Run with no data flags, it is a self-contained demo: it builds pretraining records from the public-domain
corpus and the real SentencePiece model shipped in `data/`, pretrains a tiny ALBERT for a few minutes on CPU,
evaluates, exports a SavedModel, and prints where everything is.
"""

import glob
import os
import time

from absl import flags

from albert_tf import cli
from albert_tf.tasks.pretraining import PretrainingParams, PretrainingTask

cli.define_flags(PretrainingParams, exclude=cli.runtime_settings())
flags.DEFINE_integer("num_workers", 2, "Demo only: processes that build the demo's pretraining records.")
cli.define_tpu_flags()
cli.define_runtime_flags()

FLAGS = flags.FLAGS

# The book held out of the demo's training records, to evaluate on.
DEMO_EVAL_BOOK = "gutenberg-chesterton-thursday.txt"


def _build_demo_data(data_dir):
    """Pretraining records from the shipped corpus (one book held out for eval); reused when present."""
    from albert_tf.data.pretraining import PretrainingConfig, create_pretraining_data  # pylint: disable=import-outside-toplevel

    train_file = os.path.join(data_dir, "train.tfrecord")
    eval_file = os.path.join(data_dir, "eval.tfrecord")
    if os.path.exists(train_file) and os.path.exists(eval_file):
        print(f"  reusing the demo records in {data_dir}")
        return train_file, eval_file
    books = sorted(glob.glob(os.path.join(cli.DATA, "corpus", "gutenberg-*.txt")))
    train_books = [b for b in books if not b.endswith(DEMO_EVAL_BOOK)]
    eval_books = [b for b in books if b.endswith(DEMO_EVAL_BOOK)]
    config = PretrainingConfig(max_seq_length=FLAGS.max_seq_length,
                               max_predictions_per_seq=FLAGS.max_predictions_per_seq, dupe_factor=2,
                               random_seed=FLAGS.random_seed)
    for inputs, output in ((train_books, train_file), (eval_books, eval_file)):
        stats = create_pretraining_data(
            ",".join(inputs), [output], spm_model_file=FLAGS.spm_model_file, vocab_file=FLAGS.vocab_file,
            do_lower_case=FLAGS.do_lower_case, config=config, num_workers=FLAGS.num_workers)
        print(f"  {stats.instances} pretraining instances -> {output}")
    return train_file, eval_file


def main(argv):
    del argv
    # pylint: disable=import-outside-toplevel
    from albert_tf.config import AlbertConfig
    from albert_tf.train import runner

    demo = cli.demo_running()
    if demo:
        print("No --input_file: running the embedded demo (tiny ALBERT on the shipped public-domain corpus).")
    config = AlbertConfig.from_json_file(FLAGS.albert_config_file)
    output_dir = FLAGS.output_dir
    export_dir = FLAGS.export_dir or (os.path.join(output_dir, "saved_model") if FLAGS.do_train else None)
    start = time.time()
    input_file, eval_input_file = FLAGS.input_file, FLAGS.eval_input_file
    if demo:
        print("Building pretraining records from data/corpus ...")
        input_file, eval_input_file = _build_demo_data(os.path.join(output_dir, "data"))
    params = cli.params_from_flags(PretrainingParams, albert_config=config, input_file=input_file,
                                   eval_input_file=eval_input_file, export_dir=export_dir)
    outcome = runner.run(PretrainingTask(), params)

    print(f"\nDone in {time.time() - start:.0f} s, at step {outcome['step']}.")
    print(f"  checkpoints and TensorBoard logs: {outcome['output_dir']}")
    if "train_examples_per_second" in outcome:
        print(f"  training speed: {outcome['train_examples_per_second']:.1f} examples/s")
    if "eval_results" in outcome:
        results = outcome["eval_results"]
        print(f"  eval ({outcome['eval_results_file']}): masked_lm_accuracy="
              f"{results['masked_lm_accuracy']:.4f} masked_lm_loss={results['masked_lm_loss']:.4f} "
              f"sentence_order_accuracy={results['sentence_order_accuracy']:.4f} "
              f"sentence_order_loss={results['sentence_order_loss']:.4f}")
    if outcome.get("export_dir"):
        print(f"  SavedModel (serving_default: input_ids, input_mask, segment_ids -> sequence_output, "
              f"pooled_output): {outcome['export_dir']}")


# data/demos/pretraining.json; a WordPiece --vocab_file given for the demo replaces its SentencePiece model.
run = cli.console_command(main, __doc__, cli.Demo("pretraining", when_missing="input_file",
                                                  unless_given=(("spm_model_file", "vocab_file"),)))

if __name__ == "__main__":
    run()
