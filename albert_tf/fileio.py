"""Writing outputs safely: atomic files and directories, fingerprints, and one run per directory.

Three rules every script follows through this module:

* An output appears complete or not at all. It is written under a temporary name in a hidden *sidecar*
  directory beside its directory (`<parent>/.<dirname>.albert_tf/`), then renamed into place, so a killed run
  leaves nothing inside the directory a user named, and nothing that a glob such as `dir/*` would pick up.
* A directory belongs to one run at a time (`DirectoryLock`): a second process is refused at once, naming the
  directory and the holder's pid; the lock is an OS file lock on a file in the sidecar, released by the kernel
  when its holder dies, so a lock left by a killed run is taken over safely (the file is removed when a run ends).
* Nothing a user owns is deleted: only this module's own temporary files (and TF's `ckpt-N_temp` directories,
  see `remove_stale_checkpoint_temps`) are ever removed.

Local paths and remote ones (`gs://...`, through `tf.io.gfile`) both work; locks are local-only.
"""

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import posixpath
import re
import shutil
import socket
import uuid

from albert_tf.errors import AlbertError, RunError, UsageError

SIDECAR_SUFFIX = ".albert_tf"
_STAGED = re.compile(r"^\.(?P<name>.+)\.partial-(?P<pid>\d+)-[0-9a-z_]{8}$")


class OutputError(AlbertError):
    """An output cannot be written (read-only or full disk, a file where a directory must be)."""


def _tf():
    """TensorFlow, imported on first use: the tools that only write records and text need no eager import."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf


def _gfile():
    return _tf().io.gfile


def is_remote(path):
    return "://" in str(path)


def _makedirs(path):
    """`makedirs` without importing TensorFlow for a local path (the data tools then need no TF at all)."""
    if is_remote(path):
        _gfile().makedirs(path)
    else:
        os.makedirs(path, exist_ok=True)


def _split(path):
    path = str(path)
    if is_remote(path):
        return posixpath.split(path.rstrip("/"))
    return os.path.split(os.path.abspath(path))


def sidecar_dir(directory):
    """The hidden directory beside `directory` holding its lock and partial outputs (inside a bucket's root,
    which has nothing beside it)."""
    if is_remote(directory) and "/" not in str(directory).split("://", 1)[1].strip("/"):
        return f"{str(directory).rstrip('/')}/{SIDECAR_SUFFIX.lstrip('.')}-sidecar"
    parent, name = _split(directory)
    join = posixpath.join if is_remote(directory) else os.path.join
    return join(parent, f".{name}{SIDECAR_SUFFIX}")


def _staging_name(path):
    parent, name = _split(path)
    sidecar = sidecar_dir(parent)
    if is_remote(path):
        _gfile().makedirs(sidecar)
        return posixpath.join(sidecar, f".{name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    os.makedirs(sidecar, exist_ok=True)
    return os.path.join(sidecar, f".{name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def staging_path(path, directory=False):
    """A fresh temporary file (or, with `directory`, directory) for `path`, created empty in the sidecar of its
    directory. Another run that just emptied the sidecar may remove it at any moment (see `_remove_empty_sidecar`):
    creation is retried until the temporary exists, which keeps the sidecar."""
    while True:
        tmp = _staging_name(path)
        try:
            if is_remote(path):
                if directory:
                    _gfile().makedirs(tmp)
                else:
                    with _gfile().GFile(tmp, "w"):
                        pass
            elif directory:
                os.mkdir(tmp)
            else:
                os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            return tmp
        except FileNotFoundError:
            continue


def _describe(err):
    if isinstance(err, OSError):
        return err.strerror or str(err)
    return getattr(err, "message", None) or str(err)


def _remove_quietly(path):
    try:
        if _gfile().isdir(path):
            _gfile().rmtree(path)
        elif _gfile().exists(path):
            _gfile().remove(path)
    except (OSError, _tf().errors.OpError):
        pass


def _remove_empty_sidecar(path):
    if not is_remote(path):
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(path))


@contextlib.contextmanager
def atomic_path(path, what=None, directory=False, replace_directory_ok=False):
    """Yields a temporary path (an empty file, or with `directory` an empty directory) to write `path` through;
    renames it into place when the block succeeds.

    A directory written there replaces an existing `path` only with `replace_directory_ok`.

    On failure (or Ctrl-C / SIGTERM) the temporary is removed and `path` is left as it was. An OS error is
    re-raised as `OutputError` naming `path` (or `what`, e.g. "--output_file /x/y"), not the temporary.
    """
    try:
        _gfile().makedirs(_split(path)[0])
        tmp = staging_path(path, directory)
    except (OSError, _tf().errors.OpError) as err:
        raise OutputError(f"cannot write {what or path}: {_describe(err)}") from None
    try:
        yield tmp
        if _gfile().isdir(tmp) and _gfile().exists(path):
            if not replace_directory_ok:
                raise OutputError(f"cannot write {what or path}: it exists already")
            replace_directory(tmp, path)
        else:
            _gfile().rename(tmp, path, overwrite=True)
    except (OSError, _tf().errors.OpError) as err:
        _remove_quietly(tmp)
        raise OutputError(f"cannot write {what or path}: {_describe(err)}") from None
    except BaseException:
        _remove_quietly(tmp)
        raise
    finally:
        _remove_empty_sidecar(tmp)


@contextlib.contextmanager
def atomic_write(path, mode="w", what=None):
    """Yields a file object writing `path` atomically (see `atomic_path`)."""
    with atomic_path(path, what) as tmp:
        with _gfile().GFile(tmp, mode) as f:
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


def _same_file(a, b):
    if is_remote(a) or is_remote(b):
        return str(a).rstrip("/") == str(b).rstrip("/")
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def _inside(path, directory):
    if is_remote(path) or is_remote(directory):
        return str(path).startswith(str(directory).rstrip("/") + "/")
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return os.path.commonpath([path, directory]) == directory


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
            if _same_file(out_path, in_path) or (whole_dir and _inside(in_path, out_path)):
                raise UsageError(f"{out_what} {out_path} would overwrite the input {in_what} {in_path}; write the "
                                 "output elsewhere")


def file_sha256(path):
    """Hex sha256 of a file's bytes, read in 1 MiB blocks (remote paths too)."""
    digest = hashlib.sha256()
    with _gfile().GFile(path, "rb") as f:
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
    if not _gfile().isdir(directory):
        return []
    removed = []
    for name in _gfile().listdir(directory):
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
    directories cannot be locked; they are used without a lock.
    """

    _held = {}  # sidecar path -> [file, count] for locks this process holds

    def __init__(self, directory, what="directory"):
        self.directory = str(directory)
        self.what = what
        self._key = None

    def acquire(self):
        if is_remote(self.directory):
            return self
        key = os.path.join(sidecar_dir(self.directory), "lock")
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
        DirectoryLock._held[key] = [handle, 1]
        self._key = key
        return self

    def _lock_file(self, key):
        try:
            os.makedirs(os.path.dirname(key), exist_ok=True)
            handle = open(key, "a+", encoding="utf-8")  # pylint: disable=consider-using-with
        except OSError as err:
            raise OutputError(f"cannot lock {self.what} {self.directory}: {_describe(err)}") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise RunError(f"{self.what} {self.directory} is in use by another run ({holder}); wait for it "
                               f"to finish or use another directory") from None
            raise OutputError(f"cannot lock {self.what} {self.directory}: {_describe(err)}") from None
        return handle

    def release(self):
        """Unlocks; the last release removes the lock file (and the sidecar, when empty) while still holding it."""
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
        self._key = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def replace_directory(source, target):
    """Moves the finished directory `source` to `target`, replacing this program's earlier `target` (moved
    into the sidecar first, then removed), so `target` is always either the old or the new one."""
    if not _gfile().exists(target):
        _gfile().rename(source, target)
        return target
    old = _staging_name(target)
    _gfile().rename(target, old)
    _gfile().rename(source, target)
    _remove_quietly(old)
    _remove_empty_sidecar(old)
    return target


def copy_files(sources, directory):
    """Copies files into `directory` (created if needed), each atomically; returns the new paths."""
    _gfile().makedirs(directory)
    copied = []
    for source in sources:
        target = os.path.join(directory, os.path.basename(source))
        with atomic_path(target) as tmp:
            if is_remote(source) or is_remote(tmp):
                _gfile().copy(source, tmp, overwrite=True)
            else:
                shutil.copyfile(source, tmp)
        copied.append(target)
    return copied
