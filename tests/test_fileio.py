"""`albert_tf.fileio`: outputs appear complete or not at all and never inside the user's directory while being
written; one process per directory, a killed holder's lock taken over; only this program's temporaries removed."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import tensorflow as tf

from albert_tf import fileio
from albert_tf.errors import RunError
from tests.helpers import subprocess_env


def test_atomic_write_publishes_complete_files_only(tmp_path):
    out = tmp_path / "out"
    path = str(out / "results.txt")
    with fileio.atomic_write(path) as f:
        f.write("half")
        # while it is written, nothing is in the directory a user globs
        assert tf.io.gfile.glob(str(out / "*")) == []
    assert open(path).read() == "half"
    with pytest.raises(ZeroDivisionError):
        with fileio.atomic_write(path) as f:
            f.write("never")
            raise ZeroDivisionError
    assert open(path).read() == "half"  # the old file is intact
    assert os.listdir(out) == ["results.txt"]
    assert not os.path.exists(fileio.sidecar_dir(str(out)))  # no temporary left anywhere


def test_write_results_and_json(tmp_path):
    path = fileio.write_results(str(tmp_path / "eval_results.txt"), {"b": 2.5, "a": 1})
    assert open(path).read() == "a = 1\nb = 2.5\n"
    fileio.write_json(str(tmp_path / "x.json"), {"z": 1, "a": [1, 2]})
    assert open(tmp_path / "x.json").read().startswith('{\n  "a": [')


def test_unwritable_output_names_the_output_not_a_temporary(tmp_path):
    locked = tmp_path / "readonly"
    locked.mkdir()
    os.chmod(locked, 0o500)
    sidecar = tmp_path / ".readonly.albert_tf"
    os.chmod(tmp_path, 0o500)
    try:
        if os.access(str(tmp_path), os.W_OK):
            pytest.skip("running as a user who can write read-only directories")
        with pytest.raises(fileio.OutputError, match=r"cannot write --output_file .*readonly/x.txt: Permission denied"):
            fileio.write_text(str(locked / "x.txt"), "x", what=f"--output_file {locked / 'x.txt'}")
    finally:
        os.chmod(tmp_path, 0o700)
        os.chmod(locked, 0o700)
    assert not sidecar.exists() and os.listdir(locked) == []


def test_an_output_under_a_file_names_the_output(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a directory is needed")
    target = blocker / "out" / "x.txt"
    with pytest.raises(fileio.OutputError, match=rf"cannot write --output_file {target}: "):
        fileio.write_text(str(target), "x", what=f"--output_file {target}")
    assert blocker.read_text().startswith("a file")


HOLD = textwrap.dedent("""
    import sys, time
    from albert_tf import fileio
    with fileio.DirectoryLock(sys.argv[1], "--output_dir"):
        print("locked", flush=True)
        time.sleep(60)
""")


def _hold(directory):
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(directory)], stdout=subprocess.PIPE, text=True,
                               env=subprocess_env())
    assert process.stdout.readline().strip() == "locked"
    return process


def test_a_second_process_is_refused_and_a_killed_holders_lock_is_taken_over(tmp_path):
    out = tmp_path / "run"
    holder = _hold(out)
    try:
        with pytest.raises(RunError, match=rf"--output_dir {out} is in use by another run \(pid {holder.pid} "):
            fileio.DirectoryLock(str(out), "--output_dir").acquire()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with fileio.DirectoryLock(str(out), "--output_dir"):  # the kernel released the dead holder's lock
        with fileio.DirectoryLock(str(out), "--output_dir"):  # re-entrant within a process
            pass
    start = time.time()
    holder = _hold(out)
    holder.kill()
    holder.wait()
    with fileio.DirectoryLock(str(out)):
        assert time.time() - start < 60


def test_only_this_programs_temporaries_are_removed(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    for name in ("ckpt-4_temp", "ckpt-6_temp_0123abcd", "my_temp", "ckpt-4"):
        (out / name).mkdir()
    (out / "ckpt-4.index").write_text("x")
    assert sorted(fileio.remove_stale_checkpoint_temps(str(out))) == ["ckpt-4_temp", "ckpt-6_temp_0123abcd"]
    assert sorted(os.listdir(out)) == ["ckpt-4", "ckpt-4.index", "my_temp"]
    # partial files of a dead process are removed; a live one's are kept
    sidecar = fileio.sidecar_dir(str(out))
    os.makedirs(sidecar)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    for pid in (int(dead.stdout), os.getpid()):
        open(os.path.join(sidecar, f".x.tfrecord.partial-{pid}-0123abcd"), "w").close()
    assert fileio.remove_stale_partials(str(out)) == [f".x.tfrecord.partial-{int(dead.stdout)}-0123abcd"]
    assert os.listdir(sidecar) == [f".x.tfrecord.partial-{os.getpid()}-0123abcd"]
