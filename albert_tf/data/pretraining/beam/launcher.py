"""The launcher (`create_pretraining_data_beam`): checks the flags, tokenizer, inputs and outputs here, builds the
pipeline of the package docstring, runs it with Beam's logs kept out of the terminal, and turns what it ends with
into `Stats` or one error line, removing every file a failed run made."""

import contextlib
import logging
import math
import os
import re
import shutil
import sys
import tempfile
import time
from typing import Tuple

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.runners.runner import PipelineState

from albert_tf import fileio
from albert_tf.data.pretraining.beam.build_records import METRICS_NAMESPACE, ShardRecordsFn, file_shards
from albert_tf.data.pretraining.beam.files import (delete, list_inputs, match, new_temp_dir, output_glob,
                                                   output_names, temp_dirs)
from albert_tf.data.pretraining.beam.options import direct_runner, is_direct, pipeline_options
from albert_tf.data.pretraining.beam.worker_errors import marked_message, quiet_marked_errors
from albert_tf.data.pretraining.beam.write import concat_segments, finalize, write_bucket, write_file, write_ranges
from albert_tf.data.pretraining.config import PretrainingConfig, PretrainingDataError, Stats
from albert_tf.data.pretraining.shards import DEFAULT_SHARD_SIZE_MB, shard_bytes_of
from albert_tf.text import tokenization

logger = logging.getLogger(__name__)

# Records per global-shuffle bucket (about; from an estimate of the run's records). A bucket is held in one
# worker's memory while it is sorted by its random keys: 50k records of max_seq_length 512 are about 150 MB.
SHUFFLE_BUCKET_RECORDS = 50_000
# Text bytes per token for the bucket-count estimate (English SentencePiece: about 4.5).
_BYTES_PER_TOKEN = 4.0
# Local outputs pass the records from BuildRecords to the next step through segment files (False: through the
# runner, as for remote outputs; the tests run both).
_LOCAL_SEGMENTS = True


def shuffle_bucket_count(text_bytes, config, num_files=1):
    """Buckets of the global shuffle: about `SHUFFLE_BUCKET_RECORDS` records each, estimated from the input size,
    rounded up to a multiple of `num_files` (bucket b is written to output file b % num_files)."""
    estimate = config.dupe_factor * text_bytes / (_BYTES_PER_TOKEN * max(config.max_num_tokens, 1))
    return num_files * math.ceil(max(1, math.ceil(estimate / SHUFFLE_BUCKET_RECORDS)) / num_files)


def _stats(result, ngram):
    stats = Stats(ngram_drawn=[0] * ngram, ngram_accepted=[0] * ngram)
    query = result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))
    for counter in query["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        name = counter.key.metric.name
        kind = re.fullmatch(r"ngram_(drawn|accepted)_(\d+)", name)
        if kind:
            getattr(stats, f"ngram_{kind.group(1)}")[int(kind.group(2)) - 1] += value
        elif hasattr(stats, name):
            setattr(stats, name, getattr(stats, name) + value)
    return stats


@contextlib.contextmanager
def stderr_to_log():
    """Yields the path of a log file that receives everything written to standard error meanwhile (this process's
    and its worker subprocesses': Beam's logs and workers' tracebacks, which are long and not the user's to read
    unless the run fails). The file is removed when the block succeeds; a failure's one line names it."""
    log = tempfile.NamedTemporaryFile(prefix="albert_tf-beam-", suffix=".log", delete=False)  # pylint: disable=consider-using-with
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(log.fileno(), 2)
    ok = False
    try:
        yield log.name
        ok = True
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        log.close()
        if ok or os.path.getsize(log.name) == 0:
            os.remove(log.name)


@contextlib.contextmanager
def _importable_by_workers(local):
    """Beam's local subprocess workers import this package: its root on their PYTHONPATH for the run."""
    root = os.path.abspath(__file__)
    for _ in range(__name__.count(".") + 1):  # albert_tf/data/pretraining/beam/launcher.py: up to the checkout
        root = os.path.dirname(root)
    old = os.environ.get("PYTHONPATH")
    if local and root not in (old or "").split(os.pathsep):
        os.environ["PYTHONPATH"] = root + (os.pathsep + old if old else "")
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def _tokenizer_files(spm_model_file, vocab_file, do_lower_case):
    """{argument: (file name, bytes)} of the tokenizer files, after checking that they make a tokenizer here."""
    tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=do_lower_case, spm_model_file=spm_model_file)
    files = {}
    for name, path in (("spm_model_file", spm_model_file), ("vocab_file", vocab_file)):
        if path:
            with open(path, "rb") as f:
                files[name] = (os.path.basename(path), f.read())
    return files


def _checked_outputs(output_prefix, suffix, output_what):
    """(prefix, pattern of its outputs, the first folder the run will create or None): refuses outputs that exist
    already and a local prefix whose folder is a file."""
    if not fileio.is_remote(output_prefix):
        output_prefix = os.path.abspath(os.path.expanduser(output_prefix))
    pattern = output_glob(output_prefix, suffix)
    existing = sorted(m.path for m in match(pattern))
    if existing:
        raise fileio.OutputError(
            f"{output_what} {output_prefix}: {len(existing)} output file(s) matching "
            f"{os.path.basename(pattern)} exist already ({existing[0]}, ...); remove them or choose another name, "
            "so that a glob over the outputs reads this run's files only")
    made_dir = None
    if not fileio.is_remote(output_prefix):
        directory = os.path.dirname(output_prefix)
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise fileio.OutputError(f"{output_what} {output_prefix}: {directory} is a file, not a directory")
        made_dir = directory
        while made_dir and not os.path.exists(os.path.dirname(made_dir)):
            made_dir = os.path.dirname(made_dir)
        if os.path.exists(made_dir):
            made_dir = None
    return output_prefix, pattern, made_dir


def _add_stages(pipeline, listed, shard_bytes, build_fn, buckets, temp_dir, names, segments):
    """The stages of the package docstring, from the listed files to Finalize."""
    pieces = (pipeline
              | "ListedFiles" >> beam.Create([(i, path) for i, (path, _) in enumerate(listed)])
              | "SnapShards" >> beam.FlatMap(file_shards, shard_bytes)
              | "SpreadShards" >> beam.Reshuffle()
              | "BuildRecords" >> beam.ParDo(build_fn).with_output_types(
                  Tuple[int, Tuple[str, int, int]] if segments else Tuple[int, bytes]))
    if buckets:
        written = (pieces
                   | "GlobalShuffle" >> beam.GroupByKey()
                   | "BucketOrder" >> beam.FlatMap(write_bucket, temp_dir, len(names)).with_output_types(
                       Tuple[int, Tuple[int, str]])
                   | "GroupByFile" >> beam.GroupByKey()
                   | "Write" >> beam.FlatMap(concat_segments, temp_dir, names).with_output_types(
                       Tuple[int, Tuple[int, str]]))
    else:
        written = (pieces
                   | "GroupByFile" >> beam.GroupByKey()
                   | "Write" >> beam.FlatMap(write_ranges if segments else write_file, temp_dir,
                                            names).with_output_types(
                       Tuple[int, Tuple[int, str]]))
    _ = (written
         | "AllWritten" >> beam.GroupByKey()
         | "Finalize" >> beam.Map(finalize, temp_dir, names))


def create_pretraining_data_beam(input_files, output_prefix, *, spm_model_file=None, vocab_file=None,
                                 do_lower_case=True, config=None, shard_size_mb=DEFAULT_SHARD_SIZE_MB,
                                 num_output_shards=1, file_name_suffix="", global_shuffle=True, pipeline_args=(),
                                 input_what="--input_file", output_what="--output_file"):
    """Runs the Beam pipeline described in the package docstring; returns the run's `Stats` (from Beam metrics).

    Args:
      input_files: comma-separated glob patterns (str) or a list of them; local or remote (gs://, s3://, hdfs://).
      output_prefix: the outputs are `<output_prefix>-SSSSS-of-NNNNN<file_name_suffix>`, local or remote.
      spm_model_file, vocab_file, do_lower_case: the tokenizer (local files, read here and shipped to workers).
      config, shard_size_mb: as for `create_pretraining_data`; the same values give the same records.
      num_output_shards: the number NNNNN of output files.
      global_shuffle: shuffle the records across the whole corpus (an extra GroupByKey; docs/beam.md).
      pipeline_args: Beam's command-line options (`--runner=DataflowRunner`, `--project`, ...); `DirectRunner` (or
        none) runs Beam's in-process Python runner here (`--direct_running_mode`, `--direct_num_workers`).

    Raises what `create_pretraining_data` raises for bad flags and inputs (a worker's error is re-raised here as
    the same one-line `PretrainingDataError`), `UsageError` for unknown pipeline options, `fileio.OutputError` when
    output files matching the pattern exist already, and `PretrainingDataError` for a pipeline that fails or is
    cancelled. No file matching the output pattern is left when it raises.
    """
    started = time.monotonic()
    config = config or PretrainingConfig()
    for warning in config.validate():
        logger.warning("%s", warning)
    if num_output_shards < 1:
        raise PretrainingDataError(f"num_output_shards must be at least 1, got {num_output_shards}")
    options = pipeline_options(pipeline_args)
    shard_bytes = shard_bytes_of(shard_size_mb)
    tokenizer_files = _tokenizer_files(spm_model_file, vocab_file, do_lower_case)
    listed = list_inputs(input_files, input_what)
    output_prefix, pattern, made_dir = _checked_outputs(output_prefix, file_name_suffix, output_what)
    temps_before = temp_dirs(output_prefix)
    total_bytes = sum(size for _, size in listed)
    buckets = shuffle_bucket_count(total_bytes, config, num_output_shards) if global_shuffle else 0
    local = is_direct(options)
    runner = direct_runner(options) if local else None
    names = output_names(output_prefix, num_output_shards, file_name_suffix)
    logger.info("Beam pipeline: %d input files (%.1f MB), %d output files %s, global shuffle %s", len(listed),
                total_bytes / 1e6, num_output_shards, os.path.basename(names[0]),
                f"on ({buckets} buckets)" if buckets else "off")
    temp_dir = new_temp_dir(output_prefix)
    pipeline = beam.Pipeline(runner=runner, options=options)
    # Local outputs: the records leave BuildRecords through segment files in the temporary folder (a copy on one
    # disk), not through the runner (its data channel and grouping cost more).
    segments = not fileio.is_remote(output_prefix) and _LOCAL_SEGMENTS
    build_fn = ShardRecordsFn(tokenizer_files, do_lower_case, config, buckets, num_output_shards,
                              temp_dir if segments else None)
    _add_stages(pipeline, listed, shard_bytes, build_fn, buckets, temp_dir, names, segments)
    result = None
    log = None
    try:
        with _importable_by_workers(local), quiet_marked_errors(), stderr_to_log() as log:
            result = pipeline.run()
            state = result.wait_until_finish()
        if state != PipelineState.DONE:
            raise PretrainingDataError(f"the Beam pipeline ended {state}; no output was kept")
        stats = _stats(result, config.ngram)
        if stats.instances == 0:
            raise PretrainingDataError(
                f"no training instances were created from {len(listed)} input file(s) "
                f"({', '.join(p for p, _ in listed[:3])}{', ...' if len(listed) > 3 else ''}): {stats.documents} "
                f"documents with at least 2 tokens, {stats.skipped_documents} shorter ones skipped")
    except BaseException as err:
        if result is not None and isinstance(err, KeyboardInterrupt):
            with contextlib.suppress(Exception):
                result.cancel()
        delete(sorted(m.path for m in match(pattern)))
        delete(sorted(temp_dirs(output_prefix) - temps_before))
        if made_dir:
            shutil.rmtree(made_dir, ignore_errors=True)
        if isinstance(err, (PretrainingDataError, KeyboardInterrupt)):
            raise
        where = f" (Beam's log, with the workers' tracebacks: {log})" if log and os.path.exists(log) else ""
        message = marked_message(err)
        if message:
            raise PretrainingDataError(message) from None
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        raise PretrainingDataError(f"the Beam pipeline writing {output_what} {output_prefix} failed: "
                                   f"{type(err).__name__}: {lines[-1] if lines else ''}; no output was kept"
                                   f"{where}") from None
    stats.files = len(listed)
    stats.elapsed_seconds = time.monotonic() - started
    return stats
