"""The workers' first two stages: SnapShards (a listed file checked and cut at document boundaries into
`InputShard`s, by the local tool's rule `shards.file_cuts`) and BuildRecords (a shard's records made by the local
tool's code, `build.shard_records`, counted in Beam metrics and sent on as pieces of TFRecord frames)."""

import os
import random
import shutil
import tempfile
import uuid

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import Metrics

from albert_tf.data.pretraining.beam import frames
from albert_tf.data.pretraining.beam.files import beam_open, beam_size, write_all
from albert_tf.data.pretraining.beam.worker_errors import marked_errors
from albert_tf.data.pretraining.build import shard_records
from albert_tf.data.pretraining.config import Stats
from albert_tf.data.pretraining.instances import STREAM_GLOBAL_SHUFFLE, STREAM_INTERLEAVE, derive_seed
from albert_tf.data.pretraining.shards import InputShard, file_cuts, use_remote_io
from albert_tf.data.pretraining.tokens import TokenTables
from albert_tf.text import tokenization

METRICS_NAMESPACE = "albert_tf.pretraining"


def file_shards(item, shard_bytes):
    """SnapShards: one listed (file index, path)'s `InputShard`s (checks the file, cuts at document bounds)."""
    file_index, path = item
    with marked_errors():
        cuts = file_cuts(path, shard_bytes)
    for shard_in_file, (start, end) in enumerate(zip(cuts[:-1], cuts[1:])):
        yield InputShard(-1, file_index, shard_in_file, path, start, end)


class ShardRecordsFn(beam.DoFn):
    """BuildRecords: an `InputShard`'s serialized records (`shard_records`), counted in Beam metrics, leaving the
    stage as a few large elements of TFRecord frames. Without `shuffle_buckets`: (output file, frames), the records
    dealt round-robin over the `num_files` outputs from a seeded start. With `shuffle_buckets`: (bucket, piece), each
    record keyed by a seeded 64-bit random key for the global shuffle (`frames.keyed_pieces`)."""

    _COUNTERS = ("shards", "text_bytes", "documents", "skipped_documents", "sentences", "tokens", "instances",
                 "instance_tokens", "sentence_order_positive", "masked_positions")

    def __init__(self, tokenizer_files, do_lower_case, config, shuffle_buckets, num_files, segments_dir=None):
        super().__init__()
        self.segments_dir = segments_dir
        self.tokenizer_files = tokenizer_files  # {argument: (file name, bytes)}: workers need no copy of them
        self.do_lower_case = do_lower_case
        self.config = config
        self.shuffle_buckets = shuffle_buckets
        self.num_files = num_files
        self.tables = None
        self.counters = None

    def setup(self):
        use_remote_io(beam_open, beam_size)
        directory = tempfile.mkdtemp(prefix="albert_tf-tokenizer-")
        try:
            args = {"do_lower_case": self.do_lower_case}
            for name, (base, data) in self.tokenizer_files.items():
                args[name] = os.path.join(directory, base)
                with open(args[name], "wb") as f:
                    f.write(data)
            with marked_errors():
                self.tables = TokenTables(tokenization.FullTokenizer(**args))
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        self.tables.num_threads = 1  # a worker per core already
        self.counters = {name: Metrics.counter(METRICS_NAMESPACE, name) for name in self._COUNTERS}
        self.counters.update({f"ngram_{kind}_{i + 1}": Metrics.counter(METRICS_NAMESPACE, f"ngram_{kind}_{i + 1}")
                              for kind in ("drawn", "accepted") for i in range(self.config.ngram)})

    def process(self, shard):
        config = self.config
        stats = Stats(ngram_drawn=[0] * config.ngram, ngram_accepted=[0] * config.ngram)
        with marked_errors():
            records = shard_records(shard, config, self.tables, stats)
            if self.shuffle_buckets:
                yield from self._shuffled(shard, records)
            else:
                yield from self._dealt(shard, records)
        for name in self._COUNTERS:
            self.counters[name].inc(getattr(stats, name))
        for i in range(config.ngram):
            self.counters[f"ngram_drawn_{i + 1}"].inc(stats.ngram_drawn[i])
            self.counters[f"ngram_accepted_{i + 1}"].inc(stats.ngram_accepted[i])

    def _dealt(self, shard, records):
        num_files = self.num_files
        position = derive_seed(self.config.random_seed, shard.file_index, shard.shard_in_file,
                               STREAM_INTERLEAVE) % num_files
        batch, size = [], 0
        for record in records:
            batch.append(record)
            size += len(record)
            if size >= frames.BATCH_BYTES:
                yield from self._out(frames.dealt_pieces(batch, position, num_files))
                position = (position + len(batch)) % num_files
                batch, size = [], 0
        if batch:
            yield from self._out(frames.dealt_pieces(batch, position, num_files))

    def _out(self, pieces):
        """The (output file or bucket, piece) pieces, or with `segments_dir` (local outputs, one machine) the pieces
        written one after the other into a segment file there and (file or bucket, (segment, offset, length))."""
        if not self.segments_dir:
            yield from pieces
            return
        path = FileSystems.join(self.segments_dir, f"{uuid.uuid4().hex}-segment")
        write_all(path, (data for _, data in pieces))
        offset = 0
        for index, data in pieces:
            yield index, (path, offset, len(data))
            offset += len(data)

    def _shuffled(self, shard, records):
        rng = random.Random(derive_seed(self.config.random_seed, shard.file_index, shard.shard_in_file,
                                        STREAM_GLOBAL_SHUFFLE))
        num_buckets = self.shuffle_buckets
        buckets, size = {}, 0
        for record in records:
            key = rng.getrandbits(64)
            bucket = buckets.get(key % num_buckets)
            if bucket is None:
                bucket = buckets[key % num_buckets] = ([], [])
            bucket[0].append(key)
            bucket[1].append(record)
            size += len(record)
            if size >= frames.BATCH_BYTES:
                yield from self._out(frames.keyed_pieces(buckets))
                buckets, size = {}, 0
        if buckets:
            yield from self._out(frames.keyed_pieces(buckets))
