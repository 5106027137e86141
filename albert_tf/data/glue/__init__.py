"""Sentence (pair) classification data: the GLUE tasks of the original release and users' own CSV/TSV files,
classifier features cached as TFRecords, and tf.data pipelines that pad each batch only to its longest example.

One job per module: `errors` (`GlueDataError` and its kinds), `rows` (delimited UTF-8 files, row by row),
`processor` (`InputExample`, the `DataProcessor` base, `read_split`), `glue_tasks` (`GlueProcessor`, reading the
GLUE files `albert_tf.task_table` declares, `get_processor`), `user_files` (`CsvProcessor`), `features` (the
original's features and record layout), `cache` (`cached_features`), `datasets` (`train_dataset`, `eval_dataset`).
Every name stays importable from here (`from albert_tf.data import glue; glue.get_processor(...)`).
"""

from albert_tf.data.glue.cache import RECORD_FORMAT_VERSION, CachedFeatures, cached_features
from albert_tf.data.glue.datasets import eval_dataset, length_buckets, model_inputs, train_dataset
from albert_tf.data.glue.errors import (DataError, GlueDataError, MalformedRowError, MissingSplitError,
                                        UnknownLabelError, UnknownTaskError)
from albert_tf.data.glue.features import (FEATURE_NAMES, convert_example, example_proto, features_from_texts,
                                          record_spec)
from albert_tf.data.glue.glue_tasks import GLUE_TASKS, OWN_FILE_OPTIONS, GlueProcessor, get_processor
from albert_tf.data.glue.processor import SPLITS, DataProcessor, InputExample, read_split
from albert_tf.data.glue.rows import first_invalid_utf8, read_rows
from albert_tf.data.glue.user_files import CsvProcessor
from albert_tf.data.records import tokenizer_fingerprint

__all__ = [
    "CachedFeatures", "CsvProcessor", "DataError", "DataProcessor", "FEATURE_NAMES", "GLUE_TASKS", "GlueDataError",
    "GlueProcessor", "InputExample", "MalformedRowError", "MissingSplitError", "OWN_FILE_OPTIONS",
    "RECORD_FORMAT_VERSION", "SPLITS", "UnknownLabelError", "UnknownTaskError", "cached_features",
    "convert_example", "eval_dataset", "example_proto", "features_from_texts", "first_invalid_utf8",
    "get_processor", "length_buckets", "model_inputs", "read_rows", "read_split", "record_spec",
    "tokenizer_fingerprint", "train_dataset",
]
