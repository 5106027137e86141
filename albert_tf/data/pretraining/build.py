"""One shard, start to finish: an `InputShard`'s serialized records in their final order (`shard_records`: read,
instances, masks, features, encoding, seeded shuffle buffer), what each worker process runs per shard."""

import random

import numpy as np

from albert_tf.data.pretraining.config import Stats
from albert_tf.data.pretraining.encoding import encode_examples, instance_features
from albert_tf.data.pretraining.instances import (STREAM_BUFFER, STREAM_DOCUMENT, STREAM_ORDER, derive_seed,
                                                  document_instances)
from albert_tf.data.pretraining.ngram_masking import mask_instance, ngram_cdf
from albert_tf.data.pretraining.shards import read_shard_documents

# Records held by each shard's shuffle buffer. Part of what determines the output bytes.
SHUFFLE_BUFFER_RECORDS = 4096
# Instances serialized together (vectorized encoding). Does not affect the output.
_ENCODE_BATCH = 256


class _ShuffleBuffer:
    """A seeded shuffle buffer of fixed capacity: `push` returns the record it evicts (or None)."""

    def __init__(self, capacity, rng):
        self.capacity = capacity
        self.rng = rng
        self.items = []

    def push(self, item):
        if len(self.items) < self.capacity:
            self.items.append(item)
            return None
        j = int(self.rng.random() * self.capacity)
        out, self.items[j] = self.items[j], item
        return out

    def drain(self):
        self.rng.shuffle(self.items)
        items, self.items = self.items, []
        return items


def shard_records(shard, config, tables, stats=None):
    """Yields the serialized records of one `InputShard`, in their final order.

    Every (dupe round, document) pair of the shard is visited in a seeded random order; each pair has its own
    `random.Random` seeded by `derive_seed(random_seed, file index, shard index, document, dupe round)`. Records go
    through a seeded `SHUFFLE_BUFFER_RECORDS` shuffle buffer. `stats` (a `Stats`) is updated as records are made.
    """
    if stats is None:
        stats = Stats()
    if not stats.ngram_drawn:
        stats.ngram_drawn = [0] * config.ngram
        stats.ngram_accepted = [0] * config.ngram
    docs = read_shard_documents(shard, tables)
    stats.shards += 1
    stats.text_bytes += docs.text_bytes
    stats.documents += len(docs.bounds)
    stats.skipped_documents += docs.skipped
    stats.sentences += sum(len(b) - 1 for b in docs.bounds)
    stats.tokens += sum(b[-1] - b[0] for b in docs.bounds)
    n_docs = len(docs.bounds)
    if not n_docs:
        return
    key = (config.random_seed, shard.file_index, shard.shard_in_file)
    order = np.random.default_rng(derive_seed(*key, STREAM_ORDER)).permutation(config.dupe_factor * n_docs)
    buffer = _ShuffleBuffer(SHUFFLE_BUFFER_RECORDS, random.Random(derive_seed(*key, STREAM_BUFFER)))
    cdf = ngram_cdf(config.ngram, config.favor_shorter_ngram)
    pending, pending_masks = [], []

    def flush():
        features = instance_features(docs, pending, pending_masks, config, tables)
        stats.instances += len(pending)
        stats.instance_tokens += int(features["input_mask"].sum())
        stats.sentence_order_positive += int(features["next_sentence_labels"].sum())
        stats.masked_positions += int(features["masked_lm_weights"].sum())
        pending.clear()
        pending_masks.clear()
        return encode_examples(features)

    for pair in order.tolist():
        dupe, doc = divmod(pair, n_docs)
        rng = random.Random(derive_seed(*key, STREAM_DOCUMENT, doc, dupe))
        for instance in document_instances(docs, doc, config, rng):
            pending.append(instance)
            pending_masks.append(mask_instance(docs, instance, config, tables, rng, cdf, stats.ngram_drawn,
                                               stats.ngram_accepted))
        if len(pending) >= _ENCODE_BATCH:
            for record in flush():
                evicted = buffer.push(record)
                if evicted is not None:
                    yield evicted
    if pending:
        for record in flush():
            evicted = buffer.push(record)
            if evicted is not None:
                yield evicted
    yield from buffer.drain()
