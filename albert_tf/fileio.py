"""Writing outputs safely: atomic files and directories, fingerprints, and one run per directory.

Three rules every script follows through this module:

* An output appears complete or not at all. It is written under a temporary name in the hidden staging folder
  `.albert_tf/` *inside the folder it is written to*, then renamed into place. Staging and output are thus on one
  filesystem, so the rename works when the output folder is a mount point of its own (a Docker volume, a mounted
  disk); a killed run leaves nothing that a glob of the outputs (`dir/*.tfrecord`, `dir/ckpt-*`) picks up. A
  directory that already exists and is replaced (an export with `--overwrite`) is replaced through its own
  staging folder when it is a mount point or its parent cannot be written.
* A directory belongs to one run at a time (`DirectoryLock`): a second process is refused at once, naming the
  directory and the holder's pid; the lock is an OS file lock on `<directory>/.albert_tf/lock`, released by the
  kernel when its holder dies, so a lock left by a killed run is taken over safely (the file is removed when a
  run ends, and a directory the lock had to create is removed again if the run left it empty).
* Nothing a user owns is deleted or replaced: only this module's own temporaries (and TF's `ckpt-N_temp`
  directories, see `remove_stale_checkpoint_temps`) are ever removed, and `refuse_inputs_as_outputs` stops a run
  whose output is one of its inputs before anything is written. A directory written whole carries a manifest of
  its files (`.albert_tf/manifest.json` inside it); replacing it (`--overwrite`) is refused when anything is
  found there that the manifest does not list, so a file a user put inside an export is never deleted.

Local paths and remote ones (`gs://...`, through `tf.io.gfile`) both work; locks are local-only. Input flags
that take comma-separated globs are expanded by one rule, `expand_globs`.
"""

import contextlib
import errno
import fcntl
import glob
import hashlib
import json
import logging
import os
import posixpath
import re
import shutil
import socket
import sys
import uuid

from albert_tf.errors import AlbertError, DataError, MissingDataError, RunError, UsageError

logger = logging.getLogger(__name__)

STAGING_NAME = ".albert_tf"
_STAGED = re.compile(r"^\.(?P<name>.+)\.partial-(?P<pid>\d+)-[0-9a-z_]{8}$")


class OutputError(AlbertError):
    """An output cannot be written (read-only or full disk, a file where a directory must be)."""


def _tf():
    """TensorFlow, imported on first use, and only for a remote path: local files need no TF at all."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf


class _LocalFiles:
    """The part of `tf.io.gfile` this module uses, for local paths, on `os` (no TensorFlow import)."""

    exists = staticmethod(os.path.exists)
    isdir = staticmethod(os.path.isdir)
    listdir = staticmethod(os.listdir)
    remove = staticmethod(os.remove)
    rmtree = staticmethod(shutil.rmtree)

    @staticmethod
    def makedirs(path):
        os.makedirs(path, exist_ok=True)

    @staticmethod
    def rename(source, target, overwrite=False):
        if not overwrite and os.path.exists(target):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), target)
        os.replace(source, target)

    @staticmethod
    def copy(source, target, overwrite=False):
        if not overwrite and os.path.exists(target):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), target)
        shutil.copyfile(source, target)

    @staticmethod
    def GFile(path, mode="r"):  # pylint: disable=invalid-name  (gfile's name)
        return open(path, mode, encoding=None if "b" in mode else "utf-8")  # pylint: disable=consider-using-with


def _fs(path):
    """`tf.io.gfile` for a remote path, `os` for a local one."""
    return _tf().io.gfile if is_remote(path) else _LocalFiles


def _io_errors():
    """The errors a file operation raises: OS errors, and TensorFlow's once it is loaded (only then can one be
    raised here)."""
    tf = sys.modules.get("tensorflow")
    return (OSError, tf.errors.OpError) if tf is not None and hasattr(tf, "errors") else (OSError,)


def is_remote(path):
    return "://" in str(path)


def exists(path):
    """Whether `path` (local or remote) exists."""
    return _fs(path).exists(path)


def read_text(path):
    """The text of the file `path` (local or remote), read as UTF-8."""
    with _fs(path).GFile(path, "r") as f:
        return f.read()


def isdir(path):
    """Whether `path` (local or remote) is a directory."""
    return _fs(path).isdir(path)


def listdir(path):
    """The names in the directory `path` (local or remote)."""
    return [name.rstrip("/") for name in _fs(path).listdir(path)]


GLOB_ORDERS = ("given", "sorted")

# A run's settings record (`albert_tf.settings_record`): `settings.json` in a folder, `<output>.settings.json` beside
# a file. An input glob skips them, so that records and text read by a glob over a folder never include one.
SETTINGS_RECORD = "settings.json"
SETTINGS_RECORD_SUFFIX = ".settings.json"


def is_settings_record(path):
    """Whether `path` is named as a run's settings record."""
    name = posixpath.basename(str(path).rstrip("/"))
    return name == SETTINGS_RECORD or name.endswith(SETTINGS_RECORD_SUFFIX)


def expand_globs(patterns, what="--input_file", order="given", kind="input files", error=None):
    """The files that glob patterns match: the one glob rule of every input flag.

    `patterns` is a comma-separated str (or UTF-8 bytes) or a list of patterns; blank ones are ignored. A remote
    pattern (gs://, s3://, hdfs://) is expanded by `tf.io.gfile.glob`; a local one after `~` expansion by Python's
    `glob`, keeping files only (a glob's directories are skipped; `*` does not match names that start with ".", so
    the hidden staging folders are never read), and a wildcard never matches a run's settings record (named, it is
    read). A local pattern without wildcards that names a directory is an
    error naming `what` (the flag; None where the caller names it). A pattern that matches nothing is a warning;
    every file is listed once.

    `order` is part of what a tool writes, and the tools differ on purpose:
      "given": pattern by pattern, in the order given, each pattern's matches sorted (as the original's tools
        extend their list pattern by pattern). `create_pretraining_data.py` seeds its records by a file's position
        in this list, and `prepare_corpus.py` and `create_vocab.py` read in it, so their outputs follow the order
        the user wrote.
      "sorted": one sorted list whatever the order of the patterns: `run_pretraining.py`'s record files, whose
        index in the list keys the shuffle and online masking, so "a,b" and "b,a" are the same run.

    Raises:
      `error` (default `MissingDataError`) when nothing matches at all, the message "no <kind> matched
      '<patterns>'"; `error` (default `DataError`) for a directory.
    """
    if order not in GLOB_ORDERS:
        raise ValueError(f"order must be one of {GLOB_ORDERS}, got {order!r}")
    if isinstance(patterns, bytes):
        patterns = patterns.decode("utf-8")
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    patterns = [p.strip() for p in patterns if p and p.strip()]
    files, seen = [], set()
    for pattern in patterns:
        if is_remote(pattern):
            matches = sorted(_tf().io.gfile.glob(pattern))
        else:
            path = os.path.expanduser(pattern)
            if not glob.has_magic(pattern) and os.path.isdir(path):
                raise (error or DataError)(f"{what + ' ' if what else ''}{pattern} is a directory; give files, or "
                                           f"a glob such as {os.path.join(pattern, '*')}")
            matches = sorted(p for p in glob.glob(path) if os.path.isfile(p))
        if glob.has_magic(pattern):
            matches = [m for m in matches if not is_settings_record(m)]
        if not matches:
            logger.warning("%s pattern %r matched no files", what or "input", pattern)
        for match in matches:
            if match not in seen:
                seen.add(match)
                files.append(match)
    if not files:
        given = ",".join(patterns) or f"(empty {what or 'pattern'})"
        raise (error or MissingDataError)(f"no {kind} matched {given!r}")
    return sorted(files) if order == "sorted" else files


def _makedirs(path):
    _fs(path).makedirs(path)


def _split(path):
    path = str(path)
    if is_remote(path):
        return posixpath.split(path.rstrip("/"))
    return os.path.split(os.path.abspath(path))


def sidecar_dir(directory):
    """The hidden staging folder inside `directory`: its lock and the partial outputs written into it."""
    directory = str(directory)
    if is_remote(directory):
        return f"{directory.rstrip('/')}/{STAGING_NAME}"
    return os.path.join(os.path.abspath(directory), STAGING_NAME)


def _staging_name(path, inside=False):
    """A fresh temporary name for `path`, in the staging folder of its directory (with `inside`, of `path`
    itself: for a directory replaced where it stands)."""
    parent, name = (str(path), "new") if inside else _split(path)
    sidecar = sidecar_dir(parent)
    _makedirs(sidecar)
    join = posixpath.join if is_remote(path) else os.path.join
    return join(sidecar, f".{name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def staging_path(path, directory=False, inside=False):
    """A fresh temporary file (or, with `directory`, directory) for `path`, created empty in the staging folder
    of its directory (with `inside`, of the directory `path` itself). Another writer that just emptied the staging
    folder may remove it at any moment (see `_remove_empty_sidecar`): creation is retried until the temporary
    exists, which keeps the folder."""
    while True:
        tmp = _staging_name(path, inside)
        try:
            if is_remote(path):
                if directory:
                    _fs(tmp).makedirs(tmp)
                else:
                    with _fs(tmp).GFile(tmp, "w"):
                        pass
            elif directory:
                os.mkdir(tmp)
            else:
                os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            return tmp
        except FileNotFoundError:
            continue


def describe(err):
    """What went wrong, without the path (TensorFlow's file errors read `<path>; <reason>`): the caller names the
    output, never a temporary."""
    if isinstance(err, OSError):
        return err.strerror or str(err)
    text = getattr(err, "message", None) or str(err)
    head, sep, reason = text.partition("; ")
    return reason if sep and (head.startswith(("/", ".")) or "://" in head) else text


def _remove_quietly(path):
    try:
        if _fs(path).isdir(path):
            _fs(path).rmtree(path)
        elif _fs(path).exists(path):
            _fs(path).remove(path)
    except _io_errors():
        pass


def _remove_empty_sidecar(path):
    if not is_remote(path):
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(path))


_writing = set()  # temporaries this process is writing outputs into (`atomic_path`)


def _within_writing(path):
    """Whether `path` is inside a temporary of an `atomic_path` still open: that one publishes it, whole."""
    path = str(path) if is_remote(path) else os.path.abspath(path)
    return any(path == tmp or path.startswith(tmp.rstrip("/") + ("/" if is_remote(tmp) else os.sep))
               for tmp in _writing)


def _replace_in_place(path):
    """Whether the existing directory `path` must be replaced through its own staging folder: it is a mount
    point (renaming it is impossible), or its parent cannot be written."""
    return not is_remote(path) and (os.path.ismount(path) or not os.access(_split(path)[0], os.W_OK))


def _entries(directory):
    return [name.rstrip("/") for name in _fs(directory).listdir(directory) if name.rstrip("/") != STAGING_NAME]


MANIFEST = "manifest.json"


def _tree_files(directory):
    """The files under a local `directory` as sorted '/'-joined relative paths, its staging folder left out."""
    found = []
    for root, dirs, names in os.walk(directory):
        if root == directory:
            dirs[:] = [d for d in dirs if d != STAGING_NAME]
        relative = os.path.relpath(root, directory)
        found.extend(name if relative == "." else f"{relative}/{name}".replace(os.sep, "/") for name in names)
        found.extend(f"{d}/" if relative == "." else f"{relative}/{d}/".replace(os.sep, "/")
                     for d in dirs if not os.listdir(os.path.join(root, d)))
    return sorted(found)


def write_manifest(directory):
    """Records the files now in the local `directory` (written by this program) in its manifest."""
    if is_remote(directory):
        return
    os.makedirs(sidecar_dir(directory), exist_ok=True)
    with open(os.path.join(sidecar_dir(directory), MANIFEST), "w", encoding="utf-8") as f:
        json.dump({"files": _tree_files(directory)}, f, indent=1)


def foreign_files(directory):
    """The files in the local `directory` that its manifest does not list (all of them without a manifest): what
    replacing it would delete that this program did not write."""
    if is_remote(directory):
        return []
    try:
        with open(os.path.join(sidecar_dir(directory), MANIFEST), encoding="utf-8") as f:
            written = set(json.load(f)["files"])
    except (OSError, ValueError, KeyError, TypeError):
        written = set()
    return [name for name in _tree_files(directory) if name not in written]


def _check_target(path, what, directory, replace_directory_ok):
    """Refuses, before any work, a target of the wrong kind, a non-empty directory not to be replaced, or one to be
    replaced that holds files this program did not write."""
    if not _fs(path).exists(path):
        return
    if _fs(path).isdir(path) != directory:
        raise OutputError(f"cannot write {what}: it is {'a file' if directory else 'a directory'}")
    if directory and _entries(path):
        if not replace_directory_ok:
            raise OutputError(f"cannot write {what}: it exists already")
        foreign = foreign_files(path)
        if foreign:
            shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
            raise OutputError(f"cannot replace {what}: it holds files albert_tf did not write there ({shown}); "
                              "move them away or choose another directory")


@contextlib.contextmanager
def atomic_path(path, what=None, directory=False, replace_directory_ok=False):
    """Yields a temporary path (an empty file, or with `directory` an empty directory) to write `path` through;
    moves it into place when the block succeeds.

    A directory written there replaces an existing, non-empty `path` only with `replace_directory_ok`; an empty
    one (an empty mount point, say) is always filled. Inside another `atomic_path`'s temporary, `path` itself is
    yielded: the outer one publishes everything at once.

    On failure (or Ctrl-C / SIGTERM) the temporary is removed and `path` is left as it was. An OS error is
    re-raised as `OutputError` naming `path` (or `what`, e.g. "--output_file /x/y"), not the temporary.
    """
    what = what or path
    refuse_inputs_as_outputs([(what, path, directory)], _protected)
    try:
        _check_target(path, what, directory, replace_directory_ok)
        if _within_writing(path):
            if directory:
                _fs(path).makedirs(path)
            else:
                _makedirs(_split(path)[0])
            yield path
            return
        inside = directory and _fs(path).exists(path) and _replace_in_place(path)
        if not inside:
            _makedirs(_split(path)[0])
        tmp = staging_path(path, directory, inside)
    except _io_errors() as err:
        raise OutputError(f"cannot write {what}: {describe(err)}") from None
    _writing.add(tmp)
    try:
        yield tmp
        if directory:
            write_manifest(tmp)
        if directory and _fs(path).exists(path):
            (_move_entries if inside else replace_directory)(tmp, path)
        else:
            _fs(tmp).rename(tmp, path, overwrite=True)
    except _io_errors() as err:
        _remove_quietly(tmp)
        raise OutputError(f"cannot write {what}: {describe(err)}") from None
    except BaseException:
        _remove_quietly(tmp)
        raise
    finally:
        _writing.discard(tmp)
        _remove_empty_sidecar(tmp)


@contextlib.contextmanager
def atomic_prefix(prefix, what=None):
    """Yields a temporary prefix to write a TF checkpoint (`<prefix>.index`, `<prefix>.data-*`) through, in the
    staging folder of its directory; moves its files into place when the block succeeds, the `.index` last, so a
    reader never finds an index without its data. On failure nothing of it is left."""
    what = what or prefix
    refuse_inputs_as_outputs([(what, prefix + ".index")], _protected)
    try:
        _makedirs(_split(prefix)[0])
        tmp = staging_path(prefix, directory=True)
    except _io_errors() as err:
        raise OutputError(f"cannot write {what}: {describe(err)}") from None
    join = posixpath.join if is_remote(tmp) else os.path.join
    try:
        yield join(tmp, "ckpt")
        for name in sorted(_fs(tmp).listdir(tmp), key=lambda n: n.endswith(".index")):
            _fs(tmp).rename(join(tmp, name), prefix + name[len("ckpt"):], overwrite=True)
    except _io_errors() as err:
        raise OutputError(f"cannot write {what}: {describe(err)}") from None
    finally:
        _remove_quietly(tmp)
        _remove_empty_sidecar(tmp)


@contextlib.contextmanager
def atomic_write(path, mode="w", what=None):
    """Yields a file object writing `path` atomically (see `atomic_path`)."""
    with atomic_path(path, what) as tmp:
        with _fs(tmp).GFile(tmp, mode) as f:
            yield f


def write_text(path, text, what=None):
    with atomic_write(path, "w", what) as f:
        f.write(text)
    return path


def write_json(path, value, what=None):
    """Writes `value` as indented, key-sorted JSON, atomically."""
    return write_text(path, json.dumps(value, indent=2, sort_keys=True) + "\n", what)


def write_results(path, results, what=None):
    """Writes `key = value` lines, sorted by key (the original's eval_results.txt format), atomically."""
    return write_text(path, "".join(f"{key} = {results[key]}\n" for key in sorted(results)), what)


def same_file(a, b):
    """Whether `a` and `b` name one file or folder (links and spellings resolved; hard links for files that exist)."""
    if is_remote(a) or is_remote(b):
        return str(a).rstrip("/") == str(b).rstrip("/")
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def inside(path, directory):
    """Whether `path` lies inside `directory` (links resolved)."""
    if is_remote(path) or is_remote(directory):
        return str(path).startswith(str(directory).rstrip("/") + "/")
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return os.path.commonpath([path, directory]) == directory


_protected = []  # (what, path) of the inputs of the runs in progress (`inputs_protected`)


@contextlib.contextmanager
def inputs_protected(inputs):
    """Within the block every output written through this module refuses to replace one of `inputs` ((what,
    path) pairs): the last guard for outputs whose names the run chooses (a run whose output paths are flags
    checks them first, with `refuse_inputs_as_outputs`)."""
    added = [(what, str(path)) for what, path in inputs if path]
    _protected.extend(added)
    try:
        yield
    finally:
        for item in added:
            _protected.remove(item)


def refuse_protected(outputs):
    """`refuse_inputs_as_outputs(outputs, <the inputs of the runs in progress>)`: for a writer of several files
    to check them all before it publishes the first."""
    refuse_inputs_as_outputs(outputs, _protected)


def refuse_inputs_as_outputs(outputs, inputs):
    """Raises `UsageError` before anything is written when an output would replace one of the inputs.

    `outputs` and `inputs` are `(what, path)` pairs, `what` naming the flag (e.g. "--output_file"). An output
    that is a directory to be replaced whole is given as `(what, path, True)`: then an input inside it is refused
    too. Paths are compared after resolving links (hard links too, for files that exist).
    """
    for output in outputs:
        out_what, out_path, whole_dir = (*output, False)[:3]
        if not out_path:
            continue
        for in_what, in_path in inputs:
            if not in_path:
                continue
            if same_file(out_path, in_path) or (whole_dir and inside(in_path, out_path)):
                output = out_what if str(out_path) in str(out_what) else f"{out_what} {out_path}"
                raise UsageError(f"{output} would overwrite the input {in_what} {in_path}; write the output "
                                 "elsewhere")


def file_sha256(path):
    """Hex sha256 of a file's bytes, read in 1 MiB blocks (remote paths too)."""
    digest = hashlib.sha256()
    with _fs(path).GFile(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fingerprint(parts):
    """Hex sha256 of a JSON-serialisable description of what a cached file was made from."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()


def remove_stale_partials(directory):
    """Removes partial outputs that killed processes left in `directory`'s sidecar (their pid is gone)."""
    sidecar = sidecar_dir(directory)
    if is_remote(directory) or not os.path.isdir(sidecar):
        return []
    removed = []
    for name in os.listdir(sidecar):
        match = _STAGED.match(name)
        if match and not _alive(int(match.group("pid"))):
            _remove_quietly(os.path.join(sidecar, name))
            removed.append(name)
    return removed


def remove_stale_checkpoint_temps(directory):
    """Removes the `<prefix>_temp` directories TF leaves when a run is killed while saving a checkpoint
    (call it only while holding the directory's lock). Returns their names."""
    if not _fs(directory).isdir(directory):
        return []
    removed = []
    for name in _fs(directory).listdir(directory):
        name = name.rstrip("/")
        if re.fullmatch(r"ckpt-\d+_temp", name) or re.fullmatch(r"ckpt-\d+_temp_[0-9a-f]+", name):
            _remove_quietly(os.path.join(directory, name) if not is_remote(directory)
                            else posixpath.join(directory, name))
            removed.append(name)
    return removed


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class DirectoryLock:
    """Holds `directory` for this process: `with DirectoryLock(path, "--output_dir"): ...`.

    Re-entrant within a process (an export into the output directory takes the lock it already holds).
    Raises `RunError` naming the directory and the holder's pid when another process holds it. Remote
    directories cannot be locked; they are used without a lock. `lock_name` other than "lock" locks one entry of
    the directory (a file or folder written whole) instead of the directory itself.
    """

    _held = {}  # sidecar path -> [file, count] for locks this process holds

    def __init__(self, directory, what="directory", lock_name="lock"):
        self.directory = str(directory)
        self.what = what
        self.lock_name = lock_name
        self._key = None
        self._created = []  # the folders the lock had to create, deepest first

    def acquire(self):
        if is_remote(self.directory):
            return self
        if os.path.exists(self.directory) and not os.path.isdir(self.directory):
            raise OutputError(f"{self.what} {self.directory} is a file, not a directory")
        key = os.path.join(sidecar_dir(self.directory), self.lock_name)
        if key in DirectoryLock._held:
            DirectoryLock._held[key][1] += 1
            self._key = key
            return self
        while True:
            handle = self._lock_file(key)
            try:  # the file locked must still be the one at `key` (a releasing holder unlinks it)
                if os.fstat(handle.fileno()).st_ino == os.stat(key).st_ino:
                    break
            except FileNotFoundError:
                pass
            handle.close()
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        handle.flush()
        DirectoryLock._held[key] = [handle, 1, self._created]
        self._key = key
        return self

    def _lock_file(self, key):
        try:
            if not self._created:
                folder = os.path.abspath(self.directory)
                while not os.path.exists(folder):
                    self._created.append(folder)
                    folder = os.path.dirname(folder)
            os.makedirs(os.path.dirname(key), exist_ok=True)
            handle = open(key, "a+", encoding="utf-8")  # pylint: disable=consider-using-with
        except OSError as err:
            raise OutputError(f"cannot lock {self.what} {self.directory}: {describe(err)}") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                where = self.what if self.lock_name != "lock" else f"{self.what} {self.directory}"
                raise RunError(f"{where} is in use by another run ({holder}); wait for it to finish or write "
                               "elsewhere") from None
            raise OutputError(f"cannot lock {self.what} {self.directory}: {describe(err)}") from None
        return handle

    def release(self):
        """Unlocks; the last release removes the lock file (and the staging folder, when empty) while still holding
        it, and the folders the lock created (the directory, and parents it lacked) that nothing was written into."""
        if self._key is None:
            return
        entry = DirectoryLock._held[self._key]
        entry[1] -= 1
        if entry[1] == 0:
            del DirectoryLock._held[self._key]
            handle = entry[0]
            with contextlib.suppress(OSError):
                os.remove(self._key)
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()
            with contextlib.suppress(OSError):
                os.rmdir(os.path.dirname(self._key))
            for folder in entry[2]:  # made by the lock and left empty by the run
                try:
                    os.rmdir(folder)
                except OSError:
                    break
        self._key = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def replace_directory(source, target):
    """Moves the finished directory `source` to `target`, replacing this program's earlier `target` (moved
    into the staging folder first, then removed), so `target` is always either the old or the new one."""
    if not _fs(target).exists(target):
        _fs(source).rename(source, target)
        return target
    old = _staging_name(target)
    _fs(target).rename(target, old)
    _fs(source).rename(source, target)
    _remove_quietly(old)
    _remove_empty_sidecar(old)
    return target


def _move_entries(source, target):
    """Replaces the contents of the directory `target` (a mount point, or in a folder this process cannot write)
    with those of `source`, a temporary in `target`'s own staging folder: the old entries are moved aside, the
    new ones moved in (folders first, so a SavedModel's `saved_model.pb` arrives last), the old removed."""
    old = staging_path(target, directory=True, inside=True)
    for name in _entries(target):
        _fs(target).rename(os.path.join(target, name), os.path.join(old, name))
    for name in sorted(_entries(source), key=lambda n: not _fs(target).isdir(os.path.join(source, n))):
        _fs(target).rename(os.path.join(source, name), os.path.join(target, name))
    manifest = os.path.join(sidecar_dir(source), MANIFEST)
    if os.path.exists(manifest):
        os.replace(manifest, os.path.join(sidecar_dir(target), MANIFEST))
    _remove_quietly(source)
    _remove_quietly(old)
    _remove_empty_sidecar(old)
    return target


def copy_files(sources, directory):
    """Copies files into `directory` (created if needed), each atomically; returns the new paths."""
    _fs(directory).makedirs(directory)
    copied = []
    for source in sources:
        target = os.path.join(directory, os.path.basename(source))
        with atomic_path(target) as tmp:
            _fs(source if is_remote(source) else tmp).copy(source, tmp, overwrite=True)
        copied.append(target)
    return copied
