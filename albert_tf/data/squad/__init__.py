"""SQuAD v1.1 / v2.0 for ALBERT: reading the JSON, features as the original release builds them, feature caches and
the tf.data pipelines. Post-processing is in `albert_tf.evaluation.squad_postprocessing`.

One job per module: `reading` (the JSON into `SquadExample`s, `SquadDataError`), `alignment` (SentencePiece pieces
to context characters), `windows` (questions and contexts into the original's windows, `InputFeatures`),
`feature_file` (a window's record layout, written and read back), `cache` (`build_or_load_features`), `datasets`
(`training_dataset`, `prediction_dataset`). Every name stays importable from here (`from albert_tf.data import squad;
squad.read_squad_examples(...)`).
"""

from albert_tf.data.squad.alignment import AlignmentError, ContextAlignment, align_context, convert_index
from albert_tf.data.squad.cache import FEATURE_FORMAT_VERSION, FeatureSet, build_or_load_features, features_key
from albert_tf.data.squad.datasets import SEQUENCE_FEATURES, prediction_dataset, training_dataset
from albert_tf.data.squad.feature_file import example_to_feature, feature_spec, feature_to_example, read_feature_file
from albert_tf.data.squad.reading import (ReadStats, SquadDataError, SquadExample, load_squad_json, read_examples,
                                          read_squad_examples)
from albert_tf.data.squad.windows import (ALIGNMENT_CACHE_SIZE, UNIQUE_ID_START, ConversionStats, InputFeatures,
                                          check_lengths, convert_examples_to_features, doc_spans_for, is_max_context,
                                          max_context_owners, require_sentencepiece)

__all__ = [
    "ALIGNMENT_CACHE_SIZE", "AlignmentError", "ContextAlignment", "ConversionStats", "FEATURE_FORMAT_VERSION",
    "FeatureSet", "InputFeatures", "ReadStats", "SEQUENCE_FEATURES", "SquadDataError", "SquadExample",
    "UNIQUE_ID_START", "align_context", "build_or_load_features", "check_lengths", "convert_examples_to_features",
    "convert_index", "doc_spans_for", "example_to_feature", "feature_spec", "feature_to_example", "features_key",
    "is_max_context", "load_squad_json", "max_context_owners", "prediction_dataset", "read_examples",
    "read_feature_file", "read_squad_examples", "require_sentencepiece", "training_dataset",
]
