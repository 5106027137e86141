r"""Creates ALBERT pretraining TFRecords (masked LM + sentence-order prediction) from raw text.

Same flags, defaults and records as the original release's `create_pretraining_data.py`; input is one sentence per
line with a blank line between documents. Beyond the original:

  --num_workers         processes building records (0: one per CPU); the output does not depend on it
  --output_dir          write --num_output_shards files `pretraining-0000i-of-0000N.tfrecord` there
  --num_output_shards   (instead of listing them in --output_file)
  --shard_size_mb       input is processed in shards of this much text (bounds memory)
  --progress_interval   seconds between progress lines
  --runner              run as an Apache Beam pipeline (DirectRunner, DataflowRunner, FlinkRunner, SparkRunner,
                        ...); Beam's own options (--direct_num_workers, --project, --temp_location, --flink_master,
                        ...) then pass through. Needs `pip install --no-deps -r requirements-beam.txt`; see docs/beam.md
  --[no]global_shuffle  (on by default) spread every input shard's records over the whole output, as the
                        original's in-memory shuffle does; off: shard after shard (docs/pretraining_data.md)

The same flags and seed give byte-identical files. The algorithm, the reproducibility fix and the differences from
the original are described in `docs/pretraining_data.md`.

Example:
  python create_pretraining_data.py --input_file='data/corpus/*.txt' --output_file=/tmp/albert_pretrain.tfrecord \
    --spm_model_file=data/30k-clean.model --max_seq_length=128 --max_predictions_per_seq=19 --dupe_factor=5

WordPiece models (the Chinese ALBERTs) give --vocab_file instead of --spm_model_file; whole words are then a piece
and its "##" continuations:
  python create_pretraining_data.py --input_file=tests/fixtures/zh_corpus.txt --output_file=/tmp/zh.tfrecord \
    --vocab_file=data/vocab_chinese.txt --max_seq_length=128 --max_predictions_per_seq=19 --dupe_factor=5
"""

import dataclasses
import os
import sys

from absl import flags, logging

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf import cli  # noqa: E402  pylint: disable=wrong-import-position
from albert_tf.data import pretraining  # noqa: E402  pylint: disable=wrong-import-position
from albert_tf.progress import ProgressLog  # noqa: E402  pylint: disable=wrong-import-position
from albert_tf.settings import NON_NEGATIVE, POSITIVE, Range, setting  # noqa: E402  pylint: disable=wrong-import-position

FLAGS = flags.FLAGS


def _one_prefix_with_runner(output_file, values):
    """--output_file's declared check: a Beam pipeline writes --num_output_shards files from one name prefix."""
    if values.get("runner") and "," in output_file:
        raise cli.UsageError("with --runner, --output_file is one name prefix: the pipeline writes "
                             "--num_output_shards files <prefix>-00000-of-0000N")


@dataclasses.dataclass
class PretrainingDataRequest:
    """What one run reads and writes, and how: each field is this script's flag of the same name (the generation
    flags are `PretrainingConfig`'s)."""

    # The original's.
    input_file: str = setting(None, "Input raw text file, or comma-separated list of files / glob patterns.",
                              role="input_files", required=True)
    output_file: str = setting(None, "Output TF example file, or comma-separated list of files; instances are spread "
                                     "over them round-robin.", role="output_files", replaced_by="overwrite",
                               records=True, required=("output_dir",), excludes=("output_dir",),
                               check=_one_prefix_with_runner)
    vocab_file: str = setting(None, "WordPiece vocabulary file (used when no --spm_model_file is given).",
                              role="input_file")
    spm_model_file: str = setting(None, "SentencePiece model file, e.g. data/30k-clean.model.", role="input_file",
                                  required=("vocab_file",))
    do_lower_case: bool = setting(True, "Lower-case the input text (True for uncased models).")
    # Additions.
    num_workers: int = setting(0, "Worker processes (0: one per CPU). Does not change the output.", bounds=NON_NEGATIVE)
    output_dir: str = setting(None, "Directory to write --num_output_shards TFRecord files into (instead of "
                                    "--output_file).", role="output_dir", writes=(pretraining.SHARD_NAME,),
                              replaced_by="overwrite", records=True)
    num_output_shards: int = setting(1, "Number of files written into --output_dir.", bounds=POSITIVE)
    shard_size_mb: float = setting(pretraining.DEFAULT_SHARD_SIZE_MB,
                                   "Input is processed in shards of about this many MB of text, cut at document "
                                   "boundaries. Bounds memory; random-document segments and shuffling stay within a "
                                   "shard. Changes the output.", bounds=Range(0, low_open=True))
    progress_interval: float = setting(10.0, "Seconds between progress lines (0: none).", bounds=NON_NEGATIVE)
    runner: str = setting(None, "Run as an Apache Beam pipeline on this Beam runner (DirectRunner: Beam's local "
                                "Python runner; DataflowRunner, FlinkRunner, SparkRunner, PortableRunner); every flag "
                                "this script does not define is then a Beam pipeline option. Default: the local "
                                "process pool. docs/beam.md.")
    overwrite: bool = setting(False, "Local runs: replace output files that exist already (refused otherwise, as "
                                     "the Beam runner always refuses them). Shards of an earlier run with another "
                                     "--num_output_shards are refused either way: a training glob would mix them in.",
                              excludes=("runner",), why="with --runner, existing outputs are always refused (remove "
                                                        "them first)")
    global_shuffle: bool = setting(True, "Spread every input shard's records over the whole output, as the "
                                         "original's in-memory shuffle does (local: the shards wait in temporary "
                                         "files, as much disk as the output; Beam: an extra shuffle of every record, "
                                         "docs/beam.md). Off: shard after shard.")


cli.define_flags(PretrainingDataRequest)
cli.define_flags(pretraining.PretrainingConfig)
# The original's flags that are no setting: accepted so that its command lines run.
flags.DEFINE_string("input_file_mode", "r", "Accepted for compatibility and unused: input is read as UTF-8 "
                    "(invalid bytes dropped).")
flags.DEFINE_bool("parallel", False, "Accepted for compatibility and unused: parallelism is --num_workers.")

# Beam's pipeline options of this run (the arguments this script's flags do not claim), when --runner is given.
_PIPELINE_ARGS = []


def _output_files(request):
    """The local run's outputs (whether they may be replaced, and shards of another count, the guard has checked:
    see the declarations of --output_file and --output_dir)."""
    if request.output_dir:
        return pretraining.output_shard_paths(request.output_dir, request.num_output_shards)
    return [p for p in request.output_file.split(",") if p]


def _beam_outputs(request):
    """(prefix, suffix) of the Beam outputs: `<prefix>-SSSSS-of-NNNNN<suffix>` files."""
    if request.output_dir:
        return request.output_dir.rstrip("/") + "/pretraining", ".tfrecord"
    return request.output_file, ""


def _beam_main(request, config):
    try:
        from albert_tf.data.pretraining import beam  # pylint: disable=import-outside-toplevel
    except ImportError as err:
        raise cli.UsageError(f"--runner needs Apache Beam ({err}); install it with "
                             "`pip install --no-deps -r requirements-beam.txt` (docs/beam.md)") from None
    prefix, suffix = _beam_outputs(request)
    logging.info("writing %s (%d files) with Beam's %s",
                 beam.output_names(prefix, request.num_output_shards, suffix)[0], request.num_output_shards,
                 request.runner)
    return beam.create_pretraining_data_beam(
        request.input_file, prefix, spm_model_file=request.spm_model_file, vocab_file=request.vocab_file,
        do_lower_case=request.do_lower_case, config=config, shard_size_mb=request.shard_size_mb,
        num_output_shards=request.num_output_shards, file_name_suffix=suffix, global_shuffle=request.global_shuffle,
        pipeline_args=_PIPELINE_ARGS, input_what="--input_file",
        output_what="--output_dir" if request.output_dir else "--output_file")


def main(argv):
    del argv  # cli.run refuses positional arguments
    request = cli.params_from_flags(PretrainingDataRequest)
    if FLAGS.parallel:
        logging.info("--parallel is implied: using --num_workers=%d", request.num_workers)
    config = cli.params_from_flags(pretraining.PretrainingConfig)
    if request.runner:
        stats = _beam_main(request, config)
        for line in stats.summary().splitlines():
            logging.info("%s", line)
        return 0
    output_files = _output_files(request)
    logging.info("writing %s", ", ".join(output_files))
    stats = pretraining.create_pretraining_data(
        request.input_file, output_files, spm_model_file=request.spm_model_file, vocab_file=request.vocab_file,
        do_lower_case=request.do_lower_case, config=config, num_workers=request.num_workers,
        shard_size_mb=request.shard_size_mb, global_shuffle=request.global_shuffle,
        progress=ProgressLog(request.progress_interval, first_at_once=True), input_what="--input_file",
        output_what="--output_dir shard" if request.output_dir else "--output_file")
    for line in stats.summary().splitlines():
        logging.info("%s", line)
    return 0


def _is_script_flag(name):
    name = name.split("=", 1)[0]
    return name in FLAGS or (name.startswith("no") and name[2:] in FLAGS and FLAGS[name[2:]].boolean)


def _with_runner(argv):
    return any(arg == "--runner" or arg.startswith("--runner=") for arg in argv[1:])


def split_pipeline_args(argv, is_script_flag):
    """(the script's arguments, Beam's): every `--name[=value]` whose name `is_script_flag` does not know, with its
    separate value if it has one, goes to Beam; `--runner` and `--num_workers` (Dataflow's too) go to both."""
    ours, theirs = [], []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name = arg.lstrip("-").split("=", 1)[0] if arg.startswith("-") and arg != "--" else None
        if name is None or is_script_flag(name):
            ours.append(arg)
            if name in ("runner", "num_workers"):
                theirs.append(arg)
                if "=" not in arg and i + 1 < len(argv):
                    theirs.append(argv[i + 1])
        else:
            theirs.append(arg)
            if "=" not in arg and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                i += 1
                theirs.append(argv[i])
        i += 1
    return ours, theirs


def run():
    """The console command: `main` under `albert_tf.cli.run`. With `--runner`, the arguments this script's flags do
    not claim are Beam's pipeline options (absl would refuse them)."""
    if _with_runner(sys.argv):
        sys.argv[1:], _PIPELINE_ARGS[:] = split_pipeline_args(sys.argv[1:], _is_script_flag)
    cli.run(main, __doc__)


if __name__ == "__main__":
    run()
