"""A split's classifier features cached as a TFRecord file (`cached_features`): named by task, split and sequence
length and keyed by everything the records depend on (the split file's bytes, the tokenizer's fingerprint, the
label list, the sequence length), through `records.cached_records`, so a changed input never reuses a stale file;
the records are written under a temporary name and renamed into place, and their JSON description is written last.
"""

import dataclasses
import logging
import os
import re

from albert_tf import fileio
from albert_tf.data import records
from albert_tf.data.glue.features import convert_example, example_proto
from albert_tf.data.glue.processor import read_split

RECORD_FORMAT_VERSION = 1


@dataclasses.dataclass
class CachedFeatures:
    """A split's records: `path` (TFRecord), `num_examples`, `examples` (the `InputExample`s, in record order),
    `max_length` (longest example, in tokens) and whether this call wrote them (`written`)."""

    path: str
    num_examples: int
    examples: list
    max_length: int
    written: bool


def _safe(name):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def cached_features(processor, data_dir, split, tokenizer, max_seq_length, cached_dir, examples=None):
    """Converts `split` to features and caches them as a TFRecord file in `cached_dir` (reused when everything
    they depend on is unchanged; see this module's docstring). Returns a `CachedFeatures`."""
    path, read = read_split(processor, data_dir, split)
    examples = read if examples is None else examples
    key_parts = {
        "format": RECORD_FORMAT_VERSION, "task": processor.task_name, "split": split,
        "max_seq_length": int(max_seq_length), "data_sha256": fileio.file_sha256(path),
        "tokenizer": records.tokenizer_fingerprint(tokenizer), "labels": processor.get_labels(),
        "regression": processor.is_regression, "num_examples": len(examples),
    }
    stem = f"{_safe(processor.task_name)}_{split}_{max_seq_length}_{fileio.fingerprint(key_parts)[:16]}"

    def write(writer):
        max_length = 0
        for i, example in enumerate(examples):
            if i % 10000 == 0:
                logging.info("Writing %s %s example %d of %d", processor.task_name, split, i, len(examples))
            features = convert_example(example, processor, tokenizer, max_seq_length)
            max_length = max(max_length, sum(features["input_mask"]))
            writer.write(example_proto(features, processor.is_regression).SerializeToString())
        return {"source": path, "max_length": max_length}

    cached = records.cached_records(os.path.join(cached_dir, stem + ".tf_record"), key_parts, write)
    return CachedFeatures(cached.path, cached.num_records, examples, cached.meta.get("max_length", max_seq_length),
                          cached.written)
