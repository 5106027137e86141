"""The stages after BuildRecords, each writing into the run's temporary folder beside the outputs: BucketOrder (a
shuffle bucket sorted by its keys, as one segment file), Write (an output file's pieces, segment ranges or bucket
segments, into a file of its own) and Finalize (the written files renamed into place, the folder removed).

A retried or duplicated attempt writes files of its own (uuid names); Finalize keeps one per output file."""

import logging
import uuid

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from albert_tf.data.pretraining.beam.files import read_all, read_range, write_all
from albert_tf.data.pretraining.beam.frames import bucket_frames, joined_pieces

logger = logging.getLogger(__name__)


def _temp_path(temp_dir, name):
    return FileSystems.join(temp_dir, f"{uuid.uuid4().hex}-{name}")


def write_bucket(item, temp_dir, num_files):
    """GlobalShuffle: a bucket's frames in key order, written as one segment file in Beam's temporary folder (a
    retried attempt writes its own); yields (output file, (bucket, segment path)). Bucket b goes to file b % files."""
    bucket, pieces = item
    ordered = bucket_frames(read_range(*piece) if isinstance(piece, tuple) else piece for piece in pieces)
    path = _temp_path(temp_dir, f"bucket-{bucket}")
    write_all(path, joined_pieces(ordered))
    yield bucket % num_files, (bucket, path)


def concat_segments(item, temp_dir, names):
    """Write (with the global shuffle): an output file as its buckets' segments one after the other, in bucket
    order; yields (0, (file index, temporary path)) for `finalize`."""
    index, segments = item
    paths = {}
    for bucket, path in segments:
        paths.setdefault(bucket, path)  # one segment per bucket (a runner may commit a duplicate)
    path = _temp_path(temp_dir, FileSystems.split(names[index])[1])
    write_all(path, read_all([paths[bucket] for bucket in sorted(paths)]))
    yield 0, (index, path)


def write_ranges(item, temp_dir, names):
    """Write (local outputs, without the global shuffle): one output file's byte ranges of segment files copied one
    after the other, as they come; yields (0, (file index, temporary path)) for `finalize`."""
    index, ranges = item
    path = _temp_path(temp_dir, FileSystems.split(names[index])[1])
    write_all(path, (read_range(*r) for r in ranges))
    yield 0, (index, path)


def write_file(item, temp_dir, names):
    """Write: one output file's frames, as they come, into a file of its own in Beam's temporary folder (a retried
    or duplicated attempt writes another); yields (0, (file index, temporary path)) for `finalize`."""
    index, pieces = item
    path = _temp_path(temp_dir, FileSystems.split(names[index])[1])
    write_all(path, pieces)
    yield 0, (index, path)


def finalize(item, temp_dir, names):
    """Finalize, once every file is written: the written files (the committed attempts) renamed into place, the
    others created empty, the temporary folder removed. A retried finalize skips what an earlier attempt renamed."""
    _, written = item
    sources, destinations, done = [], [], set()
    for index, path in written:
        if index not in done and (FileSystems.exists(path) or not FileSystems.exists(names[index])):
            sources.append(path)
            destinations.append(names[index])
        done.add(index)
    for index, name in enumerate(names):
        if index not in done and not FileSystems.exists(name):
            FileSystems.create(name, compression_type=CompressionTypes.UNCOMPRESSED).close()
    if sources:
        FileSystems.rename(sources, destinations)
    try:
        FileSystems.delete([temp_dir])
    except Exception as err:  # pylint: disable=broad-except  (an object store may hold no folder object)
        logger.debug("could not remove %s: %s", temp_dir, err)
