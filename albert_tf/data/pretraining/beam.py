"""Pretraining records as an Apache Beam pipeline (`create_pretraining_data_beam`); docs/beam.md tells how to run it
locally and on Dataflow, Flink or Spark.

The only module that imports `apache_beam` (the `[beam]` extra, requirements-beam.txt); the core never needs it.
The records are those of the local tool (`pipeline.create_pretraining_data`) for the same inputs, flags and seed,
as a multiset: the shard rule (`shards.file_cuts`) and one shard's records (`build.shard_records`) are the same code.

The launcher only lists the input files (names and sizes, no contents). The pipeline:

  listed files -> SnapShards (a worker checks each file and cuts it at document boundaries: `file_cuts` reads the
  first 64 KiB and a few lines after each target offset) -> SpreadShards (Reshuffle: shards to all workers) ->
  BuildRecords (`shard_records`: the shard's byte range read, tokenized, turned into serialized examples, framed as
  TFRecord in batches, `tfrecord_writer.frame_records`) ->
    without the global shuffle: GroupByFile -> Write (an output file's frames into Beam's temporary folder);
    with it: GlobalShuffle (GroupByKey on a random bucket) -> BucketOrder (a bucket sorted by its random keys, written
    as a segment file in the temporary folder) -> GroupByFile (the segments' names) -> Write (an output file as its
    buckets' segments, in bucket order) ->
  Finalize (the files renamed to `<prefix>-SSSSS-of-NNNNN<suffix>`, the temporary folder removed).

Records cross the stage boundaries as a few large `bytes` elements (the TFRecord frames of up to `_BATCH_BYTES` of
records for one output file or one shuffle bucket), never one element per record: Beam's cost per element (coders,
the Fn API data channel to and from the runner, its grouping) would otherwise exceed the cost of making the record.
For local outputs (one machine) BuildRecords writes each batch as a segment file in the temporary folder instead,
and only (segment, offset, length) goes through the runner: a copy on disk costs less than the runner's trip.

A failed, cancelled or interrupted run removes the output files and Beam temporary directories it created, so no
file matching the output pattern is left; a run whose outputs already exist is refused before it starts.
"""

import contextlib
import io
import logging
import math
import os
import random
import re
import shutil
import sys
import tempfile
import time
import uuid
from typing import Tuple

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import Metrics, MetricsFilter
from apache_beam.options import pipeline_options as beam_options
from apache_beam.runners.runner import PipelineState

from albert_tf import fileio
from albert_tf.data.pretraining.build import shard_records
from albert_tf.data.pretraining.config import PretrainingConfig, PretrainingDataError, Stats
from albert_tf.data.pretraining.instances import STREAM_GLOBAL_SHUFFLE, STREAM_INTERLEAVE, derive_seed
from albert_tf.data.pretraining.shards import (DEFAULT_SHARD_SIZE_MB, InputShard, expand_input_patterns, file_cuts,
                                               shard_bytes_of, use_remote_io)
from albert_tf.data.pretraining.tokens import TokenTables
from albert_tf.data.tfrecord_writer import frame_records
from albert_tf.errors import UsageError
from albert_tf.text import tokenization

logger = logging.getLogger(__name__)

# Records per global-shuffle bucket (about; from an estimate of the run's records). A bucket is held in one
# worker's memory while it is sorted by its random keys: 50k records of max_seq_length 512 are about 150 MB.
SHUFFLE_BUCKET_RECORDS = 50_000
# Text bytes per token for the bucket-count estimate (English SentencePiece: about 4.5).
_BYTES_PER_TOKEN = 4.0
# Records leave BuildRecords (and a shuffle bucket) as elements of TFRecord frames of at most about this many bytes:
# Beam's per-element cost (coders, the Fn API data channel, the runner's grouping) is paid per piece, not per record.
# A BuildRecords worker holds one batch of this size (and its frames) besides its shard.
_BATCH_BYTES = 16 << 20
# Local outputs pass the records from BuildRecords to the next step through segment files (False: through the
# runner, as for remote outputs; the tests run both).
_LOCAL_SEGMENTS = True
_FRAME_OVERHEAD = 16  # a TFRecord frame: uint64 length, uint32 masked CRC of it, the data, uint32 masked CRC of it
METRICS_NAMESPACE = "albert_tf.pretraining"
# Runner names that mean Beam's local Python runner (run here as its FnApiRunner, never through Prism).
_DIRECT_RUNNERS = {"direct", "directrunner", "switchingdirectrunner", "fnapirunner"}
# Worker errors travel through the runner (in-process, a subprocess, a remote job) as text between these marks
# (spelled in pieces so that a traceback's source line never holds them).
_OPEN, _CLOSE = "<<albert_tf" + "-error: ", " :albert_tf" + "-error>>"
_MARK = re.compile(re.escape(_OPEN) + "(.*?)" + re.escape(_CLOSE), re.S)


class BeamWorkerError(RuntimeError):
    """An input or flag error found by a pipeline worker, its one-line message marked for the launcher."""


@contextlib.contextmanager
def _marked_errors():
    try:
        yield
    except (PretrainingDataError, tokenization.TokenizerError) as err:
        raise BeamWorkerError(_OPEN + str(err) + _CLOSE) from None


def _marked_message(err):
    """The first marked worker message in `err`, its chain or its text (None if there is none)."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        found = _MARK.search(str(err))
        if found:
            return found.group(1)
        err = err.__cause__ or err.__context__
    return None


# Launcher: options, inputs, outputs.

def _option_parser():
    parser = beam_options._BeamArgumentParser(allow_abbrev=False)  # pylint: disable=protected-access
    pending = [beam_options.PipelineOptions]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        cls._add_argparse_args(parser)  # pylint: disable=protected-access
    return parser


def pipeline_options(args):
    """`PipelineOptions` of Beam command-line arguments; an argument Beam does not know raises `UsageError`."""
    args = list(args)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stderr(printed):
            _, unknown = _option_parser().parse_known_args(args)
    except SystemExit:  # argparse printed its usage and, last, why (a bad value of a Beam option)
        why = (printed.getvalue().strip().splitlines() or ["bad value"])[-1].split(" error: ", 1)[-1]
        raise UsageError(f"Beam pipeline option {why}") from None
    flags_unknown = [a for a in unknown if a.startswith("-")]
    if flags_unknown:
        raise UsageError(f"unknown flag {flags_unknown[0].split('=')[0]} (neither this script's flag nor a Beam "
                         "pipeline option)")
    if unknown:
        raise UsageError(f"unexpected arguments: {unknown}")
    return beam_options.PipelineOptions(args)


def _is_direct(options):
    runner = options.view_as(beam_options.StandardOptions).runner
    return runner is None or (isinstance(runner, str) and runner.lower() in _DIRECT_RUNNERS)


def _direct_runner(options):
    """Beam's local Python runner (the FnApiRunner, as `DirectRunner` ends up using for batch pipelines), built
    directly: `DirectRunner` first tries the Prism runner, whose binary it would download."""
    from apache_beam.portability.api import beam_provision_api_pb2  # pylint: disable=import-outside-toplevel
    from apache_beam.runners.portability.fn_api_runner import fn_runner  # pylint: disable=import-outside-toplevel
    from apache_beam.runners.portability.portable_runner import \
        JobServiceHandle  # pylint: disable=import-outside-toplevel

    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
    info = fn_runner.ExtendedProvisionInfo(beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
    return fn_runner.FnApiRunner(provision_info=info)


def _match(pattern):
    """Metadata of the files matching `pattern` through Beam's file systems ([] when none)."""
    try:
        return FileSystems.match([pattern])[0].metadata_list
    except Exception:  # pylint: disable=broad-except  (a file system reports "no match" its own way)
        return []


def list_inputs(input_files, what="--input_file"):
    """[(path, size)] of the input patterns: names and sizes only, no contents. Local patterns are expanded as the
    local tool expands them (`expand_input_patterns`), remote ones (gs://, s3://, hdfs://) by Beam's file systems."""
    patterns = input_files.split(",") if isinstance(input_files, str) else list(input_files)
    patterns = [p.strip() for p in patterns if p and p.strip()]
    if not any(fileio.is_remote(p) for p in patterns):
        return [(path, os.path.getsize(path)) for path in expand_input_patterns(patterns, what)]
    listed, seen = [], set()
    for pattern in patterns:
        found = sorted(_match(pattern), key=lambda m: m.path)
        if not found:
            logger.warning("input pattern %r matched no files", pattern)
        for meta in found:
            if meta.path not in seen:
                seen.add(meta.path)
                listed.append((meta.path, meta.size_in_bytes))
    if not listed:
        raise PretrainingDataError(f"no input files matched {','.join(patterns) or '(empty input_file)'!r}")
    return listed


def output_names(prefix, num_shards, suffix=""):
    """The files the pipeline writes, named as Beam names them (`WriteToTFRecord(prefix, num_shards=...,
    file_name_suffix=suffix)`)."""
    return [f"{prefix}-{i:05d}-of-{num_shards:05d}{suffix}" for i in range(num_shards)]


def _output_glob(prefix, suffix):
    return f"{prefix}-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]{suffix}"


def _temp_glob(prefix):
    directory, base = FileSystems.split(prefix)
    return FileSystems.join(directory, f"beam-temp-{base}-*")


def _temp_dirs(prefix):
    pattern = _temp_glob(prefix)
    if fileio.is_remote(prefix):  # object stores list objects, not folders
        return {FileSystems.split(m.path)[0] for m in _match(pattern + "/*")}
    import glob  # pylint: disable=import-outside-toplevel

    return set(glob.glob(pattern))


def _delete(paths):
    for path in paths:
        try:
            FileSystems.delete([path])
        except Exception as err:  # pylint: disable=broad-except
            logger.warning("could not remove %s: %s", path, err)


# Workers.

def _file_shards(item, shard_bytes):
    """A worker's SnapShards step: one listed file's `InputShard`s (checks the file, cuts at document bounds)."""
    file_index, path = item
    with _marked_errors():
        cuts = file_cuts(path, shard_bytes)
    for shard_in_file, (start, end) in enumerate(zip(cuts[:-1], cuts[1:])):
        yield InputShard(-1, file_index, shard_in_file, path, start, end)


def _beam_open(path):
    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def _beam_size(path):
    return FileSystems.match([path])[0].metadata_list[0].size_in_bytes


def _pieces(items, sizes, limit):
    """Splits `items` (in order) into runs of at most about `limit` bytes (each run at least one item)."""
    run, total = [], 0
    for item, size in zip(items, sizes):
        if run and total + size > limit:
            yield run
            run, total = [], 0
        run.append(item)
        total += size
    if run:
        yield run


def _framed_groups(groups):
    """TFRecord frames of each group of records, framed in one batch: [(group index, frames bytes)] for the
    groups that are not empty."""
    framed = frame_records([record for group in groups for record in group])
    out, offset = [], 0
    for index, group in enumerate(groups):
        if group:
            end = offset + sum(map(len, group)) + _FRAME_OVERHEAD * len(group)
            out.append((index, framed[offset:end]))
            offset = end
    return out


def _dealt_pieces(records, start, num_files):
    """(output file, frames) pieces of a batch of records dealt round-robin over the files from `start`."""
    groups = [records[(j - start) % num_files::num_files] for j in range(num_files)]
    return _framed_groups(groups)


def _keyed_pieces(buckets):
    """(bucket, piece) of each non-empty bucket {bucket: (keys, records)} of one batch: a piece is
    `uint32 n | n uint64 keys | n uint32 frame sizes | n TFRecord frames`, little-endian."""
    order = sorted(buckets)
    pieces = []
    for bucket, frames in _framed_groups([buckets[b][1] for b in order]):
        keys, records = buckets[order[bucket]]
        sizes = np.fromiter(map(len, records), dtype=np.uint32, count=len(records)) + np.uint32(_FRAME_OVERHEAD)
        pieces.append((order[bucket], b"".join((len(keys).to_bytes(4, "little"),
                                                np.array(keys, dtype="<u8").tobytes(), sizes.astype("<u4").tobytes(),
                                                frames))))
    return pieces


class _ShardRecordsFn(beam.DoFn):
    """BuildRecords: an `InputShard`'s serialized records (`shard_records`), counted in Beam metrics, leaving the
    stage as a few large elements of TFRecord frames. Without `shuffle_buckets`: (output file, frames), the records
    dealt round-robin over the `num_files` outputs from a seeded start. With `shuffle_buckets`: (bucket, piece), each
    record keyed by a seeded 64-bit random key for the global shuffle (`_keyed_pieces`)."""

    _COUNTERS = ("shards", "text_bytes", "documents", "skipped_documents", "sentences", "tokens", "instances",
                 "instance_tokens", "sentence_order_positive", "masked_positions")

    def __init__(self, tokenizer_files, do_lower_case, config, shuffle_buckets, num_files, segments_dir=None):
        super().__init__()
        self.segments_dir = segments_dir
        self.tokenizer_files = tokenizer_files  # {argument: (file name, bytes)}: workers need no copy of them
        self.do_lower_case = do_lower_case
        self.config = config
        self.shuffle_buckets = shuffle_buckets
        self.num_files = num_files
        self.tables = None
        self.counters = None

    def setup(self):
        use_remote_io(_beam_open, _beam_size)
        directory = tempfile.mkdtemp(prefix="albert_tf-tokenizer-")
        try:
            args = {"do_lower_case": self.do_lower_case}
            for name, (base, data) in self.tokenizer_files.items():
                args[name] = os.path.join(directory, base)
                with open(args[name], "wb") as f:
                    f.write(data)
            with _marked_errors():
                self.tables = TokenTables(tokenization.FullTokenizer(**args))
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        self.tables.num_threads = 1  # a worker per core already
        self.counters = {name: Metrics.counter(METRICS_NAMESPACE, name) for name in self._COUNTERS}
        self.counters.update({f"ngram_{kind}_{i + 1}": Metrics.counter(METRICS_NAMESPACE, f"ngram_{kind}_{i + 1}")
                              for kind in ("drawn", "accepted") for i in range(self.config.ngram)})

    def process(self, shard):
        config = self.config
        stats = Stats(ngram_drawn=[0] * config.ngram, ngram_accepted=[0] * config.ngram)
        with _marked_errors():
            records = shard_records(shard, config, self.tables, stats)
            if self.shuffle_buckets:
                yield from self._shuffled(shard, records)
            else:
                yield from self._dealt(shard, records)
        for name in self._COUNTERS:
            self.counters[name].inc(getattr(stats, name))
        for i in range(config.ngram):
            self.counters[f"ngram_drawn_{i + 1}"].inc(stats.ngram_drawn[i])
            self.counters[f"ngram_accepted_{i + 1}"].inc(stats.ngram_accepted[i])

    def _dealt(self, shard, records):
        num_files = self.num_files
        position = derive_seed(self.config.random_seed, shard.file_index, shard.shard_in_file,
                               STREAM_INTERLEAVE) % num_files
        batch, size = [], 0
        for record in records:
            batch.append(record)
            size += len(record)
            if size >= _BATCH_BYTES:
                yield from self._out(_dealt_pieces(batch, position, num_files))
                position = (position + len(batch)) % num_files
                batch, size = [], 0
        if batch:
            yield from self._out(_dealt_pieces(batch, position, num_files))

    def _out(self, pieces):
        """The (output file or bucket, piece) pieces, or with `segments_dir` (local outputs, one machine) the pieces
        written one after the other into a segment file there and (file or bucket, (segment, offset, length))."""
        if not self.segments_dir:
            yield from pieces
            return
        path = FileSystems.join(self.segments_dir, f"{uuid.uuid4().hex}-segment")
        _write_all(path, (frames for _, frames in pieces))
        offset = 0
        for index, frames in pieces:
            yield index, (path, offset, len(frames))
            offset += len(frames)

    def _shuffled(self, shard, records):
        rng = random.Random(derive_seed(self.config.random_seed, shard.file_index, shard.shard_in_file,
                                        STREAM_GLOBAL_SHUFFLE))
        num_buckets = self.shuffle_buckets
        buckets, size = {}, 0
        for record in records:
            key = rng.getrandbits(64)
            bucket = buckets.get(key % num_buckets)
            if bucket is None:
                bucket = buckets[key % num_buckets] = ([], [])
            bucket[0].append(key)
            bucket[1].append(record)
            size += len(record)
            if size >= _BATCH_BYTES:
                yield from self._out(_keyed_pieces(buckets))
                buckets, size = {}, 0
        if buckets:
            yield from self._out(_keyed_pieces(buckets))


def _bucket_frames(pieces):
    """A bucket's frames in the order of their random keys (ties: by frame bytes), from its `_keyed_pieces`."""
    keys, sizes, frames = [], [], []
    for piece in pieces:
        n = int.from_bytes(piece[:4], "little")
        keys.append(np.frombuffer(piece, dtype="<u8", count=n, offset=4))
        sizes.append(np.frombuffer(piece, dtype="<u4", count=n, offset=4 + 8 * n))
        frames.append(memoryview(piece)[4 + 12 * n:])
    keys = np.concatenate(keys)
    data = memoryview(b"".join(frames))
    ends = np.cumsum(np.concatenate(sizes).astype(np.int64)).tolist()
    starts = [0] + ends[:-1]
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    if len(ordered) > 1 and bool(np.any(ordered[1:] == ordered[:-1])):  # 64-bit keys: almost never
        order = sorted(range(len(keys)), key=lambda i: (int(keys[i]), bytes(data[starts[i]:ends[i]])))
    return [data[starts[i]:ends[i]] for i in map(int, order)]


def _write_bucket(item, temp_dir, num_files):
    """GlobalShuffle: a bucket's frames in key order, written as one segment file in Beam's temporary folder (a
    retried attempt writes its own); yields (output file, (bucket, segment path)). Bucket b goes to file b % files."""
    bucket, pieces = item
    frames = _bucket_frames(_read_range(*piece) if isinstance(piece, tuple) else piece for piece in pieces)
    path = FileSystems.join(temp_dir, f"{uuid.uuid4().hex}-bucket-{bucket}")
    _write_all(path, _pieces_of(frames))
    yield bucket % num_files, (bucket, path)


def _pieces_of(frames):
    for run in _pieces(frames, map(len, frames), _BATCH_BYTES):
        yield b"".join(run)


def _concat_segments(item, temp_dir, names):
    """Write (with the global shuffle): an output file as its buckets' segments one after the other, in bucket
    order; yields (0, (file index, temporary path)) for `_finalize`."""
    index, segments = item
    paths = {}
    for bucket, path in segments:
        paths.setdefault(bucket, path)  # one segment per bucket (a runner may commit a duplicate)
    path = FileSystems.join(temp_dir, f"{uuid.uuid4().hex}-{FileSystems.split(names[index])[1]}")
    _write_all(path, _read_all([paths[bucket] for bucket in sorted(paths)]))
    yield 0, (index, path)


def _read_all(paths, block=8 << 20):
    for path in paths:
        f = _beam_open(path)
        try:
            while True:
                data = f.read(block)
                if not data:
                    break
                yield data
        finally:
            f.close()


def _write_all(path, pieces):
    """Writes `pieces` (bytes) into a new file at `path`; a file cut short by an error is removed."""
    f = FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)
    try:
        for piece in pieces:
            f.write(piece)
    except BaseException:
        with contextlib.suppress(Exception):
            f.close()
            FileSystems.delete([path])
        raise
    f.close()


def _write_ranges(item, temp_dir, names):
    """Write (local outputs, without the global shuffle): one output file's byte ranges of segment files copied one
    after the other, as they come; yields (0, (file index, temporary path)) for `_finalize`."""
    index, ranges = item
    path = FileSystems.join(temp_dir, f"{uuid.uuid4().hex}-{FileSystems.split(names[index])[1]}")
    _write_all(path, (_read_range(*r) for r in ranges))
    yield 0, (index, path)


def _read_range(segment, offset, length):
    """`length` bytes at `offset` of a local segment file."""
    with open(segment, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    if len(data) != length:
        raise OSError(f"{segment}: {len(data)} bytes at {offset}, expected {length}")
    return data


def _write_file(item, temp_dir, names):
    """Write: one output file's frames, as they come, into a file of its own in Beam's temporary folder (a retried
    or duplicated attempt writes another); yields (0, (file index, temporary path)) for `_finalize`."""
    index, pieces = item
    path = FileSystems.join(temp_dir, f"{uuid.uuid4().hex}-{FileSystems.split(names[index])[1]}")
    _write_all(path, pieces)
    yield 0, (index, path)


def _finalize(item, temp_dir, names):
    """Finalize, once every file is written: the written files (the committed attempts) renamed into place, the
    others created empty, the temporary folder removed. A retried finalize skips what an earlier attempt renamed."""
    _, written = item
    sources, destinations, done = [], [], set()
    for index, path in written:
        if index not in done and (FileSystems.exists(path) or not FileSystems.exists(names[index])):
            sources.append(path)
            destinations.append(names[index])
        done.add(index)
    for index, name in enumerate(names):
        if index not in done and not FileSystems.exists(name):
            FileSystems.create(name, compression_type=CompressionTypes.UNCOMPRESSED).close()
    if sources:
        FileSystems.rename(sources, destinations)
    try:
        FileSystems.delete([temp_dir])
    except Exception as err:  # pylint: disable=broad-except  (an object store may hold no folder object)
        logger.debug("could not remove %s: %s", temp_dir, err)


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


class _DropMarkedErrors(logging.Filter):
    """Drops the log records of a marked worker error (Beam logs each failed bundle with its traceback); the
    launcher reports it in one line."""

    def filter(self, record):
        try:
            text = record.getMessage()
        except Exception:  # pylint: disable=broad-except
            text = str(record.msg)
        if record.exc_info and record.exc_info[1] is not None:
            text += str(record.exc_info[1])
        return _OPEN not in text


@contextlib.contextmanager
def _quiet_marked_errors():
    handlers = list(logging.getLogger().handlers)
    drop = _DropMarkedErrors()
    for handler in handlers:
        handler.addFilter(drop)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(drop)


@contextlib.contextmanager
def _stderr_to_log():
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
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
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


def create_pretraining_data_beam(input_files, output_prefix, *, spm_model_file=None, vocab_file=None,
                                 do_lower_case=True, config=None, shard_size_mb=DEFAULT_SHARD_SIZE_MB,
                                 num_output_shards=1, file_name_suffix="", global_shuffle=True, pipeline_args=(),
                                 input_what="--input_file", output_what="--output_file"):
    """Runs the Beam pipeline described in the module docstring; returns the run's `Stats` (from Beam metrics).

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
    tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=do_lower_case, spm_model_file=spm_model_file)
    tokenizer_files = {}
    for name, path in (("spm_model_file", spm_model_file), ("vocab_file", vocab_file)):
        if path:
            with open(path, "rb") as f:
                tokenizer_files[name] = (os.path.basename(path), f.read())
    listed = list_inputs(input_files, input_what)
    if not fileio.is_remote(output_prefix):
        output_prefix = os.path.abspath(os.path.expanduser(output_prefix))
    pattern = _output_glob(output_prefix, file_name_suffix)
    existing = sorted(m.path for m in _match(pattern))
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
    temps_before = _temp_dirs(output_prefix)
    total_bytes = sum(size for _, size in listed)
    buckets = shuffle_bucket_count(total_bytes, config, num_output_shards) if global_shuffle else 0
    local = _is_direct(options)
    runner = _direct_runner(options) if local else None
    logger.info("Beam pipeline: %d input files (%.1f MB), %d output files %s, global shuffle %s", len(listed),
                total_bytes / 1e6, num_output_shards, os.path.basename(output_names(output_prefix, num_output_shards,
                                                                                     file_name_suffix)[0]),
                f"on ({buckets} buckets)" if buckets else "off")
    names = output_names(output_prefix, num_output_shards, file_name_suffix)
    directory, base = FileSystems.split(output_prefix)
    temp_dir = FileSystems.join(directory, f"beam-temp-{base}-{uuid.uuid4().hex}")
    pipeline = beam.Pipeline(runner=runner, options=options)
    # Local outputs: the records leave BuildRecords through segment files in the temporary folder (a copy on one
    # disk), not through the runner (its data channel and grouping cost more).
    segments = not fileio.is_remote(output_prefix) and _LOCAL_SEGMENTS
    pieces = (pipeline
              | "ListedFiles" >> beam.Create([(i, path) for i, (path, _) in enumerate(listed)])
              | "SnapShards" >> beam.FlatMap(_file_shards, shard_bytes)
              | "SpreadShards" >> beam.Reshuffle()
              | "BuildRecords" >> beam.ParDo(_ShardRecordsFn(
                  tokenizer_files, do_lower_case, config, buckets, num_output_shards,
                  temp_dir if segments else None)).with_output_types(
                      Tuple[int, Tuple[str, int, int]] if segments else Tuple[int, bytes]))
    if buckets:
        written = (pieces
                   | "GlobalShuffle" >> beam.GroupByKey()
                   | "BucketOrder" >> beam.FlatMap(_write_bucket, temp_dir, num_output_shards).with_output_types(
                       Tuple[int, Tuple[int, str]])
                   | "GroupByFile" >> beam.GroupByKey()
                   | "Write" >> beam.FlatMap(_concat_segments, temp_dir, names).with_output_types(
                       Tuple[int, Tuple[int, str]]))
    else:
        written = (pieces
                   | "GroupByFile" >> beam.GroupByKey()
                   | "Write" >> beam.FlatMap(_write_ranges if segments else _write_file, temp_dir,
                                            names).with_output_types(
                       Tuple[int, Tuple[int, str]]))
    _ = (written
         | "AllWritten" >> beam.GroupByKey()
         | "Finalize" >> beam.Map(_finalize, temp_dir, names))
    result = None
    log = None
    try:
        with _importable_by_workers(local), _quiet_marked_errors(), _stderr_to_log() as log:
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
        _delete(sorted(m.path for m in _match(pattern)))
        _delete(sorted(_temp_dirs(output_prefix) - temps_before))
        if made_dir:
            shutil.rmtree(made_dir, ignore_errors=True)
        if isinstance(err, (PretrainingDataError, KeyboardInterrupt)):
            raise
        where = f" (Beam's log, with the workers' tracebacks: {log})" if log and os.path.exists(log) else ""
        message = _marked_message(err)
        if message:
            raise PretrainingDataError(message) from None
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        raise PretrainingDataError(f"the Beam pipeline writing {output_what} {output_prefix} failed: "
                                   f"{type(err).__name__}: {lines[-1] if lines else ''}; no output was kept"
                                   f"{where}") from None
    stats.files = len(listed)
    stats.elapsed_seconds = time.monotonic() - started
    return stats


__all__ = ["BeamWorkerError", "SHUFFLE_BUCKET_RECORDS", "create_pretraining_data_beam", "list_inputs",
           "output_names", "pipeline_options", "shuffle_bucket_count"]
