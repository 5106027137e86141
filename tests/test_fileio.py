"""`albert_tf.fileio`: outputs appear complete or not at all and never inside the user's directory while being
written; one process per directory, a killed holder's lock taken over; only this program's temporaries removed."""

import glob
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import tensorflow as tf

from albert_tf import fileio
from albert_tf.errors import DataError, MissingDataError, RunError
from tests.helpers import leftovers, subprocess_env, tmpfs


def test_atomic_write_publishes_complete_files_only(tmp_path):
    out = tmp_path / "out"
    path = str(out / "results.txt")
    with fileio.atomic_write(path) as f:
        f.write("half")
        # while it is written, nothing is in the directory a user globs: the staging folder is hidden
        assert glob.glob(str(out / "*")) == [] and tf.io.gfile.glob(str(out / "*.txt")) == []
    assert open(path).read() == "half"
    with pytest.raises(ZeroDivisionError):
        with fileio.atomic_write(path) as f:
            f.write("never")
            raise ZeroDivisionError
    assert open(path).read() == "half"  # the old file is intact
    assert os.listdir(out) == ["results.txt"]
    assert not os.path.exists(fileio.sidecar_dir(str(out)))  # no temporary left anywhere


def test_atomic_prefix_moves_the_index_last_and_leaves_nothing_on_failure(tmp_path, monkeypatch):
    """A TF checkpoint written through `atomic_prefix` appears at its prefix with its data files first and the
    `.index` last (a reader polling for the index never finds it without its data); a failed write leaves no file."""
    renames = []
    rename = fileio._LocalFiles.rename  # pylint: disable=protected-access

    def recorded(source, target, overwrite=False):
        renames.append(os.path.basename(target))
        return rename(source, target, overwrite)

    monkeypatch.setattr(fileio._LocalFiles, "rename", staticmethod(recorded))  # pylint: disable=protected-access
    prefix = str(tmp_path / "out" / "model.ckpt-7")
    names = ["index", "data-00000-of-00002", "data-00001-of-00002"]
    with fileio.atomic_prefix(prefix) as staged:
        assert not staged.startswith(prefix) and os.path.dirname(prefix) in staged
        for name in names:
            with open(f"{staged}.{name}", "w") as f:
                f.write(name)
        assert glob.glob(prefix + "*") == []
    assert sorted(renames[:-1]) == ["model.ckpt-7.data-00000-of-00002", "model.ckpt-7.data-00001-of-00002"]
    assert renames[-1] == "model.ckpt-7.index"
    assert {name: open(f"{prefix}.{name}").read() for name in names} == {name: name for name in names}
    assert sorted(os.listdir(tmp_path / "out")) == sorted(f"model.ckpt-7.{name}" for name in names)
    with fileio.atomic_prefix(prefix) as staged:  # written again: the old files are replaced
        for name in names:
            with open(f"{staged}.{name}", "w") as f:
                f.write(name + " again")
    assert {name: open(f"{prefix}.{name}").read() for name in names} == {name: name + " again" for name in names}
    with pytest.raises(ZeroDivisionError):
        with fileio.atomic_prefix(str(tmp_path / "out" / "other")) as staged:
            with open(staged + ".index", "w") as f:
                f.write("x")
            raise ZeroDivisionError
    assert len(os.listdir(tmp_path / "out")) == 3 and not leftovers(tmp_path)


def test_write_results_and_json(tmp_path):
    path = fileio.write_results(str(tmp_path / "eval_results.txt"), {"b": 2.5, "a": 1})
    assert open(path).read() == "a = 1\nb = 2.5\n"
    fileio.write_json(str(tmp_path / "x.json"), {"z": 1, "a": [1, 2]})
    assert open(tmp_path / "x.json").read().startswith('{\n  "a": [')


def test_unwritable_output_names_the_output_not_a_temporary(tmp_path):
    with tmpfs(tmp_path / "readonly", read_only=True) as locked:  # root cannot write it either
        target = os.path.join(locked, "x.txt")
        with pytest.raises(fileio.OutputError, match=rf"cannot write --output_file {target}: Read-only file system"):
            fileio.write_text(target, "x", what=f"--output_file {target}")
        assert os.listdir(locked) == []


def test_a_full_disk_names_the_output_and_leaves_nothing(tmp_path):
    with tmpfs(tmp_path / "small", size="64k") as small:
        target = os.path.join(small, "x.bin")
        fileio.write_text(os.path.join(small, "keep.txt"), "kept")
        with pytest.raises(fileio.OutputError, match=rf"cannot write --output_file {target}: No space left"):
            with fileio.atomic_write(target, "wb", what=f"--output_file {target}") as f:
                f.write(b"x" * (1 << 20))
        assert os.listdir(small) == ["keep.txt"] and open(os.path.join(small, "keep.txt")).read() == "kept"


def test_outputs_on_a_mount_point_of_their_own(tmp_path):
    """The output folder is a filesystem of its own (a Docker volume): files and directories are staged in it
    and renamed into place, its lock lives in it, and nothing is written beside it."""
    with tmpfs(tmp_path / "volume") as volume:
        fileio.write_text(os.path.join(volume, "results.txt"), "r")
        with fileio.DirectoryLock(volume, "--output_dir"):
            with fileio.atomic_path(os.path.join(volume, "export"), directory=True) as tmp:
                open(os.path.join(tmp, "saved_model.pb"), "w").close()
        # the volume itself replaced as a directory output (an export with --overwrite) once its files are ours
        fileio.write_manifest(volume)
        with fileio.atomic_path(volume, directory=True, replace_directory_ok=True) as tmp:
            open(os.path.join(tmp, "new.pb"), "w").close()
        assert fileio.foreign_files(volume) == [] and sorted(os.listdir(volume)) == [".albert_tf", "new.pb"]
        with fileio.atomic_path(os.path.join(volume, "sub"), directory=True) as tmp:
            pass
        assert sorted(os.listdir(volume)) == [".albert_tf", "new.pb", "sub"]
    assert sorted(os.listdir(tmp_path)) == ["volume"] and leftovers(tmp_path) == []


def test_outputs_in_a_folder_whose_parent_is_read_only(tmp_path):
    """Only the output folder needs to be writable, not its parent: files, locks and a replaced directory."""
    with tmpfs(tmp_path / "ro") as parent:
        os.mkdir(os.path.join(parent, "out"))
        with tmpfs(os.path.join(parent, "out")) as out:
            subprocess.run(["mount", "-o", "remount,ro", parent], check=True)
            with fileio.DirectoryLock(out, "--output_dir"):
                fileio.write_text(os.path.join(out, "a.txt"), "a")
            os.mkdir(os.path.join(out, "old"))
            fileio.write_manifest(out)
            with fileio.atomic_path(out, directory=True, replace_directory_ok=True) as tmp:
                open(os.path.join(tmp, "b.txt"), "w").close()
            assert sorted(os.listdir(out)) == [".albert_tf", "b.txt"] and fileio.foreign_files(out) == []


@pytest.mark.parametrize("in_place", [False, True], ids=["renamed", "replaced_in_place"])
def test_overwrite_replaces_only_what_albert_tf_wrote(tmp_path, monkeypatch, in_place):
    """A directory written whole carries the manifest of its files; replacing it is refused, with nothing
    touched, once anything else is inside (a user's note, an extra checkpoint), and allowed again without it."""
    if in_place:  # as for a mount point or a folder in a read-only parent
        monkeypatch.setattr(fileio, "_replace_in_place", lambda path: True)
    export = str(tmp_path / "export")
    with fileio.atomic_path(export, "--export_dir", directory=True) as tmp:
        os.makedirs(os.path.join(tmp, "variables"))
        for name in ("saved_model.pb", "variables/variables.index"):
            (tmp_path / tmp / name).write_text("model")
        os.mkdir(os.path.join(tmp, "assets"))
    assert fileio.foreign_files(export) == []
    for extra in ("assets/NOTE.txt", "variables/copied.ckpt.index", "README"):
        (tmp_path / "export" / extra).write_text("mine")
        before = sorted(str(p) for p in (tmp_path / "export").rglob("*"))
        with pytest.raises(fileio.OutputError, match=rf"cannot replace --export_dir: .*\({re.escape(extra)}\)"):
            with fileio.atomic_path(export, "--export_dir", directory=True, replace_directory_ok=True):
                pytest.fail("no work may start")
        assert sorted(str(p) for p in (tmp_path / "export").rglob("*")) == before
        assert (tmp_path / "export" / extra).read_text() == "mine"
        os.remove(tmp_path / "export" / extra)
    with fileio.atomic_path(export, "--export_dir", directory=True, replace_directory_ok=True) as tmp:
        (tmp_path / tmp / "new.pb").write_text("new")
    assert sorted(os.listdir(export)) == [".albert_tf", "new.pb"] and fileio.foreign_files(export) == []
    assert leftovers(tmp_path) == []


def test_a_folder_output_over_a_non_empty_folder_needs_replace_directory_ok(tmp_path):
    with fileio.atomic_path(str(tmp_path / "export"), directory=True) as tmp:
        (tmp_path / tmp / "a.pb").write_text("a")
    with pytest.raises(fileio.OutputError, match="cannot write .*export: it exists already"):
        with fileio.atomic_path(str(tmp_path / "export"), directory=True):
            pytest.fail("no work may start")
    assert (tmp_path / "export" / "a.pb").read_text() == "a"


def test_a_folder_without_a_manifest_is_never_replaced(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "thesis.tex").write_text("mine")
    with pytest.raises(fileio.OutputError, match=r"did not write there \(thesis.tex\)"):
        with fileio.atomic_path(str(tmp_path / "run"), "--output_path", directory=True, replace_directory_ok=True):
            pytest.fail("no work may start")
    assert os.listdir(tmp_path / "run") == ["thesis.tex"]


def test_a_file_where_a_directory_output_goes_and_the_reverse(tmp_path):
    (tmp_path / "f").write_text("mine")
    (tmp_path / "d").mkdir()
    with pytest.raises(fileio.OutputError, match=r"cannot write --export_dir .*/f: it is a file"):
        with fileio.atomic_path(str(tmp_path / "f"), "--export_dir " + str(tmp_path / "f"), directory=True):
            pytest.fail("no work may start")
    with pytest.raises(fileio.OutputError, match=r"cannot write --output_file .*/d: it is a directory"):
        fileio.write_text(str(tmp_path / "d"), "x", what="--output_file " + str(tmp_path / "d"))
    with pytest.raises(fileio.OutputError, match=r"--output_dir .*/f is a file, not a directory"):
        fileio.DirectoryLock(str(tmp_path / "f"), "--output_dir").acquire()
    assert (tmp_path / "f").read_text() == "mine" and os.listdir(tmp_path / "d") == []
    assert leftovers(tmp_path) == []


def test_a_lock_leaves_no_directory_it_created_for_nothing(tmp_path):
    with fileio.DirectoryLock(str(tmp_path / "new"), "--output_dir"):
        assert os.path.isdir(tmp_path / "new")
    assert not os.path.exists(tmp_path / "new")
    with fileio.DirectoryLock(str(tmp_path / "used"), "--output_dir"):
        fileio.write_text(str(tmp_path / "used" / "x.txt"), "x")
    assert os.listdir(tmp_path / "used") == ["x.txt"]


def test_nested_atomic_writes_are_published_by_the_outer_one(tmp_path):
    target = str(tmp_path / "export")
    with fileio.atomic_path(target, directory=True) as tmp:
        fileio.write_text(os.path.join(tmp, "inner", "a.txt"), "a")
        assert os.path.exists(os.path.join(tmp, "inner", "a.txt")) and not os.path.exists(target)
        with fileio.atomic_path(os.path.join(tmp, "assets", "vocab"), directory=True) as folder:
            assert folder == os.path.join(tmp, "assets", "vocab") and os.path.isdir(folder)  # made, not staged
            fileio.write_text(os.path.join(folder, "v.txt"), "v")
    assert open(os.path.join(target, "inner", "a.txt")).read() == "a"
    assert open(os.path.join(target, "assets", "vocab", "v.txt")).read() == "v"
    assert set(os.listdir(target)) - {".albert_tf"} == {"assets", "inner"}  # (.albert_tf: the folder's manifest)


def test_inputs_are_never_outputs(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("text")
    os.link(corpus, tmp_path / "hard.txt")
    os.symlink(corpus, tmp_path / "soft.txt")
    for spelled in (str(corpus), str(tmp_path / "." / "c.txt"), str(tmp_path / "hard.txt"),
                    str(tmp_path / "soft.txt")):
        with pytest.raises(fileio.UsageError, match=rf"--output_file {spelled} would overwrite the input "
                                                    rf"--input_file {corpus}"):
            fileio.refuse_inputs_as_outputs([("--output_file", spelled)], [("--input_file", str(corpus))])
    with pytest.raises(fileio.UsageError, match="--export_dir"):
        fileio.refuse_inputs_as_outputs([("--export_dir", str(tmp_path), True)], [("--init_checkpoint", str(corpus))])
    fileio.refuse_inputs_as_outputs([("--output_file", str(tmp_path / "out.txt"))], [("--input_file", str(corpus))])
    fileio.refuse_inputs_as_outputs([("--export_dir", str(tmp_path / "e"), True)], [("--input_file", str(corpus))])


def test_an_output_under_a_file_names_the_output(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a directory is needed")
    target = blocker / "out" / "x.txt"
    with pytest.raises(fileio.OutputError, match=rf"cannot write --output_file {target}: "):
        fileio.write_text(str(target), "x", what=f"--output_file {target}")
    # Without `what`, the path itself is named; a checkpoint prefix likewise.
    with pytest.raises(fileio.OutputError, match=rf"cannot write {target}: "):
        fileio.write_text(str(target), "x")
    with pytest.raises(fileio.OutputError, match=rf"cannot write {blocker}/out/ckpt: "):
        with fileio.atomic_prefix(str(blocker / "out" / "ckpt")):
            pytest.fail("no staging folder under a file")
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


def test_outputs_make_their_own_folders_and_nothing_in_the_working_directory(tmp_path, monkeypatch):
    """A file or checkpoint written into folders that do not exist yet creates them where it is written, and
    nothing in the current directory (a folder named like the output's parent or file there would be a stray)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    with fileio.atomic_write(str(tmp_path / "out" / "a" / "results.txt")) as f:
        f.write("x")
    with fileio.atomic_prefix(str(tmp_path / "out" / "b" / "model.ckpt")) as staged:
        for suffix in (".index", ".data-00000-of-00001"):
            with open(staged + suffix, "w", encoding="utf-8") as f:
                f.write(suffix)
    assert os.listdir(cwd) == []
    assert (tmp_path / "out" / "a" / "results.txt").read_text() == "x"
    assert sorted(os.listdir(tmp_path / "out" / "b")) == ["model.ckpt.data-00000-of-00001", "model.ckpt.index"]


def test_a_file_that_exists_is_replaced_by_one_rename_not_as_a_folder(tmp_path, monkeypatch):
    """Replacing an existing file is one rename over it (never a moment without the file); only a folder goes
    through `replace_directory`."""
    path = tmp_path / "eval_results.txt"
    path.write_text("old")
    replaced = []
    monkeypatch.setattr(fileio, "replace_directory", lambda *a: replaced.append(a))
    fileio.write_text(str(path), "new")
    assert path.read_text() == "new" and replaced == []


def test_no_write_replaces_a_protected_input(tmp_path):
    records = tmp_path / "eval_results.txt"
    records.write_text("the user's file")
    with fileio.inputs_protected([("--input_file", str(records))]):
        with pytest.raises(fileio.UsageError, match=rf"{records} would overwrite the input --input_file {records}"):
            fileio.write_results(str(tmp_path / "." / "eval_results.txt"), {"a": 1})
        with pytest.raises(fileio.UsageError, match="would overwrite the input"):
            with fileio.atomic_path(str(tmp_path), directory=True, replace_directory_ok=True):
                pytest.fail("no work may start")
        fileio.write_text(str(tmp_path / "other.txt"), "x")
        # A checkpoint whose .index would be the input: refused before its block runs.
        index = tmp_path / "model.ckpt.index"
        with fileio.inputs_protected([("--init_checkpoint", str(index))]):
            with pytest.raises(fileio.UsageError, match=rf"would overwrite the input --init_checkpoint "
                                                        rf"{re.escape(str(index))}; write the output elsewhere$"):
                with fileio.atomic_prefix(str(tmp_path / "model.ckpt")):
                    pytest.fail("no work may start")
    assert records.read_text() == "the user's file"
    fileio.write_results(str(records), {"a": 1})  # outside the block nothing is protected


def test_one_glob_rule_for_every_input_flag(tmp_path, monkeypatch, caplog):
    for name in ("b.txt", "a.txt", "c.gz", ".hidden.txt"):
        (tmp_path / name).write_text("x")
    (tmp_path / "sub.txt").mkdir()  # a directory a glob matches is skipped
    a, b, c = (str(tmp_path / n) for n in ("a.txt", "b.txt", "c.gz"))
    given = f"{tmp_path}/*.gz, ,{tmp_path}/*.txt,{a}"
    # "given": pattern by pattern, each sorted, each file once (where it first appears); "sorted": one sorted list
    assert fileio.expand_globs(given) == [c, a, b]
    assert fileio.expand_globs(given, order="sorted") == [a, b, c]
    assert fileio.expand_globs([b, a, b]) == [b, a] and fileio.expand_globs(f"{b},{a}".encode()) == [b, a]
    assert fileio.expand_globs(f"{tmp_path}/.h*") == [str(tmp_path / ".hidden.txt")]  # asked for by name only
    monkeypatch.setenv("HOME", str(tmp_path))
    assert fileio.expand_globs("~/a.txt") == [a]
    with caplog.at_level("WARNING", logger="albert_tf.fileio"):
        assert fileio.expand_globs(f"{tmp_path}/none-*,{a}", what="--train_file") == [a]
    assert f"--train_file pattern '{tmp_path}/none-*' matched no files" in caplog.text
    with pytest.raises(MissingDataError, match=rf"^no input files matched '{tmp_path}/none-\*,{tmp_path}/x'$"):
        fileio.expand_globs(f"{tmp_path}/none-*, {tmp_path}/x")
    with pytest.raises(MissingDataError, match=r"^no record files matched '\(empty --eval_input_file\)'$"):
        fileio.expand_globs(" , ", what="--eval_input_file", kind="record files")
    with pytest.raises(DataError, match=rf"^--input_file {tmp_path} is a directory; give files, or a glob "):
        fileio.expand_globs(str(tmp_path))

    class OwnError(DataError):
        pass

    with pytest.raises(OwnError, match="no input files matched"):
        fileio.expand_globs(f"{tmp_path}/none", error=OwnError)
    with pytest.raises(ValueError, match="order"):
        fileio.expand_globs(a, order="shuffled")


def test_a_glob_never_reads_a_runs_settings_record(tmp_path):
    """Records, text and shards are read by a glob over their folder, where the run that wrote them left its
    settings record: a wildcard skips it (local and remote), naming it reads it."""
    for name in ("part-1.txt", "settings.json", "corpus.txt.settings.json", "notes.json"):
        (tmp_path / name).write_text("x")
    assert fileio.expand_globs(f"{tmp_path}/*") == [str(tmp_path / "notes.json"), str(tmp_path / "part-1.txt")]
    with pytest.raises(MissingDataError, match="no input files matched"):
        fileio.expand_globs(f"{tmp_path}/corpus*")  # only a record matches: nothing to read
    named = str(tmp_path / "settings.json")
    assert fileio.expand_globs(named) == [named]
    for name in ("part-1.txt", "settings.json", "v.settings.json"):
        with tf.io.gfile.GFile(f"ram://records/{name}", "w") as f:
            f.write("x")
    assert fileio.expand_globs("ram://records/*") == ["ram://records/part-1.txt"]


def test_remote_globs_go_through_gfile():
    for name in ("b", "a"):
        with tf.io.gfile.GFile(f"ram://globs/{name}.txt", "w") as f:
            f.write("x")
    assert fileio.expand_globs("ram://globs/b.txt,ram://globs/*.txt") == ["ram://globs/b.txt", "ram://globs/a.txt"]
    assert fileio.expand_globs("ram://globs/b.txt,ram://globs/*.txt", order="sorted") == [
        "ram://globs/a.txt", "ram://globs/b.txt"]
