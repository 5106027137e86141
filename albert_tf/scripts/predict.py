"""Run an exported ALBERT SavedModel on a text file (one example per line, or two tab-separated texts per line for
pairs), in batches with progress, writing one JSON object per example.

    # a classifier export (its `text` / `text_pair` signatures): probabilities, predictions (and labels)
    python predict.py --export_dir=export/sst2 --input_file=reviews.txt --output_file=predictions.jsonl

    # a preprocessing export + an encoder export: one pooled_output embedding per example
    python predict.py --export_dir=export/preprocessing --encoder_dir=export/encoder \
      --input_file=sentences.txt --output_file=embeddings.jsonl

    # columns of a wider TSV (e.g. a GLUE file with a header), and only some outputs
    python predict.py --export_dir=export/sst2 --input_file=glue/SST-2/dev.tsv --skip_header --text_columns=0 \
      --outputs=predictions --output_file=-

    # what TF Serving would answer to a REST body (checks the JSON before deploying)
    python predict.py --export_dir=export/encoder --request_json=request.json

Each output line: {"index": 0, "text": "..." (or "text_a"/"text_b", "question"/"context"), "<output>": [...]}.
Needs only tensorflow and tensorflow_text to run the export.
"""

import json
import sys

from absl import flags, logging

from albert_tf import cli

FLAGS = flags.FLAGS

flags.DEFINE_string("export_dir", None, "The SavedModel: a model with text signatures (e.g. a classifier export), or "
                                        "a preprocessing export (with --encoder_dir).")
flags.DEFINE_string("encoder_dir", None, "An encoder export to run on the ids of the preprocessing --export_dir.")
flags.DEFINE_string("input_file", None, "Text file: one example per line, or two tab-separated texts for pairs.")
flags.DEFINE_string("output_file", "-", "Where to write the JSON lines ('-' = standard output).")
flags.DEFINE_integer("batch_size", 32, "Examples per batch.")
flags.DEFINE_list("text_columns", None, "Take these (0-based) tab-separated columns as the text(s), e.g. 0 or 3,4.")
flags.DEFINE_bool("skip_header", False, "The first line is a header.")
flags.DEFINE_list("outputs", None, "Outputs to write (default: all of a text model; pooled_output of an encoder; "
                                   "add sequence_output for token vectors).")
flags.DEFINE_string("request_json", None, "Instead of a text file: a TF Serving REST :predict body (a file, or '-' "
                                          "for standard input) to answer as the model server would.")


def main(argv):
    if len(argv) > 1:
        raise cli.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    if not FLAGS.export_dir:
        raise cli.UsageError("--export_dir is required")
    if not (FLAGS.input_file or FLAGS.request_json):
        raise cli.UsageError("--input_file (or --request_json) is required")
    text_columns = None
    if FLAGS.text_columns:
        try:
            text_columns = [int(c) for c in FLAGS.text_columns]
        except ValueError:
            raise cli.UsageError(f"--text_columns takes column numbers, got {','.join(FLAGS.text_columns)}") from None
        if len(text_columns) not in (1, 2) or min(text_columns) < 0:
            raise cli.UsageError("--text_columns takes one or two non-negative column numbers")

    from albert_tf import fileio  # pylint: disable=import-outside-toplevel
    from albert_tf.serving import batch_prediction, rest  # pylint: disable=import-outside-toplevel

    if FLAGS.output_file != "-":
        fileio.refuse_inputs_as_outputs(
            [("--output_file", FLAGS.output_file)],
            [("--input_file", FLAGS.input_file), ("--export_dir", FLAGS.export_dir),
             ("--encoder_dir", FLAGS.encoder_dir)])
    if FLAGS.request_json:
        if FLAGS.request_json == "-":
            text = batch_prediction.decode_text(sys.stdin.buffer.read(), "<stdin>")
        else:
            text = batch_prediction.read_text(FLAGS.request_json)
        with rest.ServingSession(FLAGS.export_dir) as session:
            print(json.dumps(session.predict(text)))
        return
    stats = batch_prediction.predict_file(FLAGS.export_dir, FLAGS.input_file, FLAGS.output_file,
                                 encoder_dir=FLAGS.encoder_dir, batch_size=FLAGS.batch_size,
                                 text_columns=text_columns, skip_header=FLAGS.skip_header, outputs=FLAGS.outputs)
    logging.info("Wrote %d predictions (signature %s) to %s in %.1f s (%.1f examples/s)", stats["examples"],
                 stats["signature"], stats["output_file"], stats["seconds"], stats["examples_per_second"])


def run():
    """The console command: `main` under `albert_tf.cli.run`."""
    cli.run(main, __doc__)


if __name__ == "__main__":
    run()
