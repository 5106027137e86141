"""The output shards: one file, or `<prefix>-0000i-of-0000N.txt`, written through `albert_tf.fileio`.

Every shard is written to a temporary file in the staging folder of its directory and moved into place with
`fileio.atomic_path` once all are complete, so a failed or interrupted run leaves no shard behind (and none that
a glob `<prefix>-*` reads). With a fixed number of shards documents go round-robin (document k to shard k mod N);
with a size per shard they fill one shard after another, a new one started once a shard holds the size.
"""

import os
import re

from albert_tf import fileio
from albert_tf.errors import UsageError


def format_document(sentences):
    """A document in the pretraining input format: one sentence per line (without the blank line after it)."""
    return "".join(s + "\n" for s in sentences)


def _prefix(output_file):
    return output_file[:-4] if output_file.endswith(".txt") else output_file


def shard_name(output_file, index, count):
    return f"{_prefix(output_file)}-{index:05d}-of-{count:05d}.txt"


def shard_paths(output_file, num_shards):
    """The output paths: `output_file` itself for one shard, else `<prefix>-0000i-of-0000N.txt` (a trailing
    `.txt` of `output_file` is not part of the prefix)."""
    if num_shards == 1:
        return [output_file]
    return [shard_name(output_file, i, num_shards) for i in range(num_shards)]


def shard_pattern(output_file):
    """A regex matching the base name of any shard of `output_file`, of any count."""
    return re.compile(re.escape(os.path.basename(_prefix(output_file))) + r"-\d{5}-of-\d{5}\.txt$")


class ShardWriter:
    """Writes documents (lists of sentences) into shards; a context manager: the shards appear when the block
    ends without an error, and `paths` then lists them.

    `num_shards` (> 0) fixes the count; else `shard_bytes` (> 0) caps each shard's size (a shard ends after the
    document that brings it to the size) and the count is known at the end.
    """

    def __init__(self, output_file, num_shards=1, shard_bytes=0, what="--output_file"):
        if num_shards and shard_bytes:
            raise UsageError("give --num_output_shards or --shard_size_mb, not both")
        if not num_shards and not shard_bytes:
            raise UsageError("--num_output_shards must be at least 1")
        self.output_file = output_file
        self.num_shards = num_shards
        self.shard_bytes = shard_bytes
        self.what = what
        self.paths = []
        self.documents = 0
        self.sentences = 0
        self.bytes_written = 0
        self._staged = []  # [temporary path, open file, documents in it, bytes in it]

    def __enter__(self):
        for i in range(self.num_shards or 1):
            self._open_shard(i)
        return self

    def _open_shard(self, index):
        provisional = shard_name(self.output_file, index, self.num_shards or 0)
        try:
            tmp = fileio.staging_path(provisional)
            if fileio.is_remote(tmp):
                import tensorflow as tf  # pylint: disable=import-outside-toplevel

                handle = tf.io.gfile.GFile(tmp, "wb")
                handle.write(b"")  # a GFile makes its file at the first write: an empty shard must exist too
            else:
                handle = open(tmp, "wb")  # pylint: disable=consider-using-with
        except OSError as err:
            raise fileio.OutputError(f"cannot write {self.what} {self.output_file}: {fileio.describe(err)}") from None
        self._staged.append([tmp, handle, 0, 0])

    def write(self, sentences):
        """Appends one document (a non-empty list of sentences without line breaks)."""
        if self.num_shards:
            shard = self._staged[self.documents % self.num_shards]
        else:
            shard = self._staged[-1]
            if shard[3] >= self.shard_bytes:
                self._open_shard(len(self._staged))
                shard = self._staged[-1]
        data = (("\n" if shard[2] else "") + format_document(sentences)).encode("utf-8")
        try:
            shard[1].write(data)
        except OSError as err:
            raise fileio.OutputError(f"cannot write {self.what} {self.output_file}: {fileio.describe(err)}") from None
        shard[2] += 1
        shard[3] += len(data)
        self.documents += 1
        self.sentences += len(sentences)
        self.bytes_written += len(data)

    def __exit__(self, exc_type, exc, tb):
        try:
            for shard in self._staged:
                try:
                    shard[1].close()  # flushes the last buffered bytes: a full disk may show here
                except OSError as err:
                    if exc_type is None:
                        raise fileio.OutputError(f"cannot write {self.what} {self.output_file}: "
                                                 f"{fileio.describe(err)}") from None
            if exc_type is None:
                self.paths = shard_paths(self.output_file, len(self._staged))
                fileio.refuse_protected([(f"{self.what} {path}", path) for path in self.paths])  # all, then any
                for (tmp, *_), path in zip(self._staged, self.paths):
                    with fileio.atomic_path(path, f"{self.what} {path}") as target:
                        _rename(tmp, target)
        finally:
            for shard in self._staged:
                _remove(shard[0])
        return False


def _rename(source, target):
    if fileio.is_remote(target):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        tf.io.gfile.rename(source, target, overwrite=True)
    else:
        os.replace(source, target)


def _remove(path):
    try:
        if fileio.is_remote(path):
            import tensorflow as tf  # pylint: disable=import-outside-toplevel

            if tf.io.gfile.exists(path):
                tf.io.gfile.remove(path)
        elif os.path.exists(path):
            os.remove(path)
        if not fileio.is_remote(path):
            os.rmdir(os.path.dirname(path))  # the staging folder, when nothing else is left in it
    except OSError:
        pass
