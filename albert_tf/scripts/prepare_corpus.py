"""Turns raw text into the input of `create_pretraining_data.py`: one sentence per line, a blank line between
documents, written in shards.

Inputs (--input_file, comma-separated files or globs): plain text (documents separated by blank lines, or one per
file with --document_per_file) or JSON Lines with a --text_field (what `wikiextractor --json` and most dataset dumps
write; a blank line inside a text is a paragraph break), each optionally .gz or .bz2. The format follows the
extension (.txt; .jsonl, .json) unless --input_format says otherwise. Sentences are split with Bling Fire, Chinese
and Japanese at their own sentence-final punctuation. Cleaning, each step can be turned off: whitespace normalised,
documents under --min_document_chars dropped, exact duplicates dropped; the counts are reported at the end.

The same inputs and flags give byte-identical output. Formats, flags, the splitter choice and the rates are in
`docs/corpus.md`.

Examples:
  python prepare_corpus.py --input_file='extracted/*/wiki_*' --output_file=/data/wiki --num_output_shards=64
  python prepare_corpus.py --input_file=books.jsonl.gz,'more/*.txt' --output_file=/tmp/corpus.txt
  python create_pretraining_data.py --input_file='/data/wiki-*' ...
"""

import dataclasses
import os

from absl import logging

from albert_tf import cli, fileio
from albert_tf.data import corpus
from albert_tf.data.corpus import readers, sentences, writer
from albert_tf.data.pretraining.config import PretrainingDataError
from albert_tf.data.pretraining.shards import expand_input_patterns
from albert_tf.progress import ProgressLog
from albert_tf.settings import NON_NEGATIVE, POSITIVE, setting


def _no_shard_over_an_input(output_file, values):
    """--output_file's declared check: none of the shards it names (with --shard_size_mb, any count of them) is one
    of the inputs. The guard compares --output_file itself; the shard names come from the count."""
    if not values.get("input_file"):
        return  # the guard names the missing setting
    try:
        inputs = expand_input_patterns(values["input_file"], what="--input_file")
    except PretrainingDataError:  # nothing to collide with; main names the missing input
        return
    if values.get("shard_size_mb"):
        pattern = writer.shard_pattern(output_file)
        directory = os.path.dirname(os.path.abspath(output_file))
        for path in inputs:
            if pattern.match(os.path.basename(path)) and os.path.dirname(os.path.abspath(path)) == directory:
                raise cli.UsageError(f"--output_file {output_file} would write shards over the input --input_file "
                                     f"{path}; write the output elsewhere")
    else:
        outputs = writer.shard_paths(output_file, values.get("num_output_shards") or 1)
        fileio.refuse_inputs_as_outputs([("--output_file", path) for path in outputs],
                                        [("--input_file", path) for path in inputs])


@dataclasses.dataclass
class CorpusRequest:
    """What one run reads and writes: each field is this script's flag of the same name (the cleaning flags are
    `corpus.CleaningOptions`')."""

    input_file: str = setting(None, "Input files: comma-separated paths or glob patterns (text or JSON Lines, "
                                    "optionally .gz or .bz2).", role="input_files", required=True)
    output_file: str = setting(None, "Output file; with several shards the prefix of `<prefix>-0000i-of-0000N.txt` "
                                     "(a trailing .txt is dropped from the prefix).", role="output_file",
                              records=True, required=True, check=_no_shard_over_an_input)
    input_format: str = setting("auto", "Input format; auto: by extension (.txt text; .jsonl, .json jsonl; after "
                                        ".gz/.bz2), else jsonl when a file starts with '{', else text.",
                                choices=("auto", *readers.FORMATS))
    text_field: str = setting("text", "The JSON Lines field holding a document's text.", required=True)
    document_per_file: bool = setting(False, "Text files: each file is one document (blank lines separate its "
                                             "paragraphs) instead of blank lines separating documents.")
    num_output_shards: int = setting(1, "Number of output files; documents go round-robin.", bounds=POSITIVE)
    shard_size_mb: float = setting(0.0, "Instead of --num_output_shards: start a new shard after this many MB "
                                        "(0: off).", bounds=NON_NEGATIVE,
                                  excludes=("num_output_shards",))
    sentence_splitter: str = setting("blingfire", "Sentence splitter behind the CJK rule: blingfire (fast; x86-64 "
                                                  "only) or pysbd (pure Python, about 100 times slower; `pip install "
                                                  "pysbd`), see docs/corpus.md.", choices=sentences.SPLITTERS)
    num_workers: int = setting(1, "Processes splitting sentences while the main one reads and cleans (0: one per "
                                  "CPU). Does not change the output.", bounds=NON_NEGATIVE)
    progress_interval: float = setting(10.0, "Seconds between progress lines (0: none).", bounds=NON_NEGATIVE)


cli.define_flags(CorpusRequest)
cli.define_flags(corpus.CleaningOptions)


def _warn_stale_shards(request, outputs):
    """Shards of an earlier run with another count, which a glob `<prefix>-*` would read too."""
    if fileio.is_remote(request.output_file):
        return
    directory = os.path.dirname(os.path.abspath(request.output_file))
    pattern = writer.shard_pattern(request.output_file)
    written = {os.path.abspath(p) for p in outputs}
    stale = sorted(name for name in os.listdir(directory)
                   if pattern.match(name) and os.path.join(directory, name) not in written)
    if stale:
        logging.warning("%s holds %d shard(s) of an earlier run with another count (%s ...), which a glob of "
                        "this prefix reads too; remove them", directory, len(stale), stale[0])


def main(argv):
    del argv  # cli.run refuses positional arguments
    request = cli.params_from_flags(CorpusRequest)
    cleaning = cli.params_from_flags(corpus.CleaningOptions)
    inputs = expand_input_patterns(request.input_file, what="--input_file")
    logging.info("reading %d file(s) into %s", len(inputs), request.output_file)
    with fileio.inputs_protected([("--input_file", path) for path in inputs]):
        stats = corpus.prepare_corpus(
            inputs, request.output_file, input_format=request.input_format, text_field=request.text_field,
            document_per_file=request.document_per_file, cleaning=cleaning,
            num_shards=0 if request.shard_size_mb else request.num_output_shards,
            shard_bytes=int(request.shard_size_mb * 1e6), progress=ProgressLog(request.progress_interval),
            sentence_splitter=request.sentence_splitter, num_workers=request.num_workers or os.cpu_count() or 1)
    for line in stats.summary().splitlines():
        logging.info("%s", line)
    _warn_stale_shards(request, stats.outputs)
    return 0


run = cli.console_command(main, __doc__)

if __name__ == "__main__":
    run()
