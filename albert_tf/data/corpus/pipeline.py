"""`prepare_corpus`: input files → documents → cleaning → sentences → shards, in one streaming pass.

Documents are read and cleaned one at a time in input order (files sorted per glob), so memory does not grow with
the corpus (only the duplicate digests do, 16 bytes per kept document) and the output depends only on the inputs
and the options. With `num_workers` > 1, worker processes split batches of kept documents into sentences while the
main process reads on; at most two batches per worker are in flight and results are written in input order, so
the output is the same for any number of workers.
"""

import collections
import concurrent.futures
import dataclasses
import multiprocessing
import sys
import time

from albert_tf.data.corpus import readers, sentences
from albert_tf.errors import DataError
from albert_tf.progress import time_left
from albert_tf.data.corpus.cleaning import Cleaner, CleaningOptions
from albert_tf.data.corpus.writer import ShardWriter


@dataclasses.dataclass
class CorpusStats:
    """What a run read, dropped and wrote (also the progress reported while it runs)."""

    files_total: int = 0
    files_done: int = 0
    bytes_total: int = 0
    bytes_done: int = 0
    documents_read: int = 0
    dropped_empty: int = 0
    dropped_short: int = 0
    dropped_duplicate: int = 0
    documents_written: int = 0
    sentences_written: int = 0
    bytes_written: int = 0
    elapsed_seconds: float = 0.0
    outputs: list = dataclasses.field(default_factory=list)

    def describe(self):
        """The progress line while the run reads (`albert_tf.progress.ProgressLog`)."""
        secs = max(self.elapsed_seconds, 1e-9)
        return (f"files {self.files_done}/{self.files_total}, {self.bytes_done / 1e6:.1f}/{self.bytes_total / 1e6:.1f}"
                f" MB ({self.bytes_done / 1e6 / secs:.2f} MB/s), {self.documents_read} documents"
                + time_left(secs, self.bytes_done / max(self.bytes_total, 1)))

    def summary(self):
        secs = max(self.elapsed_seconds, 1e-9)
        lines = [
            f"read {self.files_total} files, {self.bytes_total / 1e6:.1f} MB, {self.documents_read} documents in "
            f"{self.elapsed_seconds:.1f} s ({self.bytes_total / 1e6 / secs:.2f} MB/s)",
            f"dropped {self.dropped_empty} empty, {self.dropped_short} shorter than --min_document_chars, "
            f"{self.dropped_duplicate} exact duplicates",
            f"wrote {self.documents_written} documents, {self.sentences_written} sentences, "
            f"{self.bytes_written / 1e6:.1f} MB into {len(self.outputs)} file(s): "
            + (", ".join(self.outputs) if len(self.outputs) <= 4 else f"{self.outputs[0]} ... {self.outputs[-1]}"),
        ]
        return "\n".join(lines)


_BATCH_DOCUMENTS = 256


def _split_batch(sentence_splitter, batch):
    """Sentences of each document (a list of paragraphs) of `batch`: the workers' job."""
    split = sentences.splitter(sentence_splitter)
    return [[s for p in paragraphs for s in split(p)] for paragraphs in batch]


def prepare_corpus(input_files, output_file, *, input_format="auto", text_field="text", document_per_file=False,
                   cleaning=CleaningOptions(), num_shards=1, shard_bytes=0, progress=None, progress_every=1000,
                   what="--output_file", sentence_splitter="blingfire", num_workers=1):
    """Converts `input_files` (paths, in order) into the pretraining input format at `output_file` (see
    `writer.ShardWriter` for `num_shards` / `shard_bytes`); returns `CorpusStats`.

    `sentence_splitter` names the library (`sentences.SPLITTERS`); `num_workers` processes split sentences (the
    output does not depend on it). `progress(stats)` is called every `progress_every` documents, after each file,
    and once all is written (before the shards are moved into place).
    """
    start = time.monotonic()
    stats = CorpusStats(files_total=len(input_files))
    sizes = [readers.file_size(path) for path in input_files]
    stats.bytes_total = sum(sizes)
    cleaner = Cleaner(cleaning)
    split = sentences.splitter(sentence_splitter)
    progress = progress or (lambda stats: None)

    def update(done_before, corpus_file=None):
        stats.bytes_done = done_before + (corpus_file.bytes_read if corpus_file else 0)
        stats.elapsed_seconds = time.monotonic() - start
        stats.documents_read = cleaner.counts["read"]

    pool = None
    if num_workers > 1:  # forked, unless TensorFlow's threads are running here: then spawned (slower to start)
        method = "spawn" if "tensorflow" in sys.modules or sys.platform != "linux" else "fork"
        pool = concurrent.futures.ProcessPoolExecutor(num_workers, mp_context=multiprocessing.get_context(method))
    in_flight, batch = collections.deque(), []

    def write_all(documents):
        for doc_sentences in documents:
            if doc_sentences:
                writer.write(doc_sentences)

    def flush(limit):
        if batch:
            in_flight.append(pool.submit(_split_batch, sentence_splitter, list(batch)))
            batch.clear()
        while len(in_flight) > limit:
            write_all(in_flight.popleft().result())

    try:
        with ShardWriter(output_file, num_shards, shard_bytes, what) as writer:
            done = 0
            for path, size in zip(input_files, sizes):
                corpus_file = readers.CorpusFile(path, input_format, text_field, document_per_file)
                for document in corpus_file.documents():
                    paragraphs = cleaner.clean(document.paragraphs)
                    if paragraphs is not None:
                        if pool is None:
                            write_all([[s for p in paragraphs for s in split(p)]])
                        else:
                            batch.append(paragraphs)
                            if len(batch) >= _BATCH_DOCUMENTS:
                                flush(2 * num_workers)
                    if cleaner.counts["read"] % progress_every == 0:
                        update(done, corpus_file)
                        progress(stats)
                done += size
                stats.files_done += 1
                if stats.files_done < stats.files_total:
                    update(done)
                    progress(stats)
            if pool is not None:
                flush(0)
            if writer.documents == 0:  # leaving the block with an error publishes nothing
                counts = cleaner.counts
                raise DataError(f"no document to write from {len(input_files)} input file(s) ({counts['read']} read: "
                                f"{counts['empty']} empty, {counts['short']} short, {counts['duplicate']} "
                                "duplicate); nothing was written")
            update(done)
            progress(stats)  # all written; only the shards' moves into place are left
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    counts = cleaner.counts
    stats.dropped_empty, stats.dropped_short, stats.dropped_duplicate = (
        counts["empty"], counts["short"], counts["duplicate"])
    stats.documents_written, stats.sentences_written = writer.documents, writer.sentences
    stats.bytes_written, stats.outputs = writer.bytes_written, list(writer.paths)
    stats.elapsed_seconds = time.monotonic() - start
    return stats
