"""Raw text to the pretraining input format (one sentence per line, a blank line between documents).

`readers` streams documents out of text and JSON Lines files (plain, .gz or .bz2), `cleaning` normalises and drops
short and duplicate documents, `sentences` splits paragraphs into sentences, `writer` writes the shards atomically,
and `pipeline.prepare_corpus` runs them in order. The long story is in docs/corpus.md.
"""

from albert_tf.data.corpus.cleaning import Cleaner, CleaningOptions
from albert_tf.data.corpus.pipeline import CorpusStats, prepare_corpus
from albert_tf.data.corpus.readers import Document, CorpusFile, input_format
from albert_tf.data.corpus.sentences import split_sentences
from albert_tf.data.corpus.writer import ShardWriter, format_document, shard_paths

__all__ = ["Cleaner", "CleaningOptions", "CorpusFile", "CorpusStats", "Document", "ShardWriter", "format_document",
           "input_format", "prepare_corpus", "shard_paths", "split_sentences"]
