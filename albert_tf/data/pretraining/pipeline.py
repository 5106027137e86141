"""The local run: `create_pretraining_data` (input files to pretraining TFRecords), with its worker processes
(fork), progress reports and checks; docs/pretraining_data.md describes the algorithm and the output."""

import dataclasses
import logging
import os
import shutil
import signal
import tempfile
import time

import numpy as np

from albert_tf import fileio
from albert_tf.data import tfrecord_writer
from albert_tf.data.pretraining.build import shard_records
from albert_tf.data.pretraining.config import PretrainingConfig, PretrainingDataError, Stats
from albert_tf.data.pretraining.instances import STREAM_INTERLEAVE, derive_seed
from albert_tf.data.pretraining.shards import DEFAULT_SHARD_SIZE_MB, expand_input_patterns, plan_shards
from albert_tf.data.pretraining.tokens import TokenTables
from albert_tf.data.pretraining.writers import AtomicRecordWriters
from albert_tf.progress import time_left
from albert_tf.text import tokenization

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Progress:
    """What a progress callback receives while a run is going."""

    shards_done: int
    shards_total: int
    documents: int
    instances: int
    text_bytes_done: int
    text_bytes_total: int
    elapsed_seconds: float

    @property
    def finished(self):
        return self.shards_done >= self.shards_total

    def describe(self):
        """The progress line (`albert_tf.progress.ProgressLog`)."""
        secs = max(self.elapsed_seconds, 1e-9)
        return (f"shards {self.shards_done}/{self.shards_total}, documents {self.documents}, instances "
                f"{self.instances} ({self.instances / secs:.0f}/s), text {self.text_bytes_done / 1e6:.1f}/"
                f"{self.text_bytes_total / 1e6:.1f} MB"
                + time_left(secs, self.text_bytes_done / max(self.text_bytes_total, 1)))


_WORKER = {}
# Open files kept free beside the global shuffle's shard files (outputs, libraries, logs).
_SPARE_FILES = 64
# What stops a run. The scripts turn SIGTERM into KeyboardInterrupt in the parent (`albert_tf.cli`); a worker must
# not inherit that: the pool's `terminate()` stops workers with SIGTERM, which must end them quietly (not with a
# KeyboardInterrupt traceback each), and Ctrl-C is for the parent, which then stops the pool. The signals are
# blocked while the pool forks and unblocked by each worker once its own handlers are set.
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _block_stop_signals():
    if not hasattr(signal, "pthread_sigmask"):
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)


def _restore_signals(mask):
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


class _WorkerWriteError(Exception):
    """A worker could not write its temporary file; the message is the OS's reason (the parent names the output)."""


def _worker_init(tokenizer_args, config, temp_dir):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    if _WORKER.get("tokenizer_args") != tokenizer_args:  # not inherited through fork: build it here
        _WORKER["tables"] = TokenTables(tokenization.FullTokenizer(**tokenizer_args))
    _WORKER["config"] = config
    _WORKER["temp_dir"] = temp_dir
    _WORKER["tables"].num_threads = 1  # one process per core already


def _worker_run(shard):
    """Writes one shard's records, TFRecord-framed, to a temporary file; returns (path, records, Stats)."""
    config = _WORKER["config"]
    stats = Stats(ngram_drawn=[0] * config.ngram, ngram_accepted=[0] * config.ngram)
    path = os.path.join(_WORKER["temp_dir"], f"shard-{shard.index:07d}.tfrecord")
    count = 0
    try:  # reading errors are PretrainingDataErrors already: an OSError here is the temporary file's
        writer = tfrecord_writer.LocalRecordWriter(path + ".part")
        try:
            for record in shard_records(shard, config, _WORKER["tables"], stats):
                writer.write(record)
                count += 1
        finally:
            writer.close()
        os.replace(path + ".part", path)
    except OSError as err:
        raise _WorkerWriteError(err.strerror or str(err)) from None
    return path, count, stats


class _Run:
    """Counters of a run in progress, and its progress reports."""

    def __init__(self, shards, config, callback, every):
        self.started = time.monotonic()
        self.shards = shards
        self.total_bytes = sum(s.end - s.start for s in shards)
        self.callback = callback
        self.every = every
        self.stats = Stats(ngram_drawn=[0] * config.ngram, ngram_accepted=[0] * config.ngram)
        self.written = 0
        self.shards_done = 0
        self.bytes_done = 0
        self.current = None  # Stats of the shard being written, in-process

    def records_written(self, n=1):
        before, self.written = self.written, self.written + n
        if self.written // self.every > before // self.every:
            self.report()

    def shard_done(self, shard, shard_stats):
        self.stats.merge(shard_stats)
        self.current = None
        self.shards_done += 1
        self.bytes_done += shard.end - shard.start
        self.report()

    def report(self):
        if self.callback is None:
            return
        documents = self.stats.documents + (self.current.documents if self.current is not None else 0)
        self.callback(Progress(self.shards_done, len(self.shards), documents, self.written, self.bytes_done,
                               self.total_bytes, time.monotonic() - self.started))


def create_pretraining_data(input_files, output_files, *, spm_model_file=None, vocab_file=None, do_lower_case=True,
                            config=None, num_workers=1, shard_size_mb=DEFAULT_SHARD_SIZE_MB, global_shuffle=True,
                            progress=None, progress_every=2048, input_what="file", output_what="output"):
    """Turns text files into pretraining TFRecords; returns the run's `Stats`.

    Args:
      input_files: comma-separated glob patterns (str) or a list of patterns.
      output_files: a list of paths (or a comma-separated str); records are spread round-robin over them.
      spm_model_file, vocab_file, do_lower_case: the tokenizer, as `tokenization.FullTokenizer` takes them.
      config: a `PretrainingConfig` (the original's flags); defaults to the original's defaults.
      num_workers: processes that build records (0 or None: one per CPU). The output does not depend on it.
      shard_size_mb: size of the input shards (docs/pretraining_data.md, "Bounded memory"); part of what
        determines the output.
      global_shuffle: spread every shard's records over the whole output (a seeded random interleaving of the
        shards' records, each shard keeping its own shuffled order), as the original's global shuffle does; the
        shards' records wait in temporary files (as much disk as the output) until the last shard is done.
        False: shard after shard, so a stretch of an output file holds one shard's text (about `shard_size_mb`)
        with all its `dupe_factor` copies. One shard: no difference.
      progress: optional callable taking a `Progress`, called after every shard and every `progress_every` records.
      input_what, output_what: how messages name the inputs and outputs (the scripts: their flags, e.g.
        "--input_file" and "--output_file").

    Raises:
      PretrainingDataError (a ValueError) for bad flags, no matching / empty / binary / unreadable input, an input
      directory, no instances, or a global shuffle of more shards than the open-file limit allows;
      tokenization.TokenizerError (a ValueError) for a missing or unreadable tokenizer file; `errors.UsageError`
      for an output that is one of the inputs (however spelled: links, relative paths), before anything is written;
      `fileio.OutputError` for an output that is a directory (or under a file), or an OS error while writing (a full
      disk), naming the output. Nothing is left at the output paths (nor temporary files, nor directories made for
      them) when an error is raised, and nothing there is replaced.
    """
    config = config or PretrainingConfig()
    for warning in config.validate():
        logger.warning("%s", warning)
    if isinstance(output_files, str):
        output_files = [p for p in output_files.split(",") if p]
    if not output_files:
        raise PretrainingDataError("no output files given")
    tokenizer_args = {"vocab_file": vocab_file, "do_lower_case": do_lower_case, "spm_model_file": spm_model_file}
    tables = TokenTables(tokenization.FullTokenizer(**tokenizer_args))
    files = expand_input_patterns(input_files, input_what)
    fileio.refuse_inputs_as_outputs(
        [(output_what, path) for path in output_files],
        [(input_what, path) for path in files] + [("--spm_model_file", spm_model_file), ("--vocab_file", vocab_file)])
    shards = plan_shards(files, shard_size_mb)
    if num_workers is None or num_workers <= 0:
        num_workers = os.cpu_count() or 1
    num_workers = min(num_workers, len(shards))
    if num_workers > 1 and any(fileio.is_remote(f) for f in files):
        logger.warning("remote input files are read in a single process")
        num_workers = 1
    interleave = global_shuffle and len(shards) > 1
    if interleave:
        _make_room_for_open_files(files, len(shards), shard_size_mb)
    run = _Run(shards, config, progress, progress_every)
    with AtomicRecordWriters(output_files, output_what) as writers:
        if num_workers == 1 and not interleave:
            for shard in shards:
                run.current = Stats(ngram_drawn=[0] * config.ngram, ngram_accepted=[0] * config.ngram)
                for record in shard_records(shard, config, tables, run.current):
                    writers.write(record)
                    run.records_written()
                run.shard_done(shard, run.current)
        else:
            _run_pool(run, writers, tables, tokenizer_args, config, num_workers, interleave)
        if run.stats.instances == 0:
            raise PretrainingDataError(
                f"no training instances were created from {len(files)} input file(s) "
                f"({', '.join(files[:3])}{', ...' if len(files) > 3 else ''}): {run.stats.documents} "
                f"documents with at least 2 tokens, {run.stats.skipped_documents} shorter ones skipped")
    stats = run.stats
    stats.files = len(files)
    stats.elapsed_seconds = time.monotonic() - run.started
    return stats


def _open_files_now():
    fds = "/proc/self/fd"
    return len(os.listdir(fds)) if os.path.isdir(fds) else _SPARE_FILES


def _make_room_for_open_files(files, count, shard_size_mb):
    """The global shuffle reads the files of all `count` shards of `files` at once: raises this process's soft
    limit of open files (`ulimit -n`, 1024 on many systems) up to its hard limit where it is lower than that needs,
    so that a large corpus does not fail with "Too many open files" at the end of the run. Raises
    `PretrainingDataError` before any record is built when the hard limit (`ulimit -Hn`) is too low, naming the
    shard size that fits (the shard size doubled until the plan fits; none when the files alone are too many)."""
    try:
        import resource  # pylint: disable=import-outside-toplevel
    except ImportError:  # not a POSIX system: no limit to read
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = count + _open_files_now() + _SPARE_FILES
    if soft == resource.RLIM_INFINITY or need <= soft:
        return
    if hard != resource.RLIM_INFINITY and need > hard:
        room, size = hard - need + count, shard_size_mb
        while len(files) <= room and len(plan_shards(files, size)) > room:
            size *= 2
        larger = f"raise --shard_size_mb to {size:g}, " if len(files) <= room else ""
        raise PretrainingDataError(
            f"the global shuffle reads all {count} shards at once, and this system allows {hard} open files "
            f"(ulimit -Hn): {larger}turn it off (--noglobal_shuffle) or run on Beam (--runner)")
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def _run_pool(run, writers, tables, tokenizer_args, config, num_workers, interleave):
    """Shards in worker processes (in this one for `num_workers` 1), each to a temporary file of framed records;
    appended to `writers` in shard order as they come, or, with `interleave`, kept until the last one is done and
    then interleaved (`_interleave`). The parent copies bytes: the workers build, serialize and checksum.

    A worker that dies (killed, out of memory) ends the run with `PretrainingDataError`, nothing partial left: the
    executor notices a lost process, where a `multiprocessing.Pool` would start another and wait forever."""
    import multiprocessing  # pylint: disable=import-outside-toplevel
    from concurrent.futures import ProcessPoolExecutor  # pylint: disable=import-outside-toplevel
    from concurrent.futures.process import BrokenProcessPool  # pylint: disable=import-outside-toplevel

    first = writers.paths[0]
    # Beside the outputs (same disk) but in their directory's sidecar, where no glob over the outputs reaches; the
    # sidecar exists (the outputs are staged in it) and is kept while it holds them.
    local_parent = None if fileio.is_remote(first) else fileio.sidecar_dir(os.path.dirname(os.path.abspath(first)))
    with writers.writing(first):
        temp_dir = tempfile.mkdtemp(prefix=f".workers.partial-{os.getpid()}-", dir=local_parent)
    # Forked workers inherit the tokenizer tables (no reload); they never use TensorFlow, so forking a parent that
    # imported it is safe. Elsewhere (no fork) they are spawned and build the tables in `_worker_init`.
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    _WORKER["tables"] = tables
    _WORKER["tokenizer_args"] = tokenizer_args
    pool = None
    try:
        if num_workers == 1:
            _WORKER.update(config=config, temp_dir=temp_dir)
            results = map(_worker_run, run.shards)
        else:
            mask = _block_stop_signals()
            try:
                pool = ProcessPoolExecutor(num_workers, mp_context=context, initializer=_worker_init,
                                           initargs=(tokenizer_args, config, temp_dir))
                results = pool.map(_worker_run, run.shards)  # the workers start here, with the signals blocked
            finally:
                _restore_signals(mask)
        done = []
        for shard, (path, count, shard_stats) in zip(run.shards, results):
            if interleave:
                done.append((path, count))
            else:
                writers.append_framed(path, count)
                os.remove(path)
            run.records_written(count)
            run.shard_done(shard, shard_stats)
        if pool is not None:
            pool.shutdown()
        if interleave:
            _interleave(done, config.random_seed, writers)
    except BaseException as err:
        if pool is not None:
            _stop(pool)
        if isinstance(err, _WorkerWriteError):
            raise writers.error(first, f"{err} (writing the worker processes' temporary files)") from None
        if isinstance(err, BrokenProcessPool):
            raise PretrainingDataError(f"a worker process died (killed, or out of memory) while writing {first}; "
                                       "nothing was written, run again") from None
        raise
    finally:
        _WORKER.clear()
        shutil.rmtree(temp_dir, ignore_errors=True)


def _stop(pool):
    """Ends the workers of `pool` now (SIGTERM, which they take quietly) and waits for them."""
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


def _interleave(shard_files, seed, writers):
    """Writes the records of `shard_files` ([(path, records)]) to `writers` in a seeded random interleaving: a
    uniformly random order of the shards' draws, each shard's records taken in their own (shuffled) order, so any
    stretch of the output samples the whole corpus. The order depends on the seed and the shards only."""
    logger.info("interleaving the records of %d shards (global shuffle)", len(shard_files))
    draws = np.repeat(np.arange(len(shard_files), dtype=np.int32), [count for _, count in shard_files])
    draws = np.random.default_rng(derive_seed(seed, STREAM_INTERLEAVE)).permutation(draws)
    readers = [tfrecord_writer.read_frames(path) for path, _ in shard_files]
    for index in draws.tolist():
        writers.write_frame(next(readers[index]))
