"""Raw text to ALBERT pretraining TFRecords (masked LM + sentence-order prediction), as the original release's
`create_pretraining_data.py` builds them; docs/pretraining_data.md describes the algorithm, reproducibility and
what differs from the original.

One job per module, each importable on its own (none but `pipeline` knows of worker processes):
`config` (flags, counters, the error), `shards` (input files, the shard plan, a shard's documents), `tokens`
(tokenization tables), `instances` (document to instances, seeded draws), `ngram_masking` (the stored masks),
`encoding` (features and `tf.train.Example` bytes), `build` (one shard's records), `writers` (atomic record
outputs), `pipeline` (`create_pretraining_data`: the local run with its worker pool).
"""

from albert_tf.data.pretraining.build import SHUFFLE_BUFFER_RECORDS, shard_records
from albert_tf.data.pretraining.config import PretrainingConfig, PretrainingDataError, Stats
from albert_tf.data.pretraining.encoding import FEATURE_ORDER, encode_examples, instance_features
from albert_tf.data.pretraining.instances import derive_seed, document_instances, randbelow
from albert_tf.data.pretraining.ngram_masking import KEEP, choose_ngrams, mask_instance, ngram_cdf
from albert_tf.data.pretraining.pipeline import Progress, create_pretraining_data
from albert_tf.data.pretraining.shards import (DEFAULT_SHARD_SIZE_MB, InputShard, ShardDocuments, check_input_file,
                                               expand_input_patterns, plan_shards, read_shard_documents)
from albert_tf.data.pretraining.tokens import (TokenTables, normalize_lines, sentencepiece_word_start,
                                               wordpiece_word_start)
from albert_tf.data.pretraining.writers import SHARD_NAME, AtomicRecordWriters, output_shard_paths

__all__ = [
    "AtomicRecordWriters", "DEFAULT_SHARD_SIZE_MB", "FEATURE_ORDER", "InputShard", "KEEP", "PretrainingConfig",
    "PretrainingDataError", "Progress", "SHARD_NAME", "SHUFFLE_BUFFER_RECORDS", "ShardDocuments", "Stats", "TokenTables",
    "check_input_file", "choose_ngrams", "create_pretraining_data", "derive_seed", "document_instances",
    "encode_examples", "expand_input_patterns", "instance_features", "mask_instance", "ngram_cdf", "normalize_lines",
    "output_shard_paths", "plan_shards", "randbelow", "read_shard_documents", "sentencepiece_word_start",
    "shard_records", "wordpiece_word_start",
]
