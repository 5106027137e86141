r"""Run an exported ALBERT SavedModel on a text file (one example per line, or two tab-separated texts per line for
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

import dataclasses
import json
import sys

from absl import flags, logging

from albert_tf import cli
from albert_tf.settings import NON_NEGATIVE, POSITIVE, Range, setting

FLAGS = flags.FLAGS


@dataclasses.dataclass
class PredictRequest:
    """What one run reads, runs and writes: each field is this script's flag of the same name."""

    export_dir: str = setting(None, "The SavedModel: a model with text signatures (e.g. a classifier export), or a "
                                    "preprocessing export (with --encoder_dir).", role="input_tree",
                              required=True)
    encoder_dir: str = setting(None, "An encoder export to run on the ids of the preprocessing --export_dir.",
                               role="input_tree")
    input_file: str = setting(None, "Text file: one example per line, or two tab-separated texts for pairs.",
                              role="input_file", required=("request_json",))
    output_file: str = setting("-", "Where to write the JSON lines ('-' = standard output).", role="output_file",
                              records=True)
    batch_size: int = setting(32, "Examples per batch.", bounds=POSITIVE)
    text_columns: list = setting(None, "Take these (0-based) tab-separated columns as the text(s), e.g. 0 or 3,4.",
                                 items=int, count=Range(1, 2), bounds=NON_NEGATIVE)
    skip_header: bool = setting(False, "The first line is a header.")
    pair_inputs: list = setting(None, "Pairs: the export's two text inputs in the order of the columns, e.g. "
                                      "premise,hypothesis, where they are not text_a/text_b, question/context or "
                                      "sentence1/sentence2 (a SavedModel keeps no order of its inputs).",
                                count=Range(2, 2))
    outputs: list = setting(None, "Outputs to write (default: all of a text model; pooled_output of an encoder; add "
                                  "sequence_output for token vectors).")
    request_json: str = setting(None, "Instead of a text file: a TF Serving REST :predict body (a file, or '-' for "
                                      "standard input) to answer as the model server would.", role="input_file")


cli.define_flags(PredictRequest)


def main(argv):
    del argv  # cli.run refuses positional arguments
    request = cli.params_from_flags(PredictRequest)

    from albert_tf.serving import batch_prediction, rest  # pylint: disable=import-outside-toplevel

    if request.request_json:
        if request.request_json == "-":
            text = batch_prediction.decode_text(sys.stdin.buffer.read(), "<stdin>")
        else:
            text = batch_prediction.read_text(request.request_json)
        source = "<stdin>" if request.request_json == "-" else request.request_json
        with rest.ServingSession(request.export_dir) as session:
            try:
                answer = session.predict(text)
            except rest.RestError as err:
                raise rest.RestError(f"--request_json {source}: {err}") from None
        print(json.dumps(answer))
        return
    stats = batch_prediction.predict_file(request.export_dir, request.input_file, request.output_file,
                                          encoder_dir=request.encoder_dir, batch_size=request.batch_size,
                                          text_columns=request.text_columns or None, skip_header=request.skip_header,
                                          outputs=request.outputs, pair_inputs=request.pair_inputs)
    logging.info("Wrote %d predictions (signature %s) to %s in %.1f s (%.1f examples/s)", stats["examples"],
                 stats["signature"], stats["output_file"], stats["seconds"], stats["examples_per_second"])


run = cli.console_command(main, __doc__)

if __name__ == "__main__":
    run()
