"""The SQuAD feature cache (`build_or_load_features`): a file's windows written once to a feature file and reused
while everything they depend on is unchanged (`features_key`: the data file's bytes, the tokenizer's fingerprint,
the settings). Through `records.cached_records`: the records are written under a temporary name and renamed into
place, and their JSON description, holding the key's fingerprint and the conversion's statistics, is written last.
"""

import dataclasses

from albert_tf import fileio
from albert_tf.data import records
from albert_tf.data.squad.feature_file import feature_to_example, read_feature_file
from albert_tf.data.squad.reading import ReadStats, SquadDataError, read_examples
from albert_tf.data.squad.windows import ConversionStats, convert_examples_to_features, require_sentencepiece

FEATURE_FORMAT_VERSION = 1


def features_key(input_file, tokenizer, max_seq_length, doc_stride, max_query_length, is_training,
                 shuffle_seed=None):
    """Everything the features of `input_file` depend on (the cache key)."""
    return {
        "format": FEATURE_FORMAT_VERSION,
        "input_file": fileio.file_sha256(input_file),
        "tokenizer": records.tokenizer_fingerprint(tokenizer),
        "max_seq_length": max_seq_length, "doc_stride": doc_stride, "max_query_length": max_query_length,
        "is_training": bool(is_training), "shuffle_seed": shuffle_seed,
    }


@dataclasses.dataclass
class FeatureSet:
    """The result of `build_or_load_features`: examples, their windows (prediction; None for training, which
    streams from the file), the file, and the statistics of reading and conversion."""

    examples: list
    features: list
    feature_file: str
    num_features: int
    read_stats: ReadStats
    conversion: dict
    from_cache: bool


def build_or_load_features(input_file, feature_file, tokenizer, max_seq_length, doc_stride, max_query_length,
                           is_training, shuffle_seed=12345, examples=None):
    """Reads `input_file` and writes its windows to `feature_file`, or reuses the file when it was written from the
    same inputs (`records.cached_records`).

    Training examples are shuffled with `random.Random(shuffle_seed)` before conversion, as the original does.
    `examples` (with their `ReadStats`, from `read_examples`) skips reading the file again.
    Returns a `FeatureSet`; prediction windows are returned in memory as well.
    """
    require_sentencepiece(tokenizer)
    examples, read_stats = examples or read_examples(input_file, is_training, shuffle_seed)
    key = features_key(input_file, tokenizer, max_seq_length, doc_stride, max_query_length, is_training,
                       shuffle_seed if is_training else None)
    stats = ConversionStats()
    kept = [] if not is_training else None

    def write(writer):
        def output_fn(feature):
            writer.write(feature_to_example(feature, is_training).SerializeToString())
            if kept is not None:
                kept.append(feature)

        convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length,
                                     is_training, output_fn=output_fn, stats=stats)
        return {"num_examples": len(examples), "input_file": input_file,
                "conversion": {"examples": stats.examples, "features": stats.features, "positive": stats.positive,
                               "negative": stats.negative, "truncated_questions": len(stats.truncated_questions),
                               "alignment_failures": len(stats.alignment_failures),
                               "wide_alignments": len(stats.wide_alignments)}}

    cached = records.cached_records(feature_file, key, write)
    features = kept
    if not cached.written and not is_training:
        features = read_feature_file(feature_file)
        if len(features) != cached.num_records:
            raise SquadDataError(f"{feature_file} holds {len(features)} windows but its description says "
                                 f"{cached.num_records}; delete both to rebuild")
    return FeatureSet(examples, features, feature_file, cached.num_records, read_stats,
                      cached.meta.get("conversion", {}), not cached.written)
