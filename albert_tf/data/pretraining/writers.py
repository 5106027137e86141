"""Output files of pretraining data: TFRecord writers over several files, round-robin, published atomically
(`AtomicRecordWriters`), and the names of `--output_dir` shards (`output_shard_paths`).

Local outputs are framed by `albert_tf.data.tfrecord_writer` without TensorFlow (its import costs seconds and
hundreds of MB); remote ones (`gs://...`) go through `tf.io`.
"""

import contextlib
import logging
import os
import sys

from albert_tf import fileio
from albert_tf.data import tfrecord_writer
from albert_tf.data.pretraining.config import PretrainingDataError

logger = logging.getLogger(__name__)


# One `--output_dir` shard's name: shard `shard` of `num_output_shards`. The script's --output_dir declares it as
# the names it writes (`settings.setting(writes=...)`), so the guard refuses shards of another count there.
SHARD_NAME = "pretraining-{shard:05d}-of-{num_output_shards:05d}.tfrecord"


def output_shard_paths(output_dir, num_shards):
    """`num_shards` output paths in `output_dir`: `pretraining-00000-of-00004.tfrecord`, ..."""
    if num_shards < 1:
        raise PretrainingDataError(f"num_output_shards must be at least 1, got {num_shards}")
    return [os.path.join(output_dir, SHARD_NAME.format(shard=i, num_output_shards=num_shards))
            for i in range(num_shards)]


def _gfile():
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf.io.gfile


# Local outputs are written without TensorFlow (its import costs seconds and hundreds of MB); remote ones use gfile.
def _rename(source, target):
    if fileio.is_remote(target):
        _gfile().rename(source, target, overwrite=True)
    else:
        os.replace(source, target)


def _remove(path):
    if fileio.is_remote(path):
        _gfile().remove(path)
    else:
        os.remove(path)


class _RemoteRecordWriter:
    """`tf.io.TFRecordWriter` with `LocalRecordWriter`'s `write_frame` and `append_file` (remote outputs)."""

    def __init__(self, path):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        self._writer = tf.io.TFRecordWriter(path)

    def write(self, record):
        self._writer.write(record)

    def write_frame(self, frame):
        self._writer.write(frame[12:-4])

    def append_file(self, path):
        for frame in tfrecord_writer.read_frames(path):
            self.write_frame(frame)

    def close(self):
        self._writer.close()


def _record_writer(path):
    """A TFRecord writer: `tfrecord_writer.LocalRecordWriter` for a local file (no TensorFlow), else through TF."""
    return _RemoteRecordWriter(path) if fileio.is_remote(path) else tfrecord_writer.LocalRecordWriter(path)


def _output_errors():
    """The exceptions an output write can fail with: OS errors, and TensorFlow's when it is loaded (remote)."""
    tf = sys.modules.get("tensorflow")
    op_error = getattr(getattr(tf, "errors", None), "OpError", None)
    return (OSError, op_error) if isinstance(op_error, type) else (OSError,)


class AtomicRecordWriters:
    """TFRecord writers over several files, round-robin, that appear under their names only on `commit()`.

    Each file is written under a temporary name in its directory's staging folder (`fileio.staging_path`), so a
    killed run leaves nothing that a glob over the outputs matches; `commit()` closes and renames them, `abort()`
    closes and deletes them (and the directories this object created). Used as a context manager, an exception
    aborts. An output path that is a directory, or whose parent is a file, is refused at once; an OS error while
    writing (a full disk) is raised as `fileio.OutputError` naming the output, as `what` (e.g. "--output_file")
    and its path, with every temporary removed.
    """

    def __init__(self, paths, what="output"):
        if not paths:
            raise PretrainingDataError("no output files given")
        if len({p if fileio.is_remote(p) else os.path.realpath(p) for p in paths}) != len(paths):
            raise PretrainingDataError(f"output files repeat a name: {paths}")
        self.paths = list(paths)
        self.what = what
        self.temp_paths = []
        self.counts = [0] * len(self.paths)
        self._writers = []
        self._next = 0
        self._created_dirs = []  # local directories this object made (deepest last), removed again on abort
        fileio.refuse_protected([(f"{what} {path}", path) for path in self.paths])
        try:
            for path in self.paths:
                self._check_target(path)
            for path in self.paths:
                with self.writing(path):
                    parent = os.path.dirname(path)
                    self._makedirs(parent)
                    if not fileio.is_remote(path):
                        fileio.remove_stale_partials(parent or ".")
                    self.temp_paths.append(fileio.staging_path(path))
                    self._writers.append(_record_writer(self.temp_paths[-1]))
        except BaseException:
            self.abort()
            raise

    def error(self, path, message):
        return fileio.OutputError(f"cannot write {self.what} {path}: {message}")

    @contextlib.contextmanager
    def writing(self, path):
        """Re-raises an OS error (or TensorFlow's, remote) as `OutputError` naming `path`."""
        try:
            yield
        except _output_errors() as err:
            raise self.error(path, fileio.describe(err)) from None

    def _check_target(self, path):
        if fileio.is_remote(path):
            return
        if os.path.isdir(path):
            raise self.error(path, "it is a directory")
        parent = os.path.dirname(os.path.abspath(path))
        while parent and not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if parent and not os.path.isdir(parent):
            raise self.error(path, f"{parent} is not a directory")

    def _makedirs(self, parent):
        if not parent or fileio.exists(parent):
            return
        if fileio.is_remote(parent):
            _gfile().makedirs(parent)
            return
        missing = []
        directory = os.path.abspath(parent)
        while not os.path.exists(directory):
            missing.append(directory)
            directory = os.path.dirname(directory)
        for directory in reversed(missing):
            try:
                os.mkdir(directory)
            except FileExistsError:
                continue
            self._created_dirs.append(directory)

    def write(self, record):
        with self.writing(self.paths[self._next]):
            self._writers[self._next].write(record)
        self.counts[self._next] += 1
        self._next = (self._next + 1) % len(self._writers)

    def write_frame(self, frame):
        """Writes one TFRecord frame (header, record, checksum) as `write` would write its record."""
        with self.writing(self.paths[self._next]):
            self._writers[self._next].write_frame(frame)
        self.counts[self._next] += 1
        self._next = (self._next + 1) % len(self._writers)

    def append_framed(self, path, count):
        """Appends the `count` records of a TFRecord file (a worker's), round-robin as `write` would: with one
        output the file is copied whole; with several, frame by frame (their checksums are not recomputed)."""
        k = len(self._writers)
        if k == 1:
            with self.writing(self.paths[0]):
                self._writers[0].append_file(path)
        else:
            for i, frame in enumerate(tfrecord_writer.read_frames(path)):
                index = (self._next + i) % k
                with self.writing(self.paths[index]):
                    self._writers[index].write_frame(frame)
        for r in range(min(k, count)):
            self.counts[(self._next + r) % k] += (count - r + k - 1) // k
        self._next = (self._next + count) % k

    def commit(self):
        try:
            writers, self._writers = self._writers, []
            for writer, path in zip(writers, self.paths):
                with self.writing(path):
                    writer.close()
            for temp, path in zip(self.temp_paths, self.paths):
                with self.writing(path):
                    _rename(temp, path)
        except BaseException:
            self._writers = writers
            self.abort()
            raise
        self._remove_sidecars()

    def abort(self):
        for writer in self._writers:
            try:
                writer.close()
            except Exception:  # pylint: disable=broad-except
                pass
        self._writers = []
        for temp in self.temp_paths:
            try:
                if fileio.exists(temp):
                    _remove(temp)
            except Exception:  # pylint: disable=broad-except
                logger.warning("could not remove temporary file %s", temp)
        self._remove_sidecars()
        for directory in reversed(self._created_dirs):
            try:
                os.rmdir(directory)
            except OSError:
                pass
        self._created_dirs = []

    def _remove_sidecars(self):
        for temp in self.temp_paths:
            if fileio.is_remote(temp):
                continue
            try:
                os.rmdir(os.path.dirname(temp))
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.commit()
        else:
            self.abort()
        return False
