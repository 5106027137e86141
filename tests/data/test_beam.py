"""The Apache Beam pipeline of pretraining data (`albert_tf.data.pretraining.beam`, `create_pretraining_data.py
--runner=...`): the same records as the local tool on the shipped corpus (DirectRunner in-process and with two
worker processes), Beam's output names read back by the records reader, the global shuffle, one-line errors and
no output left by a failed run."""

import collections
import contextlib
import dataclasses
import fnmatch
import functools
import glob
import logging
import os
import random
import re
import shutil
import sys
import tempfile
import time
import types

import pytest

pytest.importorskip("apache_beam")

# pylint: disable=wrong-import-position
import apache_beam as beam
from apache_beam.io.filesystem import FileMetadata

from albert_tf.data import records as records_lib
from albert_tf.data.pretraining import (PretrainingConfig, PretrainingDataError, TokenTables, create_pretraining_data,
                                        plan_shards, shard_records)
from albert_tf.data.pretraining import beam as beam_pipeline
from albert_tf.data.pretraining import shards
from albert_tf.data.pretraining.beam import files as beam_files
from albert_tf.data.pretraining.beam import build_records, frames, launcher, options, worker_errors, write
from albert_tf.data.pretraining.config import Stats
from albert_tf.data.pretraining.instances import STREAM_GLOBAL_SHUFFLE, STREAM_INTERLEAVE, derive_seed
from albert_tf.data.tfrecord_writer import frame_records
from albert_tf.errors import UsageError
from albert_tf.text import tokenization
from tests.helpers import DATA_DIR, REPO, SPM, assert_one_line_error, log_tail, run_script, subprocess_env

CORPUS = [os.path.join(DATA_DIR, "corpus", name)
          for name in ("gutenberg-austen-emma.txt", "gutenberg-chesterton-brown.txt")]
CONFIG = PretrainingConfig(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=2)
SHARD_MB = 0.03  # several shards per file, so the workers' snapping to document boundaries matters
DIRECT = ["--runner=DirectRunner"]


def _read(paths):
    """Every record of TFRecord files, in file order, CRCs checked."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return [r.numpy() for path in paths for r in tf.data.TFRecordDataset(path)]


@pytest.fixture(autouse=True)
def _workers_remote_io_left_behind(monkeypatch):
    """An in-process run's workers install Beam's file systems for remote inputs in this process
    (`shards.use_remote_io`): undone after each test, so later tests read `ram://` inputs through TensorFlow."""
    monkeypatch.setattr(shards, "_REMOTE_IO", dict(shards._REMOTE_IO))  # pylint: disable=protected-access


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The local tool's records for CORPUS, the input file index of each record, its number of shards and its
    `Stats`."""
    out = str(tmp_path_factory.mktemp("local") / "local.tfrecord")
    stats = create_pretraining_data(",".join(CORPUS), [out], spm_model_file=SPM, config=CONFIG, num_workers=1,
                                    shard_size_mb=SHARD_MB)
    local = _read([out])
    origin = {}
    shards = _by_shard()
    for shard, records in shards:
        for record in records:
            origin[record] = shard.file_index
    assert len(origin) == len(local) and len({s.file_index for s, _ in shards}) == 2 and len(shards) >= 4
    return local, origin, len(shards), stats


@functools.cache
def _by_shard():
    """[(shard, its records)] of CORPUS, as the local tool plans and builds them."""
    tables = TokenTables(tokenization.FullTokenizer(spm_model_file=SPM))
    return [(shard, list(shard_records(shard, CONFIG, tables))) for shard in plan_shards(CORPUS, SHARD_MB)]


def _expected_files(num_files, buckets):
    """Each output file's records as the pipeline's documented rule places them, computed here on its own.
    Without the global shuffle (`buckets` 0): a shard's record i goes to file (start + i) % num_files, start drawn
    from the shard's seed (a Counter per file: the order of shards within a file is the runner's). With it: each
    record keyed by a 64-bit random key, bucket key % buckets, file bucket % num_files, a file its buckets in
    increasing order, each bucket in key order (the file's exact bytes)."""
    if not buckets:
        files = [collections.Counter() for _ in range(num_files)]
        for shard, records in _by_shard():
            start = derive_seed(CONFIG.random_seed, shard.file_index, shard.shard_in_file,
                                STREAM_INTERLEAVE) % num_files
            for i, record in enumerate(records):
                files[(start + i) % num_files][record] += 1
        return files
    keyed = collections.defaultdict(list)
    for shard, records in _by_shard():
        rng = random.Random(derive_seed(CONFIG.random_seed, shard.file_index, shard.shard_in_file,
                                        STREAM_GLOBAL_SHUFFLE))
        for record in records:
            key = rng.getrandbits(64)
            keyed[key % buckets].append((key, frame_records([record])))
    return [b"".join(frame for bucket in sorted(keyed) if bucket % num_files == f
                     for _, frame in sorted(keyed[bucket])) for f in range(num_files)]


def _beam(prefix, args, shuffle, num_shards=3, suffix=""):
    return beam_pipeline.create_pretraining_data_beam(
        ",".join(CORPUS), str(prefix), spm_model_file=SPM, config=CONFIG, shard_size_mb=SHARD_MB,
        num_output_shards=num_shards, file_name_suffix=suffix, global_shuffle=shuffle, pipeline_args=args)


def _carried_spm(name):
    """The tokenizer files as the launcher ships them to workers: {argument: (file name, bytes)}."""
    with open(SPM, "rb") as f:
        return {"spm_model_file": (name, f.read())}


def _switches(records, origin):
    labels = [origin[r] for r in records]
    return sum(a != b for a, b in zip(labels, labels[1:]))


@pytest.mark.slow
@pytest.mark.parametrize("segments", [True, False], ids=["through-segment-files", "through-the-runner"])
def test_in_process_runner_same_records_as_local_tool_in_beam_named_files(tmp_path, reference, monkeypatch, segments):
    from apache_beam.runners.portability import prism_runner  # pylint: disable=import-outside-toplevel

    # Local outputs pass the records through segment files; remote ones through the runner, as here when off.
    monkeypatch.setattr(launcher, "_LOCAL_SEGMENTS", segments)
    prism = []
    monkeypatch.setattr(prism_runner.PrismRunner, "__init__", lambda self, *a, **k: prism.append(1))
    local, origin, num_shards, _ = reference
    prefix = tmp_path / "out" / "pretraining"
    stats = _beam(prefix, DIRECT + ["--direct_running_mode=in_memory"], shuffle=False, suffix=".tfrecord")
    assert not prism  # Beam's in-process Python runner, never the Prism binary
    names = [f"pretraining-{i:05d}-of-00003.tfrecord" for i in range(3)]
    assert sorted(os.listdir(tmp_path / "out")) == names
    files = records_lib.expand_file_patterns(f"{prefix}-*")  # what run_pretraining.py --input_file=<prefix>-* reads
    assert [os.path.basename(f) for f in files] == names
    records_lib.check_record_lengths(files, CONFIG.max_seq_length, CONFIG.max_predictions_per_seq)
    per_file = [_read([f]) for f in files]
    beam_records = [r for recs in per_file for r in recs]
    assert collections.Counter(beam_records) == collections.Counter(local)
    assert all(per_file)
    assert [collections.Counter(recs) for recs in per_file] == _expected_files(3, 0)
    assert stats.instances == len(local) and stats.files == 2 and stats.shards == num_shards
    # Without the global shuffle each file holds its records shard after shard: few changes of input file.
    assert sum(_switches(recs, origin) for recs in per_file) <= 3 * num_shards


@pytest.mark.slow
def test_multi_process_runner_same_records_and_global_shuffle_fixed_by_the_seed(tmp_path, reference):
    local, origin, num_shards, _ = reference
    prefix = tmp_path / "pretraining"
    _beam(prefix, DIRECT + ["--direct_running_mode=multi_processing", "--direct_num_workers=2"], shuffle=True,
          num_shards=2)
    files = sorted(glob.glob(f"{prefix}-*"))
    assert [os.path.basename(f) for f in files] == ["pretraining-00000-of-00002", "pretraining-00001-of-00002"]
    beam_records = _read(files)
    assert collections.Counter(beam_records) == collections.Counter(local)
    assert beam_records != local
    # Shuffled across the corpus: the input file changes about as often as in a random order (2p(1-p) per record).
    share = sum(origin[r] for r in local) / len(local)
    expected = 2 * share * (1 - share) * len(local)
    assert sum(_switches(_read([f]), origin) for f in files) > max(0.6 * expected, 6 * num_shards)
    # The shuffled files are fixed by the seed, whatever the runner's mode and workers.
    again = tmp_path / "again"
    _beam(again, DIRECT + ["--direct_running_mode=in_memory"], shuffle=True, num_shards=2)
    assert [(tmp_path / f"again-0000{i}-of-00002").read_bytes() for i in range(2)] == [
        (tmp_path / os.path.basename(f)).read_bytes() for f in files]


@pytest.mark.parametrize("segments", [True, False], ids=["through-segment-files", "through-the-runner"])
def test_global_shuffle_in_process_keeps_the_records(tmp_path, reference, monkeypatch, segments, caplog):
    monkeypatch.setattr(launcher, "_LOCAL_SEGMENTS", segments)
    monkeypatch.setattr(launcher, "PretrainingConfig", lambda: CONFIG)  # the default config, made small
    segment_dirs, build_fn = [], launcher.ShardRecordsFn
    monkeypatch.setattr(launcher, "ShardRecordsFn", lambda *args: segment_dirs.append(args[-1]) or build_fn(*args))
    local, origin, _, local_stats = reference
    prefix = tmp_path / "one"
    # By default: the default config, one output file, shuffled across the corpus.
    started = time.monotonic()
    with caplog.at_level("INFO", logger=launcher.__name__):
        stats = beam_pipeline.create_pretraining_data_beam(",".join(CORPUS), str(prefix), spm_model_file=SPM,
                                                           shard_size_mb=SHARD_MB, pipeline_args=DIRECT)
    elapsed = time.monotonic() - started
    assert len(segment_dirs) == 1 and (segment_dirs[0] is not None) == segments
    size = sum(map(os.path.getsize, CORPUS))
    assert (f"Beam pipeline: 2 input files ({size / 1e6:.1f} MB), 1 output files one-00000-of-00001, global shuffle "
            f"on ({beam_pipeline.shuffle_bucket_count(size, CONFIG, 1)} buckets)") in caplog.messages
    beam_records = _read([f"{prefix}-00000-of-00001"])
    assert collections.Counter(beam_records) == collections.Counter(local)
    counted = [f.name for f in dataclasses.fields(stats) if f.name not in ("elapsed_seconds", "files")]
    assert {n: getattr(stats, n) for n in counted} == {n: getattr(local_stats, n) for n in counted}  # Beam metrics
    assert stats.masked_positions > 0 and len(stats.ngram_accepted) == CONFIG.ngram and stats.files == 2
    assert 0 < stats.elapsed_seconds <= elapsed
    share = sum(origin[r] for r in local) / len(local)
    assert _switches(beam_records, origin) > 0.6 * 2 * share * (1 - share) * len(local)


RUNNER_MODES = {"in-process-segment-files": (["--direct_running_mode=in_memory"], True),
                "in-process-through-the-runner": (["--direct_running_mode=in_memory"], False),
                "two-worker-processes": (["--direct_running_mode=multi_processing", "--direct_num_workers=2"], True)}


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(RUNNER_MODES))
def test_global_shuffle_writes_a_files_buckets_in_bucket_order(tmp_path, reference, monkeypatch, mode):
    """A small bucket size gives each output file several buckets: a file is its buckets one after the other in
    increasing order, each in the order of its keys, byte for byte, whatever order the runner hands the buckets'
    segments over in (each mode hands them over in its own)."""
    args, segments = RUNNER_MODES[mode]
    monkeypatch.setattr(launcher, "_LOCAL_SEGMENTS", segments)
    monkeypatch.setattr(launcher, "SHUFFLE_BUCKET_RECORDS", 60)  # the launcher's: reaches every mode
    buckets = beam_pipeline.shuffle_bucket_count(sum(map(os.path.getsize, CORPUS)), CONFIG, 3)
    assert buckets >= 4 * 3
    expected = _expected_files(3, buckets)
    assert all(expected) and sum(map(len, expected)) > len(reference[0]) * len(frame_records([b""]))
    _beam(tmp_path / "p", DIRECT + args, shuffle=True, num_shards=3)
    assert [(tmp_path / f"p-0000{i}-of-00003").read_bytes() for i in range(3)] == expected


@pytest.mark.parametrize("shuffle", [False, True], ids=["dealt", "global-shuffle"])
def test_batches_of_a_few_records_give_the_files_of_one_batch(tmp_path, reference, monkeypatch, shuffle):
    """BuildRecords cuts a shard's records into batches of `frames.BATCH_BYTES`: batches of a few records each must
    place every record where one batch per shard places it (dealt round-robin on from where the last batch
    stopped; in its bucket, in key order)."""
    monkeypatch.setattr(frames, "BATCH_BYTES", 2500)  # about 5 records a batch
    monkeypatch.setattr(launcher, "SHUFFLE_BUCKET_RECORDS", 100)
    segment_dirs = []

    def records_fn(*args, **kwargs):
        segment_dirs.append(kwargs.get("segments_dir", args[5] if len(args) > 5 else None))
        return build_records.ShardRecordsFn(*args, **kwargs)

    monkeypatch.setattr(launcher, "ShardRecordsFn", records_fn)
    buckets = beam_pipeline.shuffle_bucket_count(sum(map(os.path.getsize, CORPUS)), CONFIG, 3) if shuffle else 0
    _beam(tmp_path / "p", DIRECT + ["--direct_running_mode=in_memory"], shuffle=shuffle, num_shards=3)
    # Local outputs: by default the records leave BuildRecords through segment files in the run's temporary folder.
    assert len(segment_dirs) == 1 and os.path.dirname(segment_dirs[0]) == str(tmp_path)
    paths = [tmp_path / f"p-0000{i}-of-00003" for i in range(3)]
    if shuffle:
        assert [path.read_bytes() for path in paths] == _expected_files(3, buckets)
    else:
        assert [collections.Counter(_read([path])) for path in paths] == _expected_files(3, 0)


@pytest.mark.slow
def test_script_runs_the_pipeline_with_beam_options(tmp_path, reference):
    local, _, _, _ = reference
    out = tmp_path / "dir"
    result = run_script("create_pretraining_data.py", [
        f"--input_file={','.join(CORPUS)}", f"--output_dir={out}", f"--spm_model_file={SPM}", "--max_seq_length=64",
        "--max_predictions_per_seq=10", "--dupe_factor=2", f"--shard_size_mb={SHARD_MB}", "--num_output_shards=2",
        "--runner", "DirectRunner", "--direct_running_mode=in_memory", "--direct_num_workers", "1",
        "--noglobal_shuffle"])
    assert result.returncode == 0, result.stderr[-3000:]
    names = sorted(os.listdir(out))
    assert names == ["pretraining-00000-of-00002.tfrecord", "pretraining-00001-of-00002.tfrecord", "settings.json"]
    assert collections.Counter(_read([out / n for n in names[:2]])) == collections.Counter(local)
    # A second run would mix its shards with these under one glob, or replace them: refused, nothing touched.
    before = {n: (out / n).read_bytes() for n in names}
    for count, message in (("4", "holds 2 file(s) of another run"), ("2", "exists already (2 output(s) of this run);"
                                                                         " with --runner, existing outputs are always"
                                                                         " refused (remove them first)")):
        again = run_script("create_pretraining_data.py", [
            f"--input_file={CORPUS[0]}", f"--output_dir={out}", f"--spm_model_file={SPM}",
            f"--num_output_shards={count}", "--runner=DirectRunner"])
        assert_one_line_error(again, message, out, status=1)
    assert {n: (out / n).read_bytes() for n in sorted(os.listdir(out))} == before


@pytest.mark.slow
def test_script_errors_in_one_line_and_leaves_nothing(tmp_path):
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"some text\n\x00\x01\x02 binary\n")
    out = tmp_path / "new" / "dir"
    common = [f"--spm_model_file={SPM}", f"--output_dir={out}", "--runner=DirectRunner"]
    result = run_script("create_pretraining_data.py", [f"--input_file={CORPUS[0]},{binary}", *common])
    assert_one_line_error(result, binary, "binary", status=1)
    assert not (tmp_path / "new").exists()  # the folders it made are gone with Beam's temporary files
    unknown = run_script("create_pretraining_data.py", [f"--input_file={CORPUS[0]}", *common, "--no_such_option=1"])
    assert_one_line_error(unknown, "--no_such_option", status=2)
    missing = run_script("create_pretraining_data.py", [f"--input_file={tmp_path}/none-*.txt", *common])
    assert_one_line_error(missing, "none-*.txt", status=1)
    assert not (tmp_path / "new").exists()


def test_worker_error_is_the_local_tools_message(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(PretrainingDataError) as local_err:
        create_pretraining_data(str(empty), [str(tmp_path / "x.tfrecord")], spm_model_file=SPM, config=CONFIG)
    with pytest.raises(PretrainingDataError) as beam_err:
        beam_pipeline.create_pretraining_data_beam(str(empty), str(tmp_path / "x"), spm_model_file=SPM, config=CONFIG,
                                                   pipeline_args=DIRECT)
    assert str(beam_err.value) == str(local_err.value)
    assert os.listdir(tmp_path) == ["empty.txt"]


def test_failure_after_the_write_leaves_no_matching_file(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "pretraining-notes.txt").write_text("not ours")
    (out / "other").write_text("not ours")

    def fail(*args):
        assert sorted(os.listdir(out))[:1] == ["other"] and len(os.listdir(out)) == 4  # the shards were written
        raise RuntimeError("cancelled")

    monkeypatch.setattr(launcher, "_stats", fail)
    with pytest.raises(PretrainingDataError, match=r"the Beam pipeline writing --output_file .*/out/pretraining "
                                                   r"failed: RuntimeError: cancelled; no output was kept$"):
        beam_pipeline.create_pretraining_data_beam(CORPUS[0], str(out / "pretraining"), spm_model_file=SPM,
                                                   config=CONFIG, num_output_shards=2, pipeline_args=DIRECT)
    assert sorted(os.listdir(out)) == ["other", "pretraining-notes.txt"]
    assert not glob.glob(str(out / "pretraining-*-of-*"))


def test_a_corpus_without_training_instances_is_one_line_and_leaves_nothing(tmp_path):
    corpus = tmp_path / "short.txt"
    corpus.write_text("a\n\nb\n", encoding="utf-8")  # two documents of one token each
    with pytest.raises(PretrainingDataError, match=r"^no training instances were created from 1 input file\(s\) "
                                                   r"\(.*short\.txt\): 0 documents with at least 2 tokens, 2 "
                                                   r"shorter ones skipped$"):
        beam_pipeline.create_pretraining_data_beam(str(corpus), str(tmp_path / "out" / "pretraining"),
                                                   spm_model_file=SPM, config=CONFIG, pipeline_args=DIRECT)
    assert os.listdir(tmp_path) == ["short.txt"]


class _StubResult:
    """A pipeline result whose run ends as `ending`: a state it returns, or an exception it raises. It records
    `cancel` calls."""

    def __init__(self, ending):
        self.ending, self.cancelled = ending, []

    def wait_until_finish(self):
        if isinstance(self.ending, str):
            return self.ending
        raise self.ending

    def cancel(self):
        self.cancelled.append(True)


@pytest.mark.parametrize("interrupted", [True, False], ids=["interrupted", "failed"])
def test_an_interrupted_run_is_cancelled_a_failed_one_not_and_neither_leaves_anything(tmp_path, monkeypatch,
                                                                                     interrupted):
    result = _StubResult(KeyboardInterrupt() if interrupted else "FAILED")
    monkeypatch.setattr(beam.Pipeline, "run", lambda self: result)
    expected = pytest.raises(KeyboardInterrupt) if interrupted else pytest.raises(
        PretrainingDataError, match="^the Beam pipeline ended FAILED; no output was kept$")
    with expected:
        beam_pipeline.create_pretraining_data_beam(CORPUS[0], str(tmp_path / "out" / "pretraining"),
                                                   spm_model_file=SPM, config=CONFIG, pipeline_args=DIRECT)
    assert result.cancelled == ([True] if interrupted else []) and os.listdir(tmp_path) == []


def test_a_log_that_cannot_be_made_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    @contextlib.contextmanager
    def no_space():
        raise OSError(28, "No space left on device")
        yield  # pylint: disable=unreachable

    monkeypatch.setattr(launcher, "stderr_to_log", no_space)
    out = tmp_path / "out" / "pretraining"
    with pytest.raises(PretrainingDataError, match=rf"^the Beam pipeline writing --output_file {out} failed: "
                                                   r"OSError: \[Errno 28\] No space left on device; no output was "
                                                   r"kept$"):
        beam_pipeline.create_pretraining_data_beam(CORPUS[0], str(out), spm_model_file=SPM, config=CONFIG,
                                                   pipeline_args=DIRECT)
    assert os.listdir(tmp_path) == []


def test_a_made_folder_that_cannot_be_removed_does_not_hide_the_error(tmp_path, monkeypatch):
    removing = []

    def undeletable(path, ignore_errors=False):
        removing.append(path)
        if not ignore_errors:
            raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(beam.Pipeline, "run", lambda self: _StubResult("FAILED"))
    monkeypatch.setattr(shutil, "rmtree", undeletable)
    with pytest.raises(PretrainingDataError, match="^the Beam pipeline ended FAILED; no output was kept$"):
        beam_pipeline.create_pretraining_data_beam(CORPUS[0], str(tmp_path / "out" / "pretraining"),
                                                   spm_model_file=SPM, config=CONFIG, pipeline_args=DIRECT)
    assert removing == [str(tmp_path / "out")]


def test_a_worker_failure_is_one_line_with_the_tracebacks_in_a_log(tmp_path, monkeypatch, capfd):
    """A crash inside the pipeline (not an input error) is one line naming the output, and keeps Beam's and the
    workers' tracebacks out of the terminal: what they write goes to a log file, which the line names."""
    def crash(*args):
        raise RuntimeError("disk gone")

    monkeypatch.setattr(launcher, "finalize", crash)
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("not ours")  # a folder the run did not make: only its own files go
    with pytest.raises(PretrainingDataError) as failed:
        beam_pipeline.create_pretraining_data_beam(CORPUS[0], str(out / "pretraining"), spm_model_file=SPM,
                                                   config=CONFIG, num_output_shards=2, pipeline_args=DIRECT,
                                                   output_what="--output_dir")
    message = str(failed.value)
    assert message.startswith(f"the Beam pipeline writing --output_dir {out}/pretraining failed: ")
    assert "disk gone" in message and "\n" not in message
    if "tracebacks: " in message:  # what Beam wrote to stderr (workers in subprocesses) is kept there
        log = message.rsplit("tracebacks: ", 1)[1].rstrip(")")
        with open(log, encoding="utf-8") as f:
            assert "disk gone" in f.read()
        os.remove(log)
    assert "Traceback" not in capfd.readouterr().err
    assert os.listdir(out) == ["notes.txt"]  # no output, no temporary folder


def test_stderr_of_a_failed_run_goes_to_its_log(capfd):
    """Everything written to file descriptor 2 in the block (a worker subprocess's traceback included) lands in
    the log, kept when the block fails and removed when it succeeds."""
    import subprocess  # pylint: disable=import-outside-toplevel

    with pytest.raises(RuntimeError), launcher.stderr_to_log() as log:
        subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('Traceback (a worker)')"], check=True)
        raise RuntimeError("failed")
    with open(log, encoding="utf-8") as f:
        assert f.read() == "Traceback (a worker)"
    os.remove(log)
    with launcher.stderr_to_log() as log:
        os.write(2, b"noise")
    assert not os.path.exists(log) and "noise" not in capfd.readouterr().err


@pytest.mark.slow
def test_text_buffered_around_the_block_goes_where_it_was_written():
    """A buffered `sys.stderr` is flushed at both ends of the redirection: what was written before the block
    reaches the terminal, what was written inside reaches the log, even without a line end."""
    import subprocess  # pylint: disable=import-outside-toplevel

    code = ("import io, sys\n"
            "from albert_tf.data.pretraining.beam import launcher\n"
            "sys.stderr = io.TextIOWrapper(open(2, 'wb', closefd=False))  # block-buffered, as a wrapper may be\n"
            "sys.stderr.write('before|')\n"
            "try:\n"
            "    with launcher.stderr_to_log() as log:\n"
            "        sys.stderr.write('inside|')\n"
            "        raise RuntimeError\n"
            "except RuntimeError:\n"
            "    pass\n"
            "sys.stderr.write('after')\n"
            "sys.stderr.flush()\n"
            "print(open(log).read())\n"
            "import os; os.remove(log)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env(),
                          check=True, timeout=120)
    assert done.stdout.strip() == "inside|"
    assert done.stderr.endswith("before|after") and "inside" not in done.stderr  # (Beam may warn at import)


def test_the_log_redirection_leaves_no_file_descriptor_open():
    before = sorted(os.listdir("/proc/self/fd"))
    for fail in (False, True):
        with contextlib.suppress(RuntimeError), launcher.stderr_to_log() as log:
            if fail:
                os.write(2, b"a worker's traceback")
                raise RuntimeError("failed")
    os.remove(log)  # kept: the failure wrote to it
    assert sorted(os.listdir("/proc/self/fd")) == before


def test_local_workers_import_this_checkout(monkeypatch):
    """Beam's local worker processes get the checkout's root first on PYTHONPATH for the run, then it is as it
    was; remote runs, and a PYTHONPATH that holds the root already, are left as they are."""
    root = REPO
    monkeypatch.delenv("PYTHONPATH", raising=False)
    with launcher._importable_by_workers(True):  # pylint: disable=protected-access
        assert os.environ["PYTHONPATH"] == root
    assert "PYTHONPATH" not in os.environ
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    with launcher._importable_by_workers(True):  # pylint: disable=protected-access
        assert os.environ["PYTHONPATH"] == root + os.pathsep + "/elsewhere"
    assert os.environ["PYTHONPATH"] == "/elsewhere"
    for local, path in ((False, "/elsewhere"), (True, os.pathsep.join(["/a", root]))):
        monkeypatch.setenv("PYTHONPATH", path)
        with launcher._importable_by_workers(local):  # pylint: disable=protected-access
            assert os.environ["PYTHONPATH"] == path
        assert os.environ["PYTHONPATH"] == path


def test_outputs_are_checked_where_the_run_will_write_them(tmp_path, monkeypatch):
    """A local prefix is taken from the current folder and `~` (the prefix the pipeline writes), the first folder
    the run would create is named (to remove on failure), and the tokenizer is checked here before any worker
    starts."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    prefix, pattern, made = launcher._checked_outputs("new/deeper/records", ".tfrecord", "--output_file")  # pylint: disable=protected-access
    assert prefix == str(tmp_path / "new" / "deeper" / "records") and made == str(tmp_path / "new")
    assert pattern.startswith(prefix) and pattern.endswith(".tfrecord")
    prefix, _, made = launcher._checked_outputs("~/records", "", "--output_file")  # pylint: disable=protected-access
    assert prefix == str(tmp_path / "home" / "records") and made == str(tmp_path / "home")
    (tmp_path / "home").mkdir()
    assert launcher._checked_outputs("~/records", "", "--output_file")[2] is None  # pylint: disable=protected-access
    monkeypatch.setattr(launcher, "match", lambda pattern: [])  # a remote prefix: taken as it is, no folder made
    assert launcher._checked_outputs("gs://bucket/records", "", "--output_file")[::2] == (  # pylint: disable=protected-access
        "gs://bucket/records", None)
    bad = tmp_path / "bad.model"
    bad.write_bytes(b"not a sentencepiece model")
    with pytest.raises(tokenization.TokenizerError, match="bad.model"):
        launcher._tokenizer_files(str(bad), None, True)  # pylint: disable=protected-access
    assert launcher._tokenizer_files(SPM, None, False) == _carried_spm("30k-clean.model")  # pylint: disable=protected-access


def test_config_warnings_are_logged_and_a_shard_count_under_one_refused_before_anything_is_read(tmp_path, caplog):
    wasteful = PretrainingConfig(max_seq_length=64, max_predictions_per_seq=20)  # 20 > round(64 * 0.15)
    with caplog.at_level("WARNING", logger=launcher.__name__), pytest.raises(
            PretrainingDataError, match="^num_output_shards must be at least 1, got 0$"):
        beam_pipeline.create_pretraining_data_beam(str(tmp_path / "missing*.txt"), str(tmp_path / "out"),
                                                   spm_model_file=SPM, config=wasteful, num_output_shards=0)
    assert [r.getMessage() for r in caplog.records] == wasteful.validate()
    assert os.listdir(tmp_path) == []


def test_a_runner_takes_one_output_prefix(tmp_path):
    """--output_file's declared check: with --runner a list of files is refused before anything is read."""
    args = [f"--input_file={os.path.join(DATA_DIR, 'corpus', 'sample_text.txt')}",
            f"--output_file={tmp_path}/a,{tmp_path}/b", f"--spm_model_file={SPM}", "--runner=DirectRunner"]
    result = run_script("create_pretraining_data.py", args)
    assert_one_line_error(result, "--output_file is one name prefix", status=2)
    assert os.listdir(tmp_path) == []
    single = run_script("create_pretraining_data.py", args[:1] + [f"--output_file={tmp_path}/a,{tmp_path}/b"] +
                        args[2:3])
    assert single.returncode == 0, log_tail(single)  # without a runner, a list is the original's round-robin
    assert sorted(os.listdir(tmp_path)) == ["a", "a.settings.json", "b"]  # the record beside the first


def test_no_beam_flags_without_runner(tmp_path):
    """A Beam option is refused as an unknown flag without --runner (the local tool would ignore it), before
    anything is written; the same arguments with --runner are a Beam run."""
    args = [f"--input_file={os.path.join(DATA_DIR, 'corpus', 'sample_text.txt')}", f"--output_file={tmp_path}/x",
            f"--spm_model_file={SPM}", "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=1",
            "--direct_num_workers=2"]
    result = run_script("create_pretraining_data.py", args)
    line = assert_one_line_error(result, "--direct_num_workers", status=2)
    assert "unknown flag" in line
    assert os.listdir(tmp_path) == []
    beam_run = run_script("create_pretraining_data.py", args + ["--runner=DirectRunner"])
    assert beam_run.returncode == 0, log_tail(beam_run)
    assert sorted(os.listdir(tmp_path)) == ["x-00000-of-00001", "x.settings.json"]


@pytest.mark.parametrize("args, message", [
    (["--direct_num_workers=abc"], "Beam pipeline option argument --direct_num_workers: invalid int value: 'abc'"),
    (["--runner=DirectRunner", "--project"], "Beam pipeline option argument --project: expected one argument"),
    (["--runne=DataflowRunner"], "unknown flag --runne (neither this script's flag nor a Beam pipeline option)"),
    (["--runner=DirectRunner", "extra"], "unexpected arguments: ['extra']"),
])
def test_beam_arguments_are_refused_in_the_one_line_argparse_ends_with(args, message):
    """A bad value gives argparse's own last line without its program name; a prefix of a Beam option is not taken
    for it (no abbreviations); a word that is no option is named."""
    with pytest.raises(UsageError) as raised:
        options.pipeline_options(args)
    assert str(raised.value) == message


@pytest.mark.parametrize("runner, direct", [(None, True), ("DirectRunner", True), ("directrunner", True),
                                            ("SwitchingDirectRunner", True), ("FnApiRunner", True),
                                            ("DataflowRunner", False), ("PrismRunner", False)])
def test_a_runner_is_local_for_the_direct_names_only(runner, direct):
    """Any iterable of arguments works (read once); the local runner for no --runner or a direct runner's name in any
    case."""
    args = iter([] if runner is None else [f"--runner={runner}", "--direct_num_workers=3"])
    parsed = options.pipeline_options(args)
    assert options.is_direct(parsed) is direct
    if runner is not None:
        assert parsed.get_all_options()["direct_num_workers"] == 3


def test_the_direct_runner_runs_a_pipeline_with_the_given_options(tmp_path):
    """Built without Prism: Beam's FnApiRunner, handed the parsed options (seen by its workers), runs a pipeline."""
    parsed = options.pipeline_options(["--direct_num_workers=2", "--job_name=albert-test"])
    runner = options.direct_runner(parsed)
    carried = runner._provision_info.provision_info.pipeline_options.fields  # pylint: disable=protected-access
    assert carried["beam:option:job_name:v1"].string_value == "albert-test"
    assert carried["beam:option:direct_num_workers:v1"].string_value == "2"
    with beam.Pipeline(runner=runner, options=parsed) as pipeline:
        _ = (pipeline | beam.Create([1, 2, 3]) | beam.Map(lambda x: str(x * 2))
             | beam.io.WriteToText(str(tmp_path / "out"), num_shards=1, shard_name_template=""))
    assert sorted((tmp_path / "out").read_text().split()) == ["2", "4", "6"]


def _chained(*errors, via="__context__"):
    for outer, inner in zip(errors, errors[1:]):
        setattr(outer, via, inner)
    return errors[0]


@pytest.mark.parametrize("via", ["__cause__", "__context__"])
def test_a_marked_worker_message_is_found_anywhere_in_the_chain(via):
    """A worker's `PretrainingDataError` or `TokenizerError` becomes a marked `BeamWorkerError`; the launcher finds
    the message in whatever the runner raised, through causes and contexts, or in its text; a cycle ends."""
    with pytest.raises(worker_errors.BeamWorkerError) as raised:
        with worker_errors.marked_errors():
            raise PretrainingDataError("line 3 of a.txt: bad")
    with pytest.raises(worker_errors.BeamWorkerError) as from_tokenizer:
        with worker_errors.marked_errors():
            raise tokenization.TokenizerError("x.model: not a model")
    assert worker_errors.marked_message(from_tokenizer.value) == "x.model: not a model"
    deep = _chained(RuntimeError("runner"), ValueError("bundle"), raised.value, via=via)
    assert worker_errors.marked_message(deep) == "line 3 of a.txt: bad"
    assert worker_errors.marked_message(RuntimeError(f"remote job said: {raised.value} (more)")) == \
        "line 3 of a.txt: bad"
    first, second = RuntimeError("a"), RuntimeError("b")
    assert worker_errors.marked_message(_chained(first, second, first, via=via)) is None
    assert worker_errors.marked_message(None) is None
    with pytest.raises(KeyError):  # other errors pass unmarked
        with worker_errors.marked_errors():
            raise KeyError("x")


def test_marked_errors_are_dropped_from_the_root_handlers_within_the_block(tmp_path):
    """Beam logs a failed bundle with the marked error in its message or its exception; those records are
    dropped inside `quiet_marked_errors` only, others pass, and the handlers are left as they were."""
    handler = logging.FileHandler(tmp_path / "log.txt")
    root = logging.getLogger()
    root.addHandler(handler)
    marked = str(worker_errors.BeamWorkerError(worker_errors._OPEN + "bad" + worker_errors._CLOSE))  # pylint: disable=protected-access
    try:
        with worker_errors.quiet_marked_errors():
            root.error("bundle failed: %s", marked)
            try:
                raise RuntimeError(marked)
            except RuntimeError:
                root.exception("bundle failed")
            root.error("kept %s", "line")
            root.error("bundle failed %d " + marked, "not a number")  # a message that cannot be formatted
        root.error("after: %s", marked)
    finally:
        root.removeHandler(handler)
        handler.close()
    text = (tmp_path / "log.txt").read_text()
    assert text.count("bundle failed") == 0 and "kept line" in text and "after: " in text
    assert handler.filters == []


def test_write_stages_put_each_output_together_and_finalize_renames_once(tmp_path):
    """The stages after BuildRecords on local files: a bucket's frames sorted by key whether its pieces come as
    bytes or as ranges of a segment file, going to file bucket % files; an output's buckets joined in bucket order
    (a duplicate segment ignored), ranges and pieces in the order given; Finalize renames the first attempt of each
    file over any old output, creates the files nobody wrote, removes the folder, and a retry changes nothing."""
    temp = tmp_path / "beam-temp-out-1"
    temp.mkdir()
    names = [str(tmp_path / f"out-0000{i}-of-00003") for i in range(3)]
    records = [bytes([65 + i]) * (i + 1) for i in range(6)]
    keys = [50, 10, 40, 20, 60, 30]
    (first, piece_a), = frames.keyed_pieces({4: (keys[:3], records[:3])})
    (_, piece_b), = frames.keyed_pieces({4: (keys[3:], records[3:])})
    segment = tmp_path / "segment"
    segment.write_bytes(b"xx" + piece_b)
    (file_index, (bucket, bucket_path)), = write.write_bucket((4, [piece_a, (str(segment), 2, len(piece_b))]),
                                                              str(temp), 3)
    assert (first, file_index, bucket) == (4, 1, 4)
    by_key = [records[i] for i in sorted(range(6), key=keys.__getitem__)]
    assert open(bucket_path, "rb").read() == frame_records(by_key)

    other = temp / "bucket-7"
    other.write_bytes(b"seven")
    duplicate = temp / "bucket-4-again"
    duplicate.write_bytes(b"not this one")
    (zero, (index, joined)), = write.concat_segments((1, [(7, str(other)), (4, bucket_path), (4, str(duplicate))]),
                                                     str(temp), names)
    assert (zero, index) == (0, 1) and joined.endswith("-out-00001-of-00003")
    assert open(joined, "rb").read() == frame_records(by_key) + b"seven"

    segment.write_bytes(b"0123456789")
    (_, (index, ranged)), = write.write_ranges((0, [(str(segment), 6, 3), (str(segment), 0, 2)]), str(temp), names)
    assert index == 0 and open(ranged, "rb").read() == b"67801"
    (_, (index, pieces)), = write.write_file((0, [b"ab", b"cd"]), str(temp), names)
    assert index == 0 and open(pieces, "rb").read() == b"abcd" and pieces != ranged

    with open(names[0], "wb") as old:
        old.write(b"an old output")
    assert {os.path.dirname(p) for p in (bucket_path, joined, ranged, pieces)} == {str(temp)}
    write.finalize((0, [(0, ranged), (1, joined), (0, pieces)]), str(temp), names)
    assert [open(n, "rb").read() for n in names] == [b"67801", frame_records(by_key) + b"seven", b""]
    assert sorted(os.listdir(tmp_path)) == ["out-00000-of-00003", "out-00001-of-00003", "out-00002-of-00003",
                                            "segment"]
    write.finalize((0, [(0, ranged), (1, joined), (0, pieces)]), str(temp), names)  # a retried attempt
    assert [open(n, "rb").read() for n in names] == [b"67801", frame_records(by_key) + b"seven", b""]


def test_local_inputs_are_listed_as_the_local_tool_lists_them(tmp_path):
    for name, size in (("b.txt", 3), ("a.txt", 5), ("c.log", 1)):
        (tmp_path / name).write_bytes(b"x" * size)
    listed = beam_files.list_inputs(f" {tmp_path}/c.log , ,{tmp_path}/*.txt")
    assert listed == [(f"{tmp_path}/c.log", 1), (f"{tmp_path}/a.txt", 5), (f"{tmp_path}/b.txt", 3)]
    assert beam_files.list_inputs([f"{tmp_path}/b.txt"]) == [(f"{tmp_path}/b.txt", 3)]
    with pytest.raises(PretrainingDataError, match=f"^--inputs {re.escape(str(tmp_path))} is a directory"):
        beam_files.list_inputs(str(tmp_path), what="--inputs")
    with pytest.raises(PretrainingDataError, match="no input files matched"):
        beam_files.list_inputs(f"{tmp_path}/none*.txt")


def test_remote_inputs_are_listed_by_beams_file_systems(monkeypatch, caplog):
    """Each remote pattern's matches sorted, in the order of the patterns, a file matched twice listed once, a
    settings record only where named, a pattern matching nothing warned about, and nothing matched at all refused
    naming the patterns."""
    store = {"gs://b/x2": 20, "gs://b/x1": 10, "gs://b/y": 5, "gs://b/x.settings.json": 1}
    monkeypatch.setattr(beam_files, "match", lambda pattern: [FileMetadata(p, n) for p, n in store.items()
                                                              if fnmatch.fnmatch(p, pattern)])
    with caplog.at_level("WARNING"):
        listed = beam_files.list_inputs("gs://b/y,gs://b/x*,gs://b/z*,gs://b/x1")
    assert listed == [("gs://b/y", 5), ("gs://b/x1", 10), ("gs://b/x2", 20)]  # a glob skips a settings record
    assert beam_files.list_inputs("gs://b/x.settings.json") == [("gs://b/x.settings.json", 1)]  # named, it is read
    assert "input pattern 'gs://b/z*' matched no files" in caplog.text
    with pytest.raises(PretrainingDataError, match=r"^no input files matched 'gs://b/z\*,gs://b/w'$"):
        beam_files.list_inputs(["gs://b/z*", " ", "gs://b/w"])


def test_match_lists_through_beam_and_finds_nothing_where_no_file_system_answers(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"abc")
    assert [(m.path, m.size_in_bytes) for m in beam_files.match(f"{tmp_path}/*.txt")] == [(f"{tmp_path}/a.txt", 3)]
    assert beam_files.match("nosuchscheme://bucket/*.txt") == []
    assert beam_files.beam_size(f"{tmp_path}/a.txt") == 3


def test_output_names_and_temporary_folders_are_beams(tmp_path, monkeypatch):
    """Outputs named as Beam's WriteToTFRecord names them and matched by the outputs' pattern whatever their
    number; a run's temporary folder beside them, found again locally or (object stores) from the objects in it."""
    prefix = str(tmp_path / "out")
    names = beam_files.output_names(prefix, 12, ".tfrecord")
    assert names[0] == f"{prefix}-00000-of-00012.tfrecord" and names[11] == f"{prefix}-00011-of-00012.tfrecord"
    pattern = beam_files.output_glob(prefix, ".tfrecord")
    assert all(fnmatch.fnmatch(n, pattern) for n in names + beam_files.output_names(prefix, 1, ".tfrecord"))
    assert not fnmatch.fnmatch(f"{prefix}-00000-of-00012.tfrecord.tmp", pattern)
    assert not fnmatch.fnmatch(f"{prefix}-0000-of-00012.tfrecord", pattern)
    temp = beam_files.new_temp_dir(prefix)
    assert re.fullmatch(re.escape(str(tmp_path)) + r"/beam-temp-out-[0-9a-f]{32}", temp)
    assert temp != beam_files.new_temp_dir(prefix)
    os.mkdir(temp)
    os.mkdir(tmp_path / "beam-temp-other-1")
    assert beam_files.temp_dirs(prefix) == {temp}
    objects = ["s3://b/d/beam-temp-out-1/x", "s3://b/d/beam-temp-out-1/y", "s3://b/d/beam-temp-out-2/z"]
    seen = []
    monkeypatch.setattr(beam_files, "match", lambda p: seen.append(p) or [FileMetadata(o, 1) for o in objects])
    assert beam_files.temp_dirs("s3://b/d/out") == {"s3://b/d/beam-temp-out-1", "s3://b/d/beam-temp-out-2"}
    assert seen == ["s3://b/d/beam-temp-out-*/*"]


def test_stage_files_are_read_in_blocks_and_writes_cut_short_leave_nothing(tmp_path, caplog, monkeypatch):
    one, two = tmp_path / "one", tmp_path / "two"
    one.write_bytes(b"abcdefg")
    two.write_bytes(b"hi")
    opened = []
    monkeypatch.setattr(beam_files, "beam_open", lambda path, opener=beam_files.beam_open: opened.append(
        opener(path)) or opened[-1])
    assert list(beam_files.read_all([str(one), str(two)], block=3)) == [b"abc", b"def", b"g", b"hi"]
    assert len(opened) == 2 and all(f.closed for f in opened)
    assert beam_files.read_range(str(one), 2, 4) == b"cdef"
    with pytest.raises(OSError, match=f"^{re.escape(str(one))}: 2 bytes at 5, expected 4$"):
        beam_files.read_range(str(one), 5, 4)

    def failing():
        yield b"part"
        raise RuntimeError("worker lost")

    created = []
    create = beam_files.FileSystems.create
    monkeypatch.setattr(beam_files.FileSystems, "create", lambda *a, **k: created.append(create(*a, **k)) or
                        created[-1])
    with pytest.raises(RuntimeError, match="worker lost"):
        beam_files.write_all(str(tmp_path / "cut"), failing())
    assert not (tmp_path / "cut").exists()
    beam_files.write_all(str(tmp_path / "whole"), iter([b"ab", b"c"]))
    assert (tmp_path / "whole").read_bytes() == b"abc"
    assert len(created) == 2 and all(f.closed for f in created)  # closed (and so committed) either way
    beam_files.delete([str(tmp_path / "whole"), str(tmp_path / "never-there"), str(one)])
    assert sorted(os.listdir(tmp_path)) == ["two"]
    assert "could not remove " + str(tmp_path / "never-there") in caplog.text


def test_frames_are_joined_into_pieces_of_at_most_the_batch_size(monkeypatch):
    """A piece grows while it stays within BATCH_BYTES (equal is within), a frame larger than it goes alone, and
    nothing is lost or reordered."""
    monkeypatch.setattr(frames, "BATCH_BYTES", 10)
    sizes = [4, 4, 4, 12, 1, 5, 5, 5]
    pieces = [bytes([65 + i]) * n for i, n in enumerate(sizes)]
    joined = list(frames.joined_pieces(pieces))
    assert [len(p) for p in joined] == [8, 4, 12, 6, 10]
    assert b"".join(joined) == b"".join(pieces)
    assert list(frames.joined_pieces([])) == []
    assert list(frames.joined_pieces([b"x" * 12, b"y"])) == [b"x" * 12, b"y"]  # oversized first: no empty piece
    for sizes, joined in (([5, 5], [10]), ([5, 5, 1], [10, 1]), ([12, 5, 5], [12, 10]), ([12, 5, 5, 1], [12, 10, 1])):
        assert [len(p) for p in frames.joined_pieces([b"z" * n for n in sizes])] == joined, sizes


def test_records_cross_stages_as_framed_pieces_dealt_and_sorted():
    """BuildRecords sends a batch as one element of TFRecord frames per output file (dealt round-robin from the
    given start) or per shuffle bucket; a bucket comes out in the order of its keys (ties: by frame bytes)."""
    records = [bytes([i]) * (i + 1) for i in range(10)]
    dealt = frames.dealt_pieces(records, 2, 3)
    assert dealt == [(j, frame_records([r for i, r in enumerate(records) if (2 + i) % 3 == j])) for j in range(3)]
    assert frames.dealt_pieces(records[:1], 1, 3) == [(1, frame_records(records[:1]))]  # no empty pieces

    keys = [7, 3, 2**64 - 1, 11, 0, 3, 5, 9, 1, 8]  # two equal keys in two pieces: ordered by their frames' bytes
    pieces = [piece for lo, hi in ((0, 4), (4, 10))
              for _, piece in frames.keyed_pieces({5: (keys[lo:hi], records[lo:hi])})]
    in_order = [r for _, _, r in sorted(zip(keys, [frame_records([r]) for r in records], records))]
    assert b"".join(frames.bucket_frames(pieces[::-1])) == frame_records(in_order)
    assert b"".join(frames.joined_pieces(frames.bucket_frames(pieces))) == frame_records(in_order)
    tied = [piece for i in (1, 0) for _, piece in frames.keyed_pieces({0: ([4], records[i:i + 1])})]
    assert b"".join(frames.bucket_frames(tied)) == frame_records(records[:2])  # one key, every frame tied
    # Bucket b is written to output file b % files: as many buckets for each file.
    assert [beam_pipeline.shuffle_bucket_count(size, CONFIG, files) for size, files in
            ((1000, 1), (1000, 4), (10**9, 1), (10**9, 7))] == [1, 4, 164, 168]
    # A bucket is 50,000 records of the estimate (4 text bytes a token): exactly 50,000 records are one bucket,
    # 50,001 two.
    per_record = 4 * CONFIG.max_num_tokens / CONFIG.dupe_factor
    assert [beam_pipeline.shuffle_bucket_count(records * per_record, CONFIG) for records in (50_000, 50_001)] == [1, 2]
    assert beam_pipeline.shuffle_bucket_count(0, CONFIG, 3) == 3  # no text: still a bucket for each file


def test_a_workers_setup_makes_the_tokenizer_from_the_bytes_it_was_given(tmp_path, monkeypatch):
    """BuildRecords' `setup`, once per worker: the tokenizer from the files' bytes it carries (written to a
    temporary folder, removed after), lower-casing as given, one SentencePiece thread (a worker per core), Beam's
    file systems for remote inputs, and a metric counter for every statistic and n-gram size."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    carried = _carried_spm("renamed.model")
    text = "Father Brown SAID 1,000 words."
    for lower in (True, False):
        fn = build_records.ShardRecordsFn(carried, lower, CONFIG, 0, 2)
        fn.setup()
        assert os.listdir(tmp_path) == []
        assert shards._REMOTE_IO == {"open": beam_files.beam_open,  # pylint: disable=protected-access
                                     "size": beam_files.beam_size}
        assert fn.tables.num_threads == 1
        local = TokenTables(tokenization.FullTokenizer(spm_model_file=SPM, do_lower_case=lower))
        ids, lengths = fn.tables.lines_to_ids(text)
        expected_ids, expected_lengths = local.lines_to_ids(text)
        assert ids.tolist() == expected_ids.tolist() and lengths == expected_lengths
        ngram_counters = [f"ngram_{kind}_{n}" for kind in ("drawn", "accepted") for n in range(1, CONFIG.ngram + 1)]
        assert sorted(fn.counters) == sorted([*fn._COUNTERS, *ngram_counters])  # pylint: disable=protected-access
    assert TokenTables(tokenization.FullTokenizer(spm_model_file=SPM, do_lower_case=True)).lines_to_ids(text)[0] \
        .tolist() != ids.tolist()  # the two cases differ on this text


@pytest.mark.parametrize("shuffle", [False, True], ids=["dealt", "global-shuffle"])
def test_a_shards_records_leave_in_batches_cut_once_they_reach_the_batch_bytes(monkeypatch, shuffle):
    """BuildRecords' `process` on one shard: a batch ends with the record that brings its records' bytes to
    `frames.BATCH_BYTES` or more (memory stays bounded by about one batch), and each batch leaves as its own
    pieces; one output file or bucket, so each batch is one piece."""
    shard = next(build_records.file_shards((0, CORPUS[1]), int(SHARD_MB * 2**20)))
    tables = TokenTables(tokenization.FullTokenizer(spm_model_file=SPM))
    records = list(shard_records(shard, CONFIG, tables, Stats(ngram_drawn=[0] * CONFIG.ngram,
                                                              ngram_accepted=[0] * CONFIG.ngram)))
    assert len(records) > 12
    fn = build_records.ShardRecordsFn(_carried_spm("m.model"), True, CONFIG, int(shuffle), 1)
    fn.setup()
    sizes = [len(r) for r in records]
    for limit in (sizes[0] + sizes[1], sizes[0] + 1, sizes[0], 3 * max(sizes)):
        monkeypatch.setattr(frames, "BATCH_BYTES", limit)
        batches, batch, total = [], [], 0
        for record in records:
            batch.append(record)
            total += len(record)
            if total >= limit:
                batches.append(batch)
                batch, total = [], 0
        batches += [batch] if batch else []
        pieces = list(fn.process(shard))
        if shuffle:
            rng = random.Random(derive_seed(CONFIG.random_seed, 0, 0, STREAM_GLOBAL_SHUFFLE))
            keys = [[rng.getrandbits(64) for _ in b] for b in batches]
            expected = [(0, piece) for k, b in zip(keys, batches) for _, piece in frames.keyed_pieces({0: (k, b)})]
        else:
            expected = [(0, frame_records(b)) for b in batches]
        assert pieces == expected, limit


def test_run_statistics_are_the_committed_counters_else_the_attempted():
    """The run's `Stats` from Beam's counters: a counter's committed value (what finished bundles counted; retried
    bundles count again in `attempted`), or the attempted one where the runner commits none; n-gram counters by
    size; counters of no statistic ignored."""
    def counter(name, committed, attempted):
        return types.SimpleNamespace(key=types.SimpleNamespace(metric=types.SimpleNamespace(name=name)),
                                     committed=committed, attempted=attempted)

    counters = [counter("documents", 5, 7), counter("instances", None, 9), counter("documents", 1, 1),
                counter("ngram_drawn_2", 4, 6), counter("ngram_accepted_1", None, 3), counter("unknown", 8, 8)]
    asked = []

    class _Metrics:
        def query(self, metrics_filter):
            asked.append(metrics_filter)
            return {"counters": counters}

    stats = launcher._stats(types.SimpleNamespace(metrics=_Metrics), 2)  # pylint: disable=protected-access
    assert (stats.documents, stats.instances, stats.ngram_drawn, stats.ngram_accepted) == (6, 9, [0, 4], [3, 0])
    assert asked[0].namespaces == {build_records.METRICS_NAMESPACE}
