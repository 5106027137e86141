"""Faults in create_pretraining_data.py: an output that is one of the inputs, a full disk, outputs and inputs of
the wrong kind. Each fails with one line naming the flag or file, changes nothing of the user's and leaves no
temporary behind (workers stopped quietly)."""

import glob
import json
import multiprocessing
import os
import re
import resource
import shutil
import signal

import pytest

from albert_tf import fileio
from albert_tf.data import pretraining as pdata
from albert_tf.data import tfrecord_writer
from albert_tf.data.pretraining import pipeline, shards
from albert_tf.errors import AlbertError, UsageError
from tests.helpers import DATA_DIR, SPM, assert_one_line_error, leftovers, run_script, tmpfs, tree_snapshot

CORPUS = os.path.join(DATA_DIR, "corpus")
SAMPLE = os.path.join(CORPUS, "sample_text.txt")
BOOK = os.path.join(CORPUS, "gutenberg-austen-emma.txt")  # about 140 KB of records at these settings
SMALL = ["--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=1"]
CONFIG = pdata.PretrainingConfig(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1)


def script(*args):
    return run_script("create_pretraining_data.py", [f"--spm_model_file={SPM}", *SMALL, *args])


def create(inputs, outputs, **kwargs):
    kwargs.setdefault("spm_model_file", SPM)
    kwargs.setdefault("num_workers", 1)
    return pdata.create_pretraining_data(inputs, outputs, config=CONFIG, **kwargs)


@pytest.fixture()
def corpus(tmp_path):
    """A folder of two text files, `a.txt` and `c.txt`."""
    directory = tmp_path / "corpus"
    directory.mkdir()
    shutil.copy(SAMPLE, directory / "a.txt")
    shutil.copy(SAMPLE, directory / "c.txt")
    return directory


# ------------------------------------------------------------------------------------------------------------------
# An output that is one of the inputs


def test_output_that_is_an_input_is_refused(tmp_path, corpus):
    """The issue's `--input_file=c.txt --output_file=c.txt`, spelled differently, in a comma list of a glob."""
    before = tree_snapshot(tmp_path)
    result = script(f"--input_file={corpus}/a.txt,{corpus}/c*", f"--output_file={tmp_path}/out.tfrecord,"
                    f"{corpus}/./c.txt", "--num_workers=1")
    assert_one_line_error(result, "--output_file", "c.txt", "--input_file")
    assert tree_snapshot(tmp_path) == before


@pytest.mark.parametrize("spelling", ["same", "dotted", "symlink", "hardlink", "output_dir"])
def test_output_that_is_an_input_is_refused_however_spelled(tmp_path, corpus, spelling):
    inputs = f"{corpus}/*.txt"
    target = corpus / "c.txt"
    if spelling == "same":
        outputs = [str(tmp_path / "x.tfrecord"), str(target)]
    elif spelling == "dotted":
        outputs = [os.path.join(str(corpus), "..", "corpus", ".", "c.txt")]
    elif spelling in ("symlink", "hardlink"):
        link = tmp_path / "link.tfrecord"
        (os.symlink if spelling == "symlink" else os.link)(target, link)
        outputs = [str(link)]
    else:  # a shard of --output_dir is a link to an input
        outputs = pdata.output_shard_paths(str(tmp_path / "records"), 2)
        os.makedirs(tmp_path / "records")
        os.link(target, outputs[1])
    before = tree_snapshot(tmp_path)
    with pytest.raises(UsageError, match="would overwrite the input"):
        create(inputs, outputs)
    assert tree_snapshot(tmp_path) == before


# ------------------------------------------------------------------------------------------------------------------
# A full disk


@pytest.mark.parametrize("flag, workers", [("--output_file", 1), ("--output_file", 2), ("--output_dir", 2)])
def test_disk_full(tmp_path, flag, workers):
    with tmpfs(tmp_path / "disk", "64k") as disk:
        os.mkdir(os.path.join(disk, "out"))
        target = os.path.join(disk, "out", "records.tfrecord" if flag == "--output_file" else "records")
        before = tree_snapshot(disk)
        extra = ["--num_output_shards=2"] if flag == "--output_dir" else []
        result = script(f"--input_file={BOOK}", f"{flag}={target}", f"--num_workers={workers}", "--shard_size_mb=0.02",
                        *extra)
        assert_one_line_error(result, flag, target, "No space left on device")
        assert "KeyboardInterrupt" not in result.stderr, result.stderr
        assert tree_snapshot(disk) == before
        assert leftovers(disk) == []


@pytest.mark.parametrize("workers", [1, 2])
def test_outputs_on_a_mount_point_of_their_own(tmp_path, workers):
    """The output folder is its own filesystem (a Docker volume): the records are staged in it and renamed into
    place (no "Invalid cross-device link"), and nothing is written beside it."""
    with tmpfs(tmp_path / "volume", "16m") as volume:
        create([SAMPLE], [os.path.join(volume, "a.tfrecord"), os.path.join(volume, "b.tfrecord")],
               num_workers=workers)
        assert sorted(os.listdir(volume)) == ["a.tfrecord", "b.tfrecord"]
        assert all(os.path.getsize(os.path.join(volume, n)) > 0 for n in os.listdir(volume))
    assert os.listdir(tmp_path) == ["volume"]


def test_stopped_workers_print_nothing(tmp_path, capfd, monkeypatch):
    """The scripts turn SIGTERM into KeyboardInterrupt in the parent; workers stopped by the pool's `terminate()`
    must not inherit that handler (each would print a KeyboardInterrupt traceback)."""
    def interrupt(progress):
        if progress.instances > 0:
            raise KeyboardInterrupt

    def raise_interrupt(signum, frame):
        raise KeyboardInterrupt

    terminated = []
    terminate = multiprocessing.process.BaseProcess.terminate
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "terminate",
                        lambda process: terminated.append(process.pid) or terminate(process))
    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            create([os.path.join(CORPUS, f"gutenberg-{name}.txt") for name in ("austen-emma", "austen-persuasion")],
                   [str(tmp_path / "out.tfrecord")], num_workers=2, progress=interrupt, progress_every=10,
                   shard_size_mb=0.01)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert not multiprocessing.active_children() and len(set(terminated)) == 2  # stopped at once, not left running
    err = capfd.readouterr().err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert os.listdir(tmp_path) == []


def _signal_state_of_a_worker(queue):
    """In a forked child set up as the scripts' parent is (SIGTERM raising KeyboardInterrupt, the stop signals
    blocked while the pool forks): what `_worker_init` leaves."""
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    pipeline._block_stop_signals()
    pipeline._worker_init({"spm_model_file": SPM, "vocab_file": None, "do_lower_case": True}, CONFIG, "/tmp")
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    queue.put((signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, signal.getsignal(signal.SIGINT) == signal.SIG_IGN,
               sorted(int(s) for s in set(blocked) & {signal.SIGINT, signal.SIGTERM})))


def test_a_worker_takes_sigterm_by_default_ignores_ctrl_c_and_unblocks_both():
    """What keeps stopped workers quiet, checked where it is set: a worker idle in the pool's queue when the pool's
    `terminate()` comes must die of SIGTERM (the parent's KeyboardInterrupt handler there prints a traceback), leave
    Ctrl-C to the parent, and not keep the stop signals blocked as they were while it was forked."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_signal_state_of_a_worker, args=(queue,))
    child.start()
    state = queue.get(timeout=60)
    child.join(60)
    assert state == (True, True, [])


def test_stop_signals_are_blocked_while_the_pool_forks_and_restored_after():
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    mask = pipeline._block_stop_signals()
    try:
        assert {signal.SIGINT, signal.SIGTERM} <= signal.pthread_sigmask(signal.SIG_BLOCK, [])
    finally:
        pipeline._restore_signals(mask)
    assert mask == before and signal.pthread_sigmask(signal.SIG_BLOCK, []) == before


@pytest.fixture()
def open_file_limit():
    """Restores this process's soft limit of open files after a test lowers it."""
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    yield limits
    resource.setrlimit(resource.RLIMIT_NOFILE, limits)


def test_the_global_shuffle_raises_a_low_open_file_limit_instead_of_failing_at_the_end(tmp_path, open_file_limit):
    """149 shards read at once under a soft limit with room for 80 more files (as `ulimit -n` 1024 is for a 4 GB
    corpus at the default 4 MB shards): the run raises the soft limit and writes what it writes with room."""
    books = sorted(glob.glob(os.path.join(CORPUS, "gutenberg-*.txt")))
    create(books, [str(tmp_path / "roomy.tfrecord")], shard_size_mb=0.001)
    open_now = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_now + 80, open_file_limit[1]))
    create(books, [str(tmp_path / "tight.tfrecord")], shard_size_mb=0.001)
    assert (tmp_path / "tight.tfrecord").read_bytes() == (tmp_path / "roomy.tfrecord").read_bytes()
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] > open_now + 149


def test_a_hard_open_file_limit_too_low_for_the_global_shuffle_is_refused_before_any_record(tmp_path, monkeypatch):
    books = sorted(glob.glob(os.path.join(CORPUS, "gutenberg-*.txt")))
    shards_read = []
    monkeypatch.setattr(pipeline, "_run_pool", lambda run, *args: shards_read.append(run.shards))
    monkeypatch.setattr(resource, "getrlimit", lambda which: (100, 150))
    with pytest.raises(pdata.PretrainingDataError) as raised:
        create(books, [str(tmp_path / "out.tfrecord")], shard_size_mb=0.001)
    message, count = str(raised.value), len(shards.plan_shards(books, 0.001))
    assert f"reads all {count} shards at once" in message and "allows 150 open files (ulimit -Hn)" in message
    suggested = float(re.search(r"raise --shard_size_mb to ([0-9.e-]+), turn it off", message).group(1))
    open_now = len(os.listdir("/proc/self/fd"))
    room = 150 - 64 - open_now  # the hard limit less the spare files and those open now
    assert len(shards.plan_shards(books, suggested)) <= room + 2 < len(shards.plan_shards(books, suggested / 2))
    monkeypatch.setattr(resource, "getrlimit", lambda which: (50, open_now + 64 + 5))  # room for fewer than the files
    with pytest.raises(pdata.PretrainingDataError, match=r"open files \(ulimit -Hn\): turn it off"):
        create(books, [str(tmp_path / "out.tfrecord")], shard_size_mb=0.001)
    assert shards_read == [] and os.listdir(tmp_path) == []
    create(books, [str(tmp_path / "out.tfrecord")], shard_size_mb=0.001, global_shuffle=False)  # no shuffle: no limit
    assert len(shards_read) == 0 and (tmp_path / "out.tfrecord").stat().st_size > 0


def test_a_killed_worker_ends_the_run_instead_of_hanging(tmp_path):
    """SIGKILL of one worker (out of memory, a user's kill): the run stops with one error and writes nothing; a
    `multiprocessing.Pool` would start another worker and wait for the lost shard forever."""
    def kill_a_worker(progress):
        if progress.shards_done == 1:
            import multiprocessing  # pylint: disable=import-outside-toplevel

            os.kill(multiprocessing.active_children()[0].pid, signal.SIGKILL)

    with pytest.raises(pdata.PretrainingDataError, match=r"a worker process died .* while writing .*out\.tfrecord"):
        create([os.path.join(CORPUS, f"gutenberg-{name}.txt") for name in ("austen-emma", "austen-persuasion")],
               [str(tmp_path / "out.tfrecord")], num_workers=2, progress=kill_a_worker, shard_size_mb=0.01)
    assert os.listdir(tmp_path) == []


def test_existing_outputs_are_replaced_only_with_overwrite(tmp_path):
    """As the Beam runner: a rerun does not replace the shards silently; --overwrite does; and shards of a run
    with another --num_output_shards are refused either way (a training glob would read them all)."""
    out = tmp_path / "records"
    assert script(f"--input_file={SAMPLE}", f"--output_dir={out}", "--num_output_shards=3").returncode == 0
    before = tree_snapshot(out)
    again = script(f"--input_file={SAMPLE}", f"--output_dir={out}", "--num_output_shards=3", "--random_seed=2")
    assert_one_line_error(again, "--output_dir", "pretraining-00000-of-00003.tfrecord", "exists already",
                          "--overwrite", status=1)
    assert tree_snapshot(out) == before
    fewer = script(f"--input_file={SAMPLE}", f"--output_dir={out}", "--num_output_shards=2", "--overwrite")
    assert_one_line_error(fewer, "--output_dir", "3 file(s) of another run", "pretraining-00000-of-00003", status=1)
    assert tree_snapshot(out) == before
    replaced = script(f"--input_file={SAMPLE}", f"--output_dir={out}", "--num_output_shards=3", "--random_seed=2",
                      "--overwrite")
    assert replaced.returncode == 0 and sorted(os.listdir(out)) == [
        *(f"pretraining-0000{i}-of-00003.tfrecord" for i in range(3)), "settings.json"]
    assert json.loads((out / "settings.json").read_text())["settings"]["random_seed"] == 2  # the record replaced too
    assert tree_snapshot(out) != before
    single = tmp_path / "one.tfrecord"
    single.write_bytes(b"mine")
    refused = script(f"--input_file={SAMPLE}", f"--output_file={single}")
    assert_one_line_error(refused, "--output_file", str(single), "exists already", status=1)
    assert single.read_bytes() == b"mine"


def test_write_error_names_the_output(tmp_path, monkeypatch):
    """An OS error while writing an output becomes one `AlbertError` naming it (given `output_what`), and the
    temporaries go."""
    def full(self, record):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tfrecord_writer.LocalRecordWriter, "write", full)
    out = tmp_path / "out" / "x.tfrecord"
    with pytest.raises(fileio.OutputError, match=f"--output_file {out}: No space left on device"):
        create(SAMPLE, [str(out)], output_what="--output_file")
    assert os.listdir(tmp_path) == []
    # The shards' temporary files of the global shuffle: the OS's reason, said to be theirs, once.
    with pytest.raises(fileio.OutputError) as raised:  # named as the first output
        create(BOOK, [str(out), str(tmp_path / "other" / "y.tfrecord")], output_what="--output_file",
               shard_size_mb=0.01)
    assert str(raised.value) == (f"cannot write --output_file {out}: No space left on device (writing the worker "
                                 "processes' temporary files)")
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------------------------------------------------------
# Outputs and inputs of the wrong kind


def test_output_file_is_a_directory(tmp_path):
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "mine.txt").write_text("mine")
    before = tree_snapshot(tmp_path)
    result = script(f"--input_file={SAMPLE}", f"--output_file={tmp_path}/records", "--num_workers=1")
    assert_one_line_error(result, "--output_file", f"{tmp_path}/records", "directory")
    assert tree_snapshot(tmp_path) == before


def test_output_dir_is_a_file(tmp_path):
    (tmp_path / "records").write_text("mine")
    before = tree_snapshot(tmp_path)
    result = script(f"--input_file={SAMPLE}", f"--output_dir={tmp_path}/records", "--num_workers=1")
    assert_one_line_error(result, "--output_dir", f"{tmp_path}/records")
    assert tree_snapshot(tmp_path) == before


def test_input_is_a_directory(tmp_path, corpus):
    before = tree_snapshot(tmp_path)
    result = script(f"--input_file={corpus}", f"--output_file={tmp_path}/out/x.tfrecord", "--num_workers=1")
    assert_one_line_error(result, "--input_file", str(corpus), "directory")
    assert tree_snapshot(tmp_path) == before


def test_input_without_documents(tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("Hi\n\nYo\n", encoding="utf-8")
    before = tree_snapshot(tmp_path)
    result = script(f"--input_file={short}", f"--output_file={tmp_path}/out/x.tfrecord", "--num_workers=1")
    assert_one_line_error(result, "short.txt", "no training instances")
    assert tree_snapshot(tmp_path) == before


@pytest.mark.parametrize("kind", ["binary", "empty", "unreadable", "directory"])
def test_bad_inputs_in_process(tmp_path, monkeypatch, kind):
    bad = tmp_path / "bad.txt"
    if kind == "binary":
        bad.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8)
    elif kind == "empty":
        bad.write_bytes(b"")
    elif kind == "unreadable":  # root reads a mode-000 file, so the OS refusal is simulated
        bad.write_text("Some text.\nMore text.\n")
        real_open = shards._open_binary  # pylint: disable=protected-access

        def refuse(path):
            if path == str(bad):
                raise PermissionError(13, "Permission denied", path)
            return real_open(path)

        monkeypatch.setattr(shards, "_open_binary", refuse)
    else:
        bad.mkdir()
    before = tree_snapshot(tmp_path)
    with pytest.raises(AlbertError, match="bad.txt"):
        create(str(bad), [str(tmp_path / "out" / "x.tfrecord")])
    assert tree_snapshot(tmp_path) == before
