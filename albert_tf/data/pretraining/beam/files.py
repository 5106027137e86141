"""The pipeline's files through Beam's file systems (local or gs://, s3://, hdfs://): the listed inputs, the
outputs' names and pattern, Beam's temporary folders beside them, and the reads and writes of the stages."""

import contextlib
import glob
import logging
import os
import uuid

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from albert_tf import fileio
from albert_tf.data.pretraining.config import PretrainingDataError
from albert_tf.data.pretraining.shards import expand_input_patterns

logger = logging.getLogger(__name__)


def match(pattern):
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
        found = sorted(match(pattern), key=lambda m: m.path)
        if glob.has_magic(pattern):  # as fileio.expand_globs: a wildcard never reads a settings record
            found = [m for m in found if not fileio.is_settings_record(m.path)]
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


def output_glob(prefix, suffix):
    """The pattern of every output of `prefix` and `suffix`, whatever the number of files."""
    return f"{prefix}-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]{suffix}"


def new_temp_dir(prefix):
    """A new name for a run's temporary folder beside the outputs: `beam-temp-<name>-<uuid>`."""
    directory, base = FileSystems.split(prefix)
    return FileSystems.join(directory, f"beam-temp-{base}-{uuid.uuid4().hex}")


def temp_dirs(prefix):
    """The temporary folders of `prefix`'s runs that exist now."""
    directory, base = FileSystems.split(prefix)
    pattern = FileSystems.join(directory, f"beam-temp-{base}-*")
    if fileio.is_remote(prefix):  # object stores list objects, not folders
        return {FileSystems.split(m.path)[0] for m in match(pattern + "/*")}
    return set(glob.glob(pattern))


def delete(paths):
    """Removes each path, logging (not raising) what cannot be removed."""
    for path in paths:
        try:
            FileSystems.delete([path])
        except Exception as err:  # pylint: disable=broad-except
            logger.warning("could not remove %s: %s", path, err)


def beam_open(path):
    """A file opened for reading through Beam's file systems, uncompressed."""
    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def beam_size(path):
    """A file's size through Beam's file systems."""
    return FileSystems.match([path])[0].metadata_list[0].size_in_bytes


def read_all(paths, block=8 << 20):
    """The bytes of the files at `paths`, one after the other, in blocks."""
    for path in paths:
        f = beam_open(path)
        try:
            while True:
                data = f.read(block)
                if not data:
                    break
                yield data
        finally:
            f.close()


def read_range(segment, offset, length):
    """`length` bytes at `offset` of a local segment file."""
    with open(segment, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    if len(data) != length:
        raise OSError(f"{segment}: {len(data)} bytes at {offset}, expected {length}")
    return data


def write_all(path, pieces):
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

