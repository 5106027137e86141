"""Raw text to ALBERT pretraining TFRecords (masked LM + sentence-order prediction).

This is the library behind the top-level `create_pretraining_data.py`. It builds the same training instances as the
original release's script and writes records with exactly its features, so files made here feed the original's
reader and the other way round. What is different is how the work is organised:

Input and documents
  As in the original: one sentence per line, a blank line between documents. Each line is normalised with the
  tokenizer's text preprocessing (SentencePiece mode: `tokenization.preprocess_text`; WordPiece mode: strip) and
  tokenized; a line that normalises to nothing ends the current document, a line without tokens is dropped.
  Documents with fewer than two tokens in all are skipped and counted (the original kept them). The end of an input
  file always ends a document (the original ran a file's last document on into the next file's first one when the
  file did not end with a blank line).

Instances (per document, as the original's `create_instances_from_document`)
  A target length of `max_seq_length - 3` tokens, or with probability `short_seq_prob` a uniform length in
  [2, max_seq_length - 3]. Sentences are gathered into a chunk until it reaches the target (or the document ends);
  the chunk is split at a random sentence into A and B. Sentence-order prediction (the default): with probability
  1/2, A and B are swapped and the label is 1. A chunk of a single sentence takes B from a random other document
  (label 1), and the chunk's unused sentences are put back. With `random_next_sentence`, B comes from a random
  document with probability 1/2 (label 1, NSP as in BERT). The pair is truncated to `max_seq_length - 3` tokens by
  dropping tokens one at a time from the longer side (B on ties), each time from the front or the back at random.
  The sequence is `[CLS] A [SEP] B [SEP]` with segment ids 0 for `[CLS] A [SEP]` and 1 for `B [SEP]`.

Masking (as the original's `create_masked_lm_predictions`)
  Candidates are whole words: in SentencePiece mode a word starts at a piece beginning with "▁" or "<", at a
  punctuation piece, or at a piece with a character outside a-z/punctuation; in WordPiece mode a "##" piece
  continues the previous word. [CLS]/[SEP] are never candidates. WordPiece mode only (a fix): "##" pieces at the
  start of a segment, whose word's head was cut off by truncation, are not candidates either (the original makes
  them a word of their own at the start of A, and joins them to A's last word across [SEP] at the start of B), so
  a masked span never starts on a "##" piece. The budget is
  `min(max_predictions_per_seq, max(1, round(len(tokens) * masked_lm_prob)))`. Candidates are visited in random
  order; at each, an n-gram length n in 1..`ngram` is drawn with p(n) proportional to 1/n (reversed when
  `favor_shorter_ngram` is false) and shortened while it would overflow the budget; an n-gram that still
  overflows or overlaps an earlier one is skipped. Each chosen piece becomes [MASK] (80%), stays (10%) or becomes a
  uniformly random vocabulary entry (10%). Positions are reported sorted. `token_boundary` marks word starts and
  the special tokens, computed from the unmasked pieces.

Reproducibility (a fix)
  The original seeds one `random.Random(random_seed)` for the whole run but draws the n-gram lengths from numpy's
  global, unseeded generator, so two runs with the same seed give different masks. Here every random choice comes
  from a generator seeded from `(random_seed, input file index, shard index, document index, dupe round)`, and the
  order of the output is fixed by shard. The same flags and seed therefore give byte-identical files, whatever the
  number of worker processes.

Bounded memory
  Input files are cut into shards of about `shard_size_mb` megabytes at document boundaries. A shard is read,
  tokenized and turned into instances on its own: memory holds one shard's token ids and a shuffle buffer, not the
  corpus and not all instances (the original keeps both in memory and shuffles globally). Consequences, compared
  with the original: the random document for B is drawn from the same shard, and the shuffle is local: each shard
  visits its (dupe round, document) pairs in a random order and passes the records through a seeded shuffle buffer
  of `SHUFFLE_BUFFER_RECORDS` records. Shards are written one after the other, records going round-robin over the
  output files as in the original.

Parallelism and output
  Worker processes (fork) each turn whole shards into finished TFRecord frames in a temporary file (in the staging
  folder of the first output's directory, `fileio.sidecar_dir`, so on the outputs' disk); the parent appends them
  to the outputs in shard order, round-robin, copying bytes only (no serialization, no checksums). Outputs are
  written under a hidden temporary name (`fileio.staging_path`) and renamed only when the run succeeds; on any
  error or interrupt the temporary files, and the directories the run made for its outputs, are removed. Workers
  do not inherit the parent's SIGTERM/SIGINT handlers: SIGTERM (the pool's `terminate()`) ends them quietly, and
  Ctrl-C is left to the parent, which stops the pool. The in-process path (one worker) lets SentencePiece use its
  own threads for batch encoding.

Checks
  Bad input raises `PretrainingDataError` (a ValueError) before anything is written: no file matched, a directory
  given as an input, an unreadable, empty, whitespace-only or binary file (NUL or many control bytes in its first
  64 KiB), `max_seq_length` < 5, `max_predictions_per_seq` above the `max_seq_length - 3` maskable tokens,
  probabilities outside [0, 1]; a missing or unreadable tokenizer file raises `tokenization.TokenizerError`. A run
  that yields no instance at all fails too. `max_predictions_per_seq` above `round(max_seq_length *
  masked_lm_prob)` (e.g. the common 128/20/0.15) only logs a warning: those slots are always padding, as in the
  original. An output that is one of the inputs (or the tokenizer file), however spelled (a link, a relative
  path), raises `errors.UsageError` before anything is written; an output that is a directory, or under a file,
  raises `fileio.OutputError` before the work starts, and an OS error while writing (a full disk, in the outputs
  or the workers' temporary files) raises it naming the output, with nothing partial left.

No TensorFlow for local files
  Records are serialized by a small numpy protobuf encoder (`encode_examples`) rather than `tf.train.Example`; the
  bytes are those of `tf.train.Example.SerializeToString(deterministic=True)` for the original's features. Local
  outputs are framed and checksummed by `albert_tf.data.tfrecord_writer` (numpy CRC-32C), byte for byte what
  `tf.io.TFRecordWriter` writes; TensorFlow is imported only for remote paths (`gs://...`, through `tf.io`). Not
  importing it is most of this tool's speed on small and medium corpora: the import alone costs seconds of CPU and
  about 600 MB of memory per process, more than the whole run on a few MB of text. Reading the records back is
  `albert_tf.data.records`.

Speed
  Per instance the work is a short Python loop (the lazy n-gram visit and the 80/10/10 draws, which must consume
  each document's `random.Random` in order to keep the output fixed by the seed) plus numpy for everything else
  (tokenization in bulk through SentencePiece, feature arrays, varints, record assembly and CRCs in batches of
  `_ENCODE_BATCH`). `bench/bench_pretraining_data.py` measures it against the original's own script.
"""

import bisect
import contextlib
import dataclasses
import glob
import hashlib
import itertools
import logging
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import unicodedata

import numpy as np

from albert_tf import fileio
from albert_tf.data import tfrecord_writer
from albert_tf.errors import DataError
from albert_tf.text import tokenization

logger = logging.getLogger(__name__)

# Input shard size in MB of text (see "Bounded memory" above). Part of what determines the output bytes.
DEFAULT_SHARD_SIZE_MB = 4.0
# Records held by each shard's shuffle buffer. Part of what determines the output bytes.
SHUFFLE_BUFFER_RECORDS = 4096
# Instances serialized together (vectorized encoding). Does not affect the output.
_ENCODE_BATCH = 256
# Bytes read from the start of each input file to recognise binary files.
_SNIFF_BYTES = 1 << 16
# The punctuation set of the original's SentencePiece word-start rule (note: no apostrophe, no "<=>").
_SP_PUNCTUATION = frozenset('!"#$%&()*+,-./:;?@[\\]^_`{|}~')
_SP_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz") | _SP_PUNCTUATION

# The record's features, in the original's order.
FEATURE_ORDER = ("input_ids", "input_mask", "segment_ids", "token_boundary", "masked_lm_positions",
                 "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")


class PretrainingDataError(DataError):
    """Bad input or flags for pretraining data creation; the message says what and where."""


# ----------------------------------------------------------------------------------------------------------------
# Configuration and statistics


@dataclasses.dataclass(frozen=True)
class PretrainingConfig:
    """The original script's generation flags, with its defaults.

    `do_permutation` is the original's experimental permutation objective: a second set of up to `budget` positions
    whose tokens are permuted among themselves; records then hold `2 * max_predictions_per_seq` predictions.
    """

    max_seq_length: int = 512
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    ngram: int = 3
    dupe_factor: int = 40
    random_seed: int = 12345
    do_whole_word_mask: bool = True
    favor_shorter_ngram: bool = True
    random_next_sentence: bool = False
    do_permutation: bool = False

    @property
    def max_num_tokens(self):
        """Tokens of A and B together: `max_seq_length` less [CLS] and two [SEP]."""
        return self.max_seq_length - 3

    @property
    def num_prediction_slots(self):
        """Length of the `masked_lm_*` features (doubled by `do_permutation`, as in the original)."""
        return self.max_predictions_per_seq * (2 if self.do_permutation else 1)

    @property
    def max_budget(self):
        """The most predictions the masking budget allows in one full-length sequence."""
        return max(1, int(round(self.max_seq_length * self.masked_lm_prob)))

    def validate(self):
        """Raises `PretrainingDataError` for flag values the algorithm cannot work with.

        Returns a list of warnings (strings) for values that work but waste space.
        """
        if self.max_seq_length < 5:
            raise PretrainingDataError(
                f"max_seq_length={self.max_seq_length} is too small: [CLS] A [SEP] B [SEP] needs 3 special tokens "
                f"plus at least one token in each segment, so max_seq_length must be at least 5")
        if not 0.0 <= self.masked_lm_prob <= 1.0:
            raise PretrainingDataError(f"masked_lm_prob must be in [0, 1], got {self.masked_lm_prob}")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise PretrainingDataError(f"short_seq_prob must be in [0, 1], got {self.short_seq_prob}")
        if self.ngram < 1:
            raise PretrainingDataError(f"ngram must be at least 1, got {self.ngram}")
        if self.dupe_factor < 1:
            raise PretrainingDataError(f"dupe_factor must be at least 1, got {self.dupe_factor}")
        if self.max_predictions_per_seq < 1:
            raise PretrainingDataError(
                f"max_predictions_per_seq must be at least 1, got {self.max_predictions_per_seq}")
        if self.max_predictions_per_seq > self.max_num_tokens:
            raise PretrainingDataError(
                f"max_predictions_per_seq={self.max_predictions_per_seq} is larger than the masking budget can "
                f"ever allow: a sequence of max_seq_length={self.max_seq_length} has at most "
                f"{self.max_num_tokens} maskable tokens (and masked_lm_prob={self.masked_lm_prob} gives a budget of "
                f"at most {self.max_budget})")
        warnings = []
        if self.masked_lm_prob > 0 and self.max_predictions_per_seq > self.max_budget:
            warnings.append(
                f"max_predictions_per_seq={self.max_predictions_per_seq} exceeds the largest masking budget "
                f"round(max_seq_length * masked_lm_prob) = {self.max_budget}; the extra slots are always padding "
                f"(about max_seq_length * masked_lm_prob is the usual choice)")
        return warnings


@dataclasses.dataclass
class Stats:
    """Counters of a run (or of one shard); `merge` adds another's."""

    files: int = 0
    shards: int = 0
    text_bytes: int = 0
    documents: int = 0
    skipped_documents: int = 0
    sentences: int = 0
    tokens: int = 0
    instances: int = 0
    instance_tokens: int = 0
    sentence_order_positive: int = 0
    masked_positions: int = 0
    ngram_drawn: list = dataclasses.field(default_factory=list)
    ngram_accepted: list = dataclasses.field(default_factory=list)
    elapsed_seconds: float = 0.0

    def merge(self, other):
        for field in dataclasses.fields(self):
            mine, theirs = getattr(self, field.name), getattr(other, field.name)
            if isinstance(mine, list):
                if len(mine) < len(theirs):
                    mine.extend([0] * (len(theirs) - len(mine)))
                for i, value in enumerate(theirs):
                    mine[i] += value
            elif field.name != "elapsed_seconds":
                setattr(self, field.name, mine + theirs)

    def summary(self):
        """A few lines for the end of a run: instances, label balance, masking, throughput."""
        n = max(self.instances, 1)
        secs = max(self.elapsed_seconds, 1e-9)
        accepted = sum(self.ngram_accepted) or 1
        ngram_share = ", ".join(f"{i + 1}: {c / accepted:.1%}" for i, c in enumerate(self.ngram_accepted))
        return "\n".join([
            f"wrote {self.instances} instances from {self.documents} documents "
            f"({self.skipped_documents} skipped: fewer than 2 tokens), {self.files} files, {self.shards} shards",
            f"sentence-order label 1 (swapped/random B): {self.sentence_order_positive / n:.1%}; "
            f"mean tokens per instance {self.instance_tokens / n:.1f}",
            f"mean masked positions per instance {self.masked_positions / n:.2f}; masked n-gram sizes {ngram_share}",
            f"{self.elapsed_seconds:.1f} s: {self.instances / secs:.0f} instances/s, "
            f"{self.text_bytes / secs / 1e6:.2f} MB of text/s",
        ])


@dataclasses.dataclass(frozen=True)
class InputShard:
    """A byte range `[start, end)` of one input file that begins and ends at document boundaries."""

    index: int          # position among all shards of the run (the output order)
    file_index: int     # position of the file in the expanded input list
    shard_in_file: int  # position of the shard inside its file
    path: str
    start: int
    end: int


@dataclasses.dataclass(frozen=True)
class Progress:
    """What a progress callback receives while a run is going."""

    shards_done: int
    shards_total: int
    documents: int
    instances: int
    text_bytes_done: int
    text_bytes_total: int
    elapsed_seconds: float


# ----------------------------------------------------------------------------------------------------------------
# Seeds


def derive_seed(*parts):
    """A 64-bit seed from integers, the same on every machine and process (blake2b of their little-endian bytes)."""
    data = b"".join(int(p).to_bytes(8, "little", signed=True) for p in parts)
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


# Stream tags mixed into the seeds, so the per-shard order, buffer and per-document streams are independent.
_STREAM_DOCUMENT, _STREAM_ORDER, _STREAM_BUFFER = 0, 1, 2


# ----------------------------------------------------------------------------------------------------------------
# Input files


def _is_remote(path):
    return "://" in path


def expand_input_patterns(patterns, what="input"):
    """Files matching comma-separated glob patterns (str) or a list of patterns, sorted per pattern, de-duplicated.

    Raises `PretrainingDataError` when nothing matches at all, or when a pattern without wildcards names a
    directory (`what`, e.g. "--input_file", names it in the message). A glob's matches that are not files are
    skipped.
    """
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    patterns = [p.strip() for p in patterns if p and p.strip()]
    files, seen = [], set()
    for pattern in patterns:
        if _is_remote(pattern):
            import tensorflow as tf  # pylint: disable=import-outside-toplevel

            matches = sorted(tf.io.gfile.glob(pattern))
        else:
            if not glob.has_magic(pattern) and os.path.isdir(os.path.expanduser(pattern)):
                raise PretrainingDataError(
                    f"{what} {pattern} is a directory; give text files, or a glob such as "
                    f"{os.path.join(pattern, '*.txt')}")
            matches = sorted(p for p in glob.glob(os.path.expanduser(pattern)) if os.path.isfile(p))
        if not matches:
            logger.warning("input pattern %r matched no files", pattern)
        for match in matches:
            if match not in seen:
                seen.add(match)
                files.append(match)
    if not files:
        raise PretrainingDataError(f"no input files matched {','.join(patterns) or '(empty input_file)'!r}")
    return files


@contextlib.contextmanager
def _reading(path):
    """Turns an OS error while reading the input file `path` into a `PretrainingDataError` naming it."""
    try:
        yield
    except OSError as err:
        raise PretrainingDataError(f"cannot read input file {path!r}: {err.strerror or err}") from None


def _open_binary(path):
    if _is_remote(path):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")  # pylint: disable=consider-using-with


def _file_size(path):
    if _is_remote(path):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        return tf.io.gfile.stat(path).length
    return os.path.getsize(path)


def check_input_file(path, head=None):
    """Raises `PretrainingDataError` if `path` is empty, holds only whitespace, or looks binary.

    "Binary" means a NUL byte, or more than 5% of control bytes (other than tab/newline/CR/FF/VT), in the first
    64 KiB. Text that is not valid UTF-8 is accepted; invalid bytes are dropped when reading, as the original's
    `convert_to_unicode` does.
    """
    size = _file_size(path)
    if size == 0:
        raise PretrainingDataError(f"input file {path!r} is empty; expected text, one sentence per line")
    if head is None:
        with _open_binary(path) as f:
            head = f.read(_SNIFF_BYTES)
    if b"\x00" in head:
        raise PretrainingDataError(
            f"input file {path!r} looks binary (it contains NUL bytes); expected UTF-8 text, one sentence per line")
    controls = sum(head.count(bytes([c])) for c in range(32) if c not in (9, 10, 11, 12, 13)) + head.count(b"\x7f")
    if controls > 0.05 * len(head):
        raise PretrainingDataError(
            f"input file {path!r} looks binary ({controls} control bytes in the first {len(head)}); expected "
            f"UTF-8 text, one sentence per line")
    if size <= len(head) and not head.decode("utf-8", "ignore").split():
        raise PretrainingDataError(f"input file {path!r} contains no text (only whitespace)")


def _blank(line_bytes):
    # A whitespace-only line normalises to "" in both tokenizer modes, so it always ends a document.
    return not line_bytes.decode("utf-8", "ignore").split()


def plan_shards(files, shard_size_mb=DEFAULT_SHARD_SIZE_MB):
    """Checks each input file and cuts it into `InputShard`s of about `shard_size_mb` MB.

    A cut is placed at the first blank line at or after each multiple of the shard size, so every shard holds whole
    documents; the documents are the same as reading the file in one piece.
    """
    if shard_size_mb <= 0:
        raise PretrainingDataError(f"shard_size_mb must be positive, got {shard_size_mb}")
    shard_bytes = max(1, int(shard_size_mb * 1e6))
    shards = []
    for file_index, path in enumerate(files):
        with _reading(path), _open_binary(path) as f:
            size = _file_size(path)
            check_input_file(path, f.read(_SNIFF_BYTES))
            cuts = [0]
            while size - cuts[-1] > shard_bytes:
                f.seek(cuts[-1] + shard_bytes - 1)
                f.readline()  # finish the line holding the target byte; we are now at a line start
                cut = None
                while True:
                    line = f.readline()
                    if not line:
                        break
                    if _blank(line):
                        cut = f.tell()
                        break
                if cut is None or cut >= size:
                    break
                cuts.append(cut)
            cuts.append(size)
        for shard_in_file, (start, end) in enumerate(zip(cuts[:-1], cuts[1:])):
            shards.append(InputShard(len(shards), file_index, shard_in_file, path, start, end))
    return shards


# ----------------------------------------------------------------------------------------------------------------
# Tokenization tables


def sentencepiece_word_start(piece):
    """The original's SentencePiece word-start rule (see the module docstring); `piece` is a str."""
    if piece.startswith(("\u2581", "<")) or piece in _SP_PUNCTUATION:
        return True
    return any(ch.lower() not in _SP_WORD_CHARS for ch in piece)


def wordpiece_word_start(piece):
    """WordPiece: every piece starts a word except "##" continuations."""
    return not piece.startswith("##")


def _strip_accents(text):
    text = unicodedata.normalize("NFKD", text)
    return "".join(c for c in text if not unicodedata.combining(c))


def normalize_lines(text, lower):
    """`tokenization.preprocess_text(line, lower=lower)` for every "\\n"-separated line of `text`, done in bulk.

    Same result line by line (whitespace folding, NFKD without combining marks, lowercasing; LaTeX quotes kept,
    as the original's `create_pretraining_data.py` keeps them); the accent pass runs only on lines with non-ASCII
    characters, which is most of the speed-up.
    """
    lines = [" ".join(line.split()) for line in text.split("\n")]
    joined = "\n".join(lines)
    if not joined.isascii():
        joined = "\n".join(line if line.isascii() else _strip_accents(line) for line in joined.split("\n"))
    if lower:
        joined = joined.lower()
    return joined.split("\n")


class TokenTables:
    """Per-vocabulary lookup tables used by instance creation, built once from a `FullTokenizer`.

    Attributes:
      cls_id, sep_id, mask_id: ids of [CLS], [SEP], [MASK].
      vocab_ids: int64 [vocab_size], the ids in the order of `tokenizer.vocab` (the original draws random
        replacement tokens from that list).
      word_start: bool [max_id + 1]; `word_start[id]` is the word-start rule applied to the id's piece.
    """

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.is_sentencepiece = tokenizer.is_sentencepiece
        self.cls_id = tokenizer.token_id("[CLS]")
        self.sep_id = tokenizer.token_id("[SEP]")
        self.mask_id = tokenizer.token_id("[MASK]")
        self.vocab_ids = np.fromiter(tokenizer.vocab.values(), dtype=np.int64)
        self.vocab_size = len(self.vocab_ids)
        starts = sentencepiece_word_start if self.is_sentencepiece else wordpiece_word_start
        self.word_start = np.zeros(int(self.vocab_ids.max()) + 1, dtype=bool)
        for piece, idx in tokenizer.vocab.items():
            self.word_start[idx] = starts(piece)
        # Pieces hit by the original's digit-comma rule ("▁1,000," -> "▁1,000" ","); text with one is re-encoded
        # through `tokenization.encode_pieces`.
        self._comma_ids = np.zeros(len(self.word_start), dtype=bool)
        # SentencePiece threads for batch encoding (None: its default, all cores); worker processes use 1.
        self.num_threads = None
        if self.is_sentencepiece:
            for piece, idx in tokenizer.vocab.items():
                if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
                    self._comma_ids[idx] = True

    def lines_to_ids(self, text):
        """Token ids of every "\\n"-separated line of `text` (str).

        SentencePiece mode normalises all lines (`normalize_lines`) and encodes them in bulk; WordPiece mode strips
        each line and uses the tokenizer. Either way the ids equal `tokenizer.tokenize` line by line.

        Returns:
          `(ids, lengths)`: int32 [total] ids of all lines, concatenated, and per line its number of ids, or -1 for a
          line that is blank after normalisation (a document break).
        """
        if not self.is_sentencepiece:
            chunks, lengths = [], []
            for line in text.split("\n"):
                line = line.strip()
                if not line:
                    lengths.append(-1)
                    continue
                ids = self.tokenizer.convert_tokens_to_ids(self.tokenizer.tokenize(line))
                chunks.append(np.asarray(ids, dtype=np.int32))
                lengths.append(len(ids))
            return (np.concatenate(chunks) if chunks else np.zeros(0, np.int32)), lengths
        lines = normalize_lines(text, self.tokenizer.do_lower_case)
        nonblank = [line for line in lines if line]
        sp_model = self.tokenizer.sp_model
        encoded = sp_model.encode(nonblank, out_type=int, num_threads=self.num_threads)
        counts = [len(ids) for ids in encoded]
        ids = np.fromiter(itertools.chain.from_iterable(encoded), dtype=np.int32, count=sum(counts))
        hits = np.flatnonzero(self._comma_ids[ids]) if ids.size else ids
        if hits.size:
            # The few lines with a digit-comma piece go through the tokenizer's own rule.
            line_of = np.searchsorted(np.cumsum(counts), hits, side="right")
            for k in set(line_of.tolist()):
                pieces = tokenization.encode_pieces(sp_model, nonblank[k])
                encoded[k] = [sp_model.piece_to_id(p) for p in pieces]
            counts = [len(ids) for ids in encoded]
            ids = np.fromiter(itertools.chain.from_iterable(encoded), dtype=np.int32, count=sum(counts))
        it = iter(counts)
        return ids, [next(it) if line else -1 for line in lines]


# ----------------------------------------------------------------------------------------------------------------
# Documents


@dataclasses.dataclass
class ShardDocuments:
    """A shard's documents over one flat token array.

    Attributes:
      tokens: int32 [total tokens], all sentences of the shard, in order (skipped documents' tokens included).
      word_start: bool [total tokens], `TokenTables.word_start` of each token.
      bounds: per kept document, its sentence boundaries into `tokens` (a list of sentences + 1 ints).
      skipped: documents dropped for having fewer than two tokens.
      text_bytes: size of the shard's text.
    """

    tokens: np.ndarray
    word_start: np.ndarray
    bounds: list
    skipped: int
    text_bytes: int

    def document_tokens(self, index):
        b = self.bounds[index]
        return self.tokens[b[0]:b[-1]]


def read_shard_documents(shard, tables):
    """Reads, normalises and tokenizes one `InputShard` into `ShardDocuments`."""
    with _reading(shard.path), _open_binary(shard.path) as f:
        f.seek(shard.start)
        data = f.read(shard.end - shard.start)
    tokens, lengths = tables.lines_to_ids(data.decode("utf-8", "ignore"))
    bounds, skipped = [], 0
    doc = None
    offset = 0
    for n in lengths:
        if n < 0:
            if doc is not None:
                if doc[-1] - doc[0] >= 2:
                    bounds.append(doc)
                else:
                    skipped += 1
            doc = None
        elif n > 0:
            if doc is None:
                doc = [offset]
            offset += n
            doc.append(offset)
    if doc is not None:
        if doc[-1] - doc[0] >= 2:
            bounds.append(doc)
        else:
            skipped += 1
    return ShardDocuments(tokens=tokens, word_start=tables.word_start[tokens], bounds=bounds, skipped=skipped,
                          text_bytes=len(data))


# ----------------------------------------------------------------------------------------------------------------
# Instances


def randbelow(rng, n):
    """`rng.randint(0, n - 1)` for a `random.Random` and n >= 1, drawing exactly the same bits (CPython's
    `_randbelow_with_getrandbits`: k = n.bit_length() random bits, redrawn while >= n), without `randint`'s
    argument handling, which costs more than the draw in the instance and masking loops."""
    k = n.bit_length()
    r = rng.getrandbits(k)
    while r >= n:
        r = rng.getrandbits(k)
    return r


def _truncate_pair(a0, a1, b0, b1, max_num_tokens, rng):
    """The original's `truncate_seq_pair` on two ranges: drop from the longer range (B on ties), front or back.

    Which side loses each token is fixed by the lengths; only front-or-back is random, so the number of front
    removals on a side that loses k tokens is Binomial(k, 1/2) (the popcount of k random bits).
    """
    la, lb = a1 - a0, b1 - b0
    excess = la + lb - max_num_tokens
    if excess <= 0:
        return a0, a1, b0, b1
    cut_a = cut_b = 0
    if la > lb:
        cut_a = min(excess, la - lb)
    elif lb > la:
        cut_b = min(excess, lb - la)
    rest = excess - cut_a - cut_b
    cut_b += (rest + 1) // 2
    cut_a += rest // 2
    front_a = bin(rng.getrandbits(cut_a)).count("1") if cut_a else 0
    front_b = bin(rng.getrandbits(cut_b)).count("1") if cut_b else 0
    return a0 + front_a, a1 - (cut_a - front_a), b0 + front_b, b1 - (cut_b - front_b)


def document_instances(docs, doc_index, config, rng):
    """The original's `create_instances_from_document`, on token ranges.

    Returns a list of `(a0, a1, b0, b1, label)`: A is `docs.tokens[a0:a1]`, B is `docs.tokens[b0:b1]`, and label is
    1 when B was swapped before A or comes from a random document, else 0.
    """
    bounds = docs.bounds[doc_index]
    n_sent = len(bounds) - 1
    max_num_tokens = config.max_num_tokens
    target = max_num_tokens
    if rng.random() < config.short_seq_prob:
        target = 2 + randbelow(rng, max_num_tokens - 1)
    out = []
    chunk_start = 0
    length = 0
    i = 0
    while i < n_sent:
        length += bounds[i + 1] - bounds[i]
        if i == n_sent - 1 or length >= target:
            n_chunk = i - chunk_start + 1
            a_end = 1 + randbelow(rng, n_chunk - 1) if n_chunk >= 2 else 1
            a0, a1 = bounds[chunk_start], bounds[chunk_start + a_end]
            if n_chunk == 1 or (config.random_next_sentence and rng.random() < 0.5):
                label = 1
                target_b = target - (a1 - a0)
                for _ in range(10):
                    other = randbelow(rng, len(docs.bounds))
                    if other != doc_index:
                        break
                other_bounds = docs.bounds[other]
                j = randbelow(rng, len(other_bounds) - 1)
                b0 = other_bounds[j]
                b1 = other_bounds[j + 1]
                while b1 - b0 < target_b and j + 2 < len(other_bounds):
                    j += 1
                    b1 = other_bounds[j + 1]
                i -= n_chunk - a_end  # put the chunk's unused sentences back
            elif not config.random_next_sentence and rng.random() < 0.5:
                label = 1
                b0, b1 = a0, a1
                a0, a1 = bounds[chunk_start + a_end], bounds[i + 1]
            else:
                label = 0
                b0, b1 = bounds[chunk_start + a_end], bounds[i + 1]
            out.append((*_truncate_pair(a0, a1, b0, b1, max_num_tokens, rng), label))
            chunk_start = i + 1
            length = 0
        i += 1
    return out


def ngram_cdf(ngram, favor_shorter_ngram=True):
    """Cumulative p(n), n = 1..ngram, with p(n) proportional to 1/n (reversed if not `favor_shorter_ngram`)."""
    weights = [1.0 / n for n in range(1, ngram + 1)]
    if not favor_shorter_ngram:
        weights.reverse()
    total = sum(weights)
    cdf, acc = [], 0.0
    for w in weights:
        acc += w / total
        cdf.append(acc)
    cdf[-1] = 1.0
    return cdf


def choose_ngrams(group_starts, budget, cdf, rng, covered=None, drawn=None, accepted=None):
    """The original's n-gram selection over whole-word groups.

    Words are visited in a uniformly random order (a lazy Fisher-Yates shuffle, drawn only as far as needed). At
    each, n is drawn from `cdf`; the n-gram (fewer words at the end of the sequence) is shortened while it would
    overflow the budget; it is skipped if it still overflows or touches a word already taken.

    Args:
      group_starts: list of W + 1 ints; word w spans candidates `[group_starts[w], group_starts[w + 1])`.
      budget: most candidates to choose.
      cdf: from `ngram_cdf`.
      rng: a `random.Random`.
      covered: optional bytearray [W] of words already taken (updated in place).
      drawn, accepted: optional lists [ngram] counting the drawn n and the accepted n-gram sizes (in words).

    Returns:
      The chosen candidate indices, in the order chosen (at most `budget`).
    """
    n_words = len(group_starts) - 1
    if covered is None:
        covered = bytearray(n_words)
    drawn = drawn if drawn is not None else [0] * len(cdf)
    accepted = accepted if accepted is not None else [0] * len(cdf)
    rand = rng.random
    order = list(range(n_words))
    chosen = []
    taken = 0
    t = 0
    # The hot loop of the whole tool (about 10 visits per instance): kept to plain local operations.
    while taken < budget and t < n_words:
        j = t + int(rand() * (n_words - t))
        start = order[j]
        order[j] = order[t]
        t += 1
        n = bisect.bisect_right(cdf, rand()) + 1  # the first n with u < cdf[n - 1]; cdf[-1] is 1.0
        drawn[n - 1] += 1
        first = group_starts[start]
        end = start + n
        if end > n_words:
            end = n_words
        left = budget - taken
        size = group_starts[end] - first
        while size > left and end > start + 1:
            end -= 1
            size = group_starts[end] - first
        if size > left:
            continue
        if end == start + 1:
            if covered[start]:
                continue
            covered[start] = 1
        else:
            if covered.find(1, start, end) >= 0:
                continue
            covered[start:end] = b"\x01" * (end - start)
        chosen.extend(range(first, first + size))
        taken += size
        accepted[end - start - 1] += 1
    return chosen


KEEP = -1  # an output id meaning "the original token stays" (resolved when the features are built)


def mask_instance(docs, instance, config, tables, rng, cdf, drawn=None, accepted=None):
    """Masked-LM positions and what goes there, for one instance, as the original's `create_masked_lm_predictions`.

    Returns:
      `(positions, outputs)`: sorted positions in `[CLS] A [SEP] B [SEP]`, and per position the id placed there:
      `tables.mask_id` (80%), `KEEP` for the original token (10%), or a random vocabulary id (10%); with
      `do_permutation` also the permuted positions with the id moved there. The labels are the original ids.
    """
    a0, a1, b0, b1, _ = instance
    la = a1 - a0
    n_cand = la + b1 - b0
    if config.masked_lm_prob == 0:
        return [], []
    cand_pos = None  # candidate index -> offset in A + B, when some pieces are not candidates
    if config.do_whole_word_mask:
        starts = np.concatenate((docs.word_start[a0:a1], docs.word_start[b0:b1]))
        if not tables.is_sentencepiece and not (starts[0] and (la == n_cand or starts[la])):
            # WordPiece: a segment that begins with "##" pieces lost their word's head to truncation. Those
            # orphaned pieces are not candidates: they would start a masked span on a "##" piece (start of A) or
            # join the last word of A across [SEP] (start of B).
            keep = np.ones(n_cand, dtype=bool)
            for lo, hi in ((0, la), (la, n_cand)):
                heads = np.flatnonzero(starts[lo:hi])
                keep[lo:lo + (int(heads[0]) if heads.size else hi - lo)] = False
            cand_pos = np.flatnonzero(keep)
            starts = starts[cand_pos]
        group_starts = starts.nonzero()[0].tolist()
        if starts.size and (not group_starts or group_starts[0]):
            group_starts.insert(0, 0)  # the first candidate always starts a group
        group_starts.append(starts.size)
    else:
        group_starts = list(range(n_cand + 1))
    budget = min(config.max_predictions_per_seq, max(1, int(round((n_cand + 3) * config.masked_lm_prob))))
    covered = bytearray(len(group_starts) - 1)
    chosen = choose_ngrams(group_starts, budget, cdf, rng, covered, drawn, accepted)
    if cand_pos is not None:
        chosen = cand_pos[chosen].tolist()
    rand = rng.random
    mask_id = tables.mask_id
    outputs = {}
    for c in chosen:
        if rand() < 0.8:
            outputs[c] = mask_id
        elif rand() < 0.5:
            outputs[c] = KEEP
        else:
            outputs[c] = int(tables.vocab_ids[randbelow(rng, tables.vocab_size)])
    if config.do_permutation:
        tokens = docs.tokens
        selected = choose_ngrams(group_starts, budget, cdf, rng, covered)
        selected = sorted(cand_pos[selected].tolist() if cand_pos is not None else selected)
        targets = list(selected)
        rng.shuffle(targets)
        for src, tgt in zip(selected, targets):
            outputs[src] = int(tokens[a0 + tgt] if tgt < la else tokens[b0 + tgt - la])
    order = sorted(outputs)
    return [c + 1 if c < la else c + 2 for c in order], [outputs[c] for c in order]


# ----------------------------------------------------------------------------------------------------------------
# Serialization: a numpy encoder for tf.train.Example with int64/float features


_VARINT_CACHE = {}


def _varint(n):
    cached = _VARINT_CACHE.get(n)
    if cached is not None:
        return cached
    out = bytearray()
    value = n
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    out = bytes(out)
    if n < 1 << 16:
        _VARINT_CACHE[n] = out
    return out


def _varint_rows(matrix):
    """Protobuf varints of a non-negative int matrix [N, K]: (all bytes row after row, row offsets [N + 1])."""
    n_rows = matrix.shape[0]
    top = int(matrix.max()) if matrix.size else 0
    if matrix.size and matrix.dtype.kind == "i" and int(matrix.min()) < 0:
        raise ValueError("negative values cannot be encoded by this serializer")
    if top < 0x80:
        data = np.ascontiguousarray(matrix, dtype=np.uint8)
        return data.tobytes(), np.arange(n_rows + 1, dtype=np.int64) * matrix.shape[1]
    width = (top.bit_length() + 6) // 7
    values = matrix.astype(np.uint32 if top < 1 << 32 else np.uint64)
    more = [values >= (1 << (7 * k)) for k in range(1, width)]  # more[k - 1]: the value has a byte k
    out = np.empty(matrix.shape + (width,), dtype=np.uint8)
    keep = np.empty(matrix.shape + (width,), dtype=bool)
    keep[..., 0] = True
    for k in range(width):
        low = (values >> (7 * k)) & 0x7F
        if k + 1 < width:
            out[..., k] = low | (more[k].view(np.uint8) << 7)  # continuation bit
            keep[..., k + 1] = more[k]
        else:
            out[..., k] = low
    lengths = matrix.shape[1] + sum(m.sum(axis=1, dtype=np.int64) for m in more)
    return out.reshape(-1)[keep.reshape(-1)].tobytes(), np.concatenate(([0], np.cumsum(lengths)))


def encode_examples(features):
    """Serializes N `tf.train.Example`s from a dict of 2-D arrays, without TensorFlow.

    Args:
      features: dict name -> array [N, K]; integer arrays (non-negative) become `int64_list`, float arrays
        `float_list`.

    Returns:
      A list of N `bytes`, each a serialized `tf.train.Example`, byte for byte what protobuf's
      `SerializeToString(deterministic=True)` gives for the same example (features sorted by name, packed values).
    """
    encoded = []
    n_rows = None
    for name, array in sorted(features.items()):
        array = np.asarray(array)
        if array.ndim != 2:
            raise ValueError(f"feature {name!r} must be 2-D [N, K], got shape {array.shape}")
        n_rows = array.shape[0] if n_rows is None else n_rows
        if array.shape[0] != n_rows:
            raise ValueError(f"feature {name!r} has {array.shape[0]} rows, expected {n_rows}")
        key = name.encode("utf-8")
        if np.issubdtype(array.dtype, np.floating):
            data = array.astype("<f4").tobytes()
            offsets = np.arange(n_rows + 1, dtype=np.int64) * (4 * array.shape[1])
            kind_tag = b"\x12"  # Feature.float_list
        else:
            data, offsets = _varint_rows(array)
            kind_tag = b"\x1a"  # Feature.int64_list
        encoded.append((b"\x0a" + _varint(len(key)) + key + b"\x12", kind_tag, data, offsets.tolist(), {}))
    records = []
    for row in range(n_rows or 0):
        parts = []
        body = 0
        for key_header, kind_tag, data, offsets, prefixes in encoded:
            lo, hi = offsets[row], offsets[row + 1]
            size = hi - lo
            prefix = prefixes.get(size)
            if prefix is None:
                # Everything of this feature's map entry before its packed values, for values of `size` bytes.
                values_header = b"\x0a" + _varint(size) if size else b""
                feature_len = len(values_header) + size
                feature_header = kind_tag + _varint(feature_len) + values_header
                entry_len = len(key_header) + len(_varint(len(feature_header) + size)) + len(feature_header) + size
                prefix = (b"\x0a" + _varint(entry_len) + key_header + _varint(len(feature_header) + size)
                          + feature_header)
                prefixes[size] = prefix
            parts.append(prefix)
            parts.append(data[lo:hi])
            body += len(prefix) + size
        records.append(b"\x0a" + _varint(body) + b"".join(parts))
    return records


def instance_features(docs, instances, masks, config, tables):
    """The padded feature arrays of a batch of instances (see `FEATURE_ORDER`).

    Args:
      instances: list of `(a0, a1, b0, b1, label)`.
      masks: list of `(positions, outputs)` from `mask_instance`, one per instance.

    Returns:
      dict name -> array: int32 [N, max_seq_length] `input_ids`, uint8 [N, max_seq_length] `input_mask`,
      `segment_ids`, `token_boundary`; int32 [N, P] `masked_lm_positions`, `masked_lm_ids` and float32 [N, P]
      `masked_lm_weights` (P = `config.num_prediction_slots`); int32 [N, 1] `next_sentence_labels`. Padding is zero
      everywhere. (Narrow types: the serializer writes every integer feature as int64, as the original.)
    """
    n_rows, seq_len, slots = len(instances), config.max_seq_length, config.num_prediction_slots
    spans = np.asarray(instances, dtype=np.int64).reshape(n_rows, 5)
    a0, a1, b0, b1, label = (spans[:, k:k + 1] for k in range(5))
    la, lb = a1 - a0, b1 - b0
    column = np.arange(seq_len, dtype=np.int64)[None, :]
    in_a = (column >= 1) & (column <= la)
    in_b = (column >= la + 2) & (column < la + 2 + lb)
    text = in_a | in_b
    source = np.where(in_a, a0 - 1 + column, np.where(in_b, b0 - la - 2 + column, 0))
    if docs.tokens.size:
        ids = np.where(text, docs.tokens[source], 0).astype(np.int32)
        boundary = (text & docs.word_start[source]).view(np.uint8)
    else:
        ids = np.zeros((n_rows, seq_len), np.int32)
        boundary = np.zeros((n_rows, seq_len), np.uint8)
    rows = np.arange(n_rows)
    sep_a, sep_b = (la + 1)[:, 0], (la + lb + 2)[:, 0]
    ids[:, 0] = tables.cls_id
    ids[rows, sep_a] = tables.sep_id
    ids[rows, sep_b] = tables.sep_id
    boundary[:, 0] = 1
    boundary[rows, sep_a] = 1
    boundary[rows, sep_b] = 1
    input_mask = (column <= sep_b[:, None]).view(np.uint8)
    segment_ids = ((column >= la + 2) & (column <= sep_b[:, None])).view(np.uint8)

    counts = np.fromiter((len(m[0]) for m in masks), dtype=np.int64, count=n_rows)
    mask_rows = np.repeat(rows, counts)
    mask_slots = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    mask_pos = np.fromiter(itertools.chain.from_iterable(m[0] for m in masks), dtype=np.int64, count=len(mask_rows))
    mask_out = np.fromiter(itertools.chain.from_iterable(m[1] for m in masks), dtype=np.int64, count=len(mask_rows))
    positions = np.zeros((n_rows, slots), dtype=np.int32)
    labels = np.zeros((n_rows, slots), dtype=np.int32)
    weights = np.zeros((n_rows, slots), dtype=np.float32)
    original = ids[mask_rows, mask_pos]
    positions[mask_rows, mask_slots] = mask_pos
    labels[mask_rows, mask_slots] = original
    weights[mask_rows, mask_slots] = 1.0
    ids[mask_rows, mask_pos] = np.where(mask_out == KEEP, original, mask_out)
    return {
        "input_ids": ids,
        "input_mask": input_mask,
        "segment_ids": segment_ids,
        "token_boundary": boundary,
        "masked_lm_positions": positions,
        "masked_lm_ids": labels,
        "masked_lm_weights": weights,
        "next_sentence_labels": label.copy(),
    }


# ----------------------------------------------------------------------------------------------------------------
# One shard, start to finish


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
    order = np.random.default_rng(derive_seed(*key, _STREAM_ORDER)).permutation(config.dupe_factor * n_docs)
    buffer = _ShuffleBuffer(SHUFFLE_BUFFER_RECORDS, random.Random(derive_seed(*key, _STREAM_BUFFER)))
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
        rng = random.Random(derive_seed(*key, _STREAM_DOCUMENT, doc, dupe))
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


# ----------------------------------------------------------------------------------------------------------------
# Output files


def output_shard_paths(output_dir, num_shards, prefix="pretraining"):
    """`num_shards` output paths in `output_dir`: `{prefix}-00000-of-00004.tfrecord`, ..."""
    if num_shards < 1:
        raise PretrainingDataError(f"num_output_shards must be at least 1, got {num_shards}")
    return [os.path.join(output_dir, f"{prefix}-{i:05d}-of-{num_shards:05d}.tfrecord") for i in range(num_shards)]


def _gfile():
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf.io.gfile


# Local outputs are written without TensorFlow (its import costs seconds and hundreds of MB); remote ones use gfile.
def _exists(path):
    return _gfile().exists(path) if _is_remote(path) else os.path.exists(path)


def _makedirs(path):
    if _is_remote(path):
        _gfile().makedirs(path)
    else:
        os.makedirs(path, exist_ok=True)


def _rename(source, target):
    if _is_remote(target):
        _gfile().rename(source, target, overwrite=True)
    else:
        os.replace(source, target)


def _remove(path):
    if _is_remote(path):
        _gfile().remove(path)
    else:
        os.remove(path)


class _RemoteRecordWriter:
    """`tf.io.TFRecordWriter` with `LocalRecordWriter`'s `write_frame` and `append_file` (remote outputs)."""

    def __init__(self, path):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        self._writer = tf.io.TFRecordWriter(path)

    def write(self, record):
        self._writer.write(record)

    def write_frame(self, frame):
        self._writer.write(frame[12:-4])

    def append_file(self, path):
        for frame in tfrecord_writer.read_frames(path):
            self.write_frame(frame)

    def close(self):
        self._writer.close()


def _record_writer(path):
    """A TFRecord writer: `tfrecord_writer.LocalRecordWriter` for a local file (no TensorFlow), else through TF."""
    return _RemoteRecordWriter(path) if _is_remote(path) else tfrecord_writer.LocalRecordWriter(path)


def _output_errors():
    """The exceptions an output write can fail with: OS errors, and TensorFlow's when it is loaded (remote)."""
    tf = sys.modules.get("tensorflow")
    op_error = getattr(getattr(tf, "errors", None), "OpError", None)
    return (OSError, op_error) if isinstance(op_error, type) else (OSError,)


def _strerror(err):
    if isinstance(err, OSError):
        return err.strerror or str(err)
    return getattr(err, "message", None) or str(err)


class AtomicRecordWriters:
    """TFRecord writers over several files, round-robin, that appear under their names only on `commit()`.

    Each file is written under a temporary name in its directory's staging folder (`fileio.staging_path`), so a
    killed run leaves nothing that a glob over the outputs matches; `commit()` closes and renames them, `abort()`
    closes and deletes them (and the directories this object created). Used as a context manager, an exception
    aborts. An output path that is a directory, or whose parent is a file, is refused at once; an OS error while
    writing (a full disk) is raised as `fileio.OutputError` naming the output, as `what` (e.g. "--output_file")
    and its path, with every temporary removed.
    """

    def __init__(self, paths, what="output"):
        if not paths:
            raise PretrainingDataError("no output files given")
        if len({p if _is_remote(p) else os.path.realpath(p) for p in paths}) != len(paths):
            raise PretrainingDataError(f"output files repeat a name: {paths}")
        self.paths = list(paths)
        self.what = what
        self.temp_paths = []
        self.counts = [0] * len(self.paths)
        self._writers = []
        self._next = 0
        self._created_dirs = []  # local directories this object made (deepest last), removed again on abort
        try:
            for path in self.paths:
                self._check_target(path)
            for path in self.paths:
                with self.writing(path):
                    parent = os.path.dirname(path)
                    self._makedirs(parent)
                    if not _is_remote(path):
                        fileio.remove_stale_partials(parent or ".")
                    self.temp_paths.append(fileio.staging_path(path))
                    self._writers.append(_record_writer(self.temp_paths[-1]))
        except BaseException:
            self.abort()
            raise

    def error(self, path, message):
        return fileio.OutputError(f"cannot write {self.what} {path}: {message}")

    @contextlib.contextmanager
    def writing(self, path):
        """Re-raises an OS error (or TensorFlow's, remote) as `OutputError` naming `path`."""
        try:
            yield
        except _output_errors() as err:
            raise self.error(path, _strerror(err)) from None

    def _check_target(self, path):
        if _is_remote(path):
            return
        if os.path.isdir(path):
            raise self.error(path, "it is a directory")
        parent = os.path.dirname(os.path.abspath(path))
        while parent and not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if parent and not os.path.isdir(parent):
            raise self.error(path, f"{parent} is not a directory")

    def _makedirs(self, parent):
        if not parent or _exists(parent):
            return
        if _is_remote(parent):
            _makedirs(parent)
            return
        missing = []
        directory = os.path.abspath(parent)
        while not os.path.exists(directory):
            missing.append(directory)
            directory = os.path.dirname(directory)
        for directory in reversed(missing):
            try:
                os.mkdir(directory)
            except FileExistsError:
                continue
            self._created_dirs.append(directory)

    def write(self, record):
        with self.writing(self.paths[self._next]):
            self._writers[self._next].write(record)
        self.counts[self._next] += 1
        self._next = (self._next + 1) % len(self._writers)

    def append_framed(self, path, count):
        """Appends the `count` records of a TFRecord file (a worker's), round-robin as `write` would: with one
        output the file is copied whole; with several, frame by frame (their checksums are not recomputed)."""
        k = len(self._writers)
        if k == 1:
            with self.writing(self.paths[0]):
                self._writers[0].append_file(path)
        else:
            for i, frame in enumerate(tfrecord_writer.read_frames(path)):
                index = (self._next + i) % k
                with self.writing(self.paths[index]):
                    self._writers[index].write_frame(frame)
        for r in range(min(k, count)):
            self.counts[(self._next + r) % k] += (count - r + k - 1) // k
        self._next = (self._next + count) % k

    def commit(self):
        try:
            writers, self._writers = self._writers, []
            for writer, path in zip(writers, self.paths):
                with self.writing(path):
                    writer.close()
            for temp, path in zip(self.temp_paths, self.paths):
                with self.writing(path):
                    _rename(temp, path)
        except BaseException:
            self._writers = writers
            self.abort()
            raise
        self._remove_sidecars()

    def abort(self):
        for writer in self._writers:
            try:
                writer.close()
            except Exception:  # pylint: disable=broad-except
                pass
        self._writers = []
        for temp in self.temp_paths:
            try:
                if _exists(temp):
                    _remove(temp)
            except Exception:  # pylint: disable=broad-except
                logger.warning("could not remove temporary file %s", temp)
        self._remove_sidecars()
        for directory in reversed(self._created_dirs):
            try:
                os.rmdir(directory)
            except OSError:
                pass
        self._created_dirs = []

    def _remove_sidecars(self):
        for temp in self.temp_paths:
            if _is_remote(temp):
                continue
            try:
                os.rmdir(os.path.dirname(temp))
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.commit()
        else:
            self.abort()
        return False


# ----------------------------------------------------------------------------------------------------------------
# Worker processes

_WORKER = {}
# What stops a run. The scripts turn SIGTERM into KeyboardInterrupt in the parent (`albert_tf.cli`); a worker must
# not inherit that: the pool's `terminate()` stops workers with SIGTERM, which must end them quietly (not with a
# KeyboardInterrupt traceback each), and Ctrl-C is for the parent, which then stops the pool. The signals are
# blocked while the pool forks and unblocked by each worker once its own handlers are set.
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _block_stop_signals():
    if not hasattr(signal, "pthread_sigmask"):
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)


def _restore_signals(mask):
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


class _WorkerWriteError(Exception):
    """A worker could not write its temporary file; the message is the OS's reason (the parent names the output)."""


def _worker_init(tokenizer_args, config, temp_dir):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    if _WORKER.get("tokenizer_args") != tokenizer_args:  # not inherited through fork: build it here
        _WORKER["tables"] = TokenTables(tokenization.FullTokenizer(**tokenizer_args))
        _WORKER["tokenizer_args"] = tokenizer_args
    _WORKER["config"] = config
    _WORKER["temp_dir"] = temp_dir
    _WORKER["tables"].num_threads = 1  # one process per core already


def _worker_run(shard):
    """Writes one shard's records, TFRecord-framed, to a temporary file; returns (path, records, Stats)."""
    config = _WORKER["config"]
    stats = Stats(ngram_drawn=[0] * config.ngram, ngram_accepted=[0] * config.ngram)
    path = os.path.join(_WORKER["temp_dir"], f"shard-{shard.index:07d}.tfrecord")
    count = 0
    try:  # reading errors are PretrainingDataErrors already: an OSError here is the temporary file's
        writer = tfrecord_writer.LocalRecordWriter(path + ".part")
        try:
            for record in shard_records(shard, config, _WORKER["tables"], stats):
                writer.write(record)
                count += 1
        finally:
            writer.close()
        os.replace(path + ".part", path)
    except OSError as err:
        raise _WorkerWriteError(err.strerror or str(err)) from None
    return path, count, stats


# ----------------------------------------------------------------------------------------------------------------
# The whole run


class _Run:
    """Counters of a run in progress, and its progress reports."""

    def __init__(self, shards, config, callback, every):
        self.started = time.monotonic()
        self.shards = shards
        self.total_bytes = sum(s.end - s.start for s in shards)
        self.callback = callback
        self.every = every
        self.stats = Stats(ngram_drawn=[0] * config.ngram, ngram_accepted=[0] * config.ngram)
        self.written = 0
        self.shards_done = 0
        self.bytes_done = 0
        self.current = None  # Stats of the shard being written, in-process

    def records_written(self, n=1):
        before, self.written = self.written, self.written + n
        if self.written // self.every > before // self.every:
            self.report()

    def shard_done(self, shard, shard_stats):
        self.stats.merge(shard_stats)
        self.current = None
        self.shards_done += 1
        self.bytes_done += shard.end - shard.start
        self.report()

    def report(self):
        if self.callback is None:
            return
        documents = self.stats.documents + (self.current.documents if self.current is not None else 0)
        self.callback(Progress(self.shards_done, len(self.shards), documents, self.written, self.bytes_done,
                               self.total_bytes, time.monotonic() - self.started))


def create_pretraining_data(input_files, output_files, *, spm_model_file=None, vocab_file=None, do_lower_case=True,
                            config=None, num_workers=1, shard_size_mb=DEFAULT_SHARD_SIZE_MB, progress=None,
                            progress_every=2048, input_what="file", output_what="output"):
    """Turns text files into pretraining TFRecords; returns the run's `Stats`.

    Args:
      input_files: comma-separated glob patterns (str) or a list of patterns.
      output_files: a list of paths (or a comma-separated str); records are spread round-robin over them.
      spm_model_file, vocab_file, do_lower_case: the tokenizer, as `tokenization.FullTokenizer` takes them.
      config: a `PretrainingConfig` (the original's flags); defaults to the original's defaults.
      num_workers: processes that build records (0 or None: one per CPU). The output does not depend on it.
      shard_size_mb: size of the input shards (see module docstring); part of what determines the output.
      progress: optional callable taking a `Progress`, called after every shard and every `progress_every` records.
      input_what, output_what: how messages name the inputs and outputs (the scripts: their flags, e.g.
        "--input_file" and "--output_file").

    Raises:
      PretrainingDataError (a ValueError) for bad flags, no matching / empty / binary / unreadable input, an input
      directory, or no instances; tokenization.TokenizerError (a ValueError) for a missing or unreadable tokenizer
      file; `errors.UsageError` for an output that is one of the inputs (however spelled: links, relative paths),
      before anything is written; `fileio.OutputError` for an output that is a directory (or under a file), or an
      OS error while writing (a full disk), naming the output. Nothing is left at the output paths (nor temporary
      files, nor directories made for them) when an error is raised, and nothing there is replaced.
    """
    config = config or PretrainingConfig()
    for warning in config.validate():
        logger.warning("%s", warning)
    if isinstance(output_files, str):
        output_files = [p for p in output_files.split(",") if p]
    if not output_files:
        raise PretrainingDataError("no output files given")
    tokenizer_args = {"vocab_file": vocab_file, "do_lower_case": do_lower_case, "spm_model_file": spm_model_file}
    tables = TokenTables(tokenization.FullTokenizer(**tokenizer_args))
    files = expand_input_patterns(input_files, input_what)
    fileio.refuse_inputs_as_outputs(
        [(output_what, path) for path in output_files],
        [(input_what, path) for path in files] + [("--spm_model_file", spm_model_file), ("--vocab_file", vocab_file)])
    shards = plan_shards(files, shard_size_mb)
    if num_workers is None or num_workers <= 0:
        num_workers = os.cpu_count() or 1
    num_workers = min(num_workers, len(shards))
    if num_workers > 1 and any(_is_remote(f) for f in files):
        logger.warning("remote input files are read in a single process")
        num_workers = 1
    run = _Run(shards, config, progress, progress_every)
    with AtomicRecordWriters(output_files, output_what) as writers:
        if num_workers == 1:
            for shard in shards:
                run.current = Stats(ngram_drawn=[0] * config.ngram, ngram_accepted=[0] * config.ngram)
                for record in shard_records(shard, config, tables, run.current):
                    writers.write(record)
                    run.records_written()
                run.shard_done(shard, run.current)
        else:
            _run_pool(run, writers, tables, tokenizer_args, config, num_workers)
        if run.stats.instances == 0:
            raise PretrainingDataError(
                f"no training instances were created from {len(files)} input file(s) "
                f"({', '.join(files[:3])}{', ...' if len(files) > 3 else ''}): {run.stats.documents} "
                f"documents with at least 2 tokens, {run.stats.skipped_documents} shorter ones skipped")
    stats = run.stats
    stats.files = len(files)
    stats.elapsed_seconds = time.monotonic() - run.started
    return stats


def _run_pool(run, writers, tables, tokenizer_args, config, num_workers):
    """Shards in worker processes, each to temporary files of framed records; appended to `writers` in shard
    order (the parent copies bytes: the workers build, serialize and checksum the records)."""
    import multiprocessing  # pylint: disable=import-outside-toplevel

    first = writers.paths[0]
    # Beside the outputs (same disk) but in their directory's sidecar, where no glob over the outputs reaches.
    local_parent = None if _is_remote(first) else fileio.sidecar_dir(os.path.dirname(os.path.abspath(first)))
    with writers.writing(first):
        if local_parent:
            os.makedirs(local_parent, exist_ok=True)
        temp_dir = tempfile.mkdtemp(prefix=f".workers.partial-{os.getpid()}-", dir=local_parent)
    # Forked workers inherit the tokenizer tables (no reload); they never use TensorFlow, so forking a parent that
    # imported it is safe. Elsewhere (no fork) they are spawned and build the tables in `_worker_init`.
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    _WORKER["tables"] = tables
    _WORKER["tokenizer_args"] = tokenizer_args
    pool = None
    try:
        mask = _block_stop_signals()
        try:
            pool = context.Pool(num_workers, initializer=_worker_init, initargs=(tokenizer_args, config, temp_dir))
        finally:
            _restore_signals(mask)
        for shard, (path, count, shard_stats) in zip(run.shards, pool.imap(_worker_run, run.shards, chunksize=1)):
            writers.append_framed(path, count)
            os.remove(path)
            run.records_written(count)
            run.shard_done(shard, shard_stats)
        pool.close()
        pool.join()
    except BaseException as err:
        if pool is not None:
            pool.terminate()
            pool.join()
        if isinstance(err, _WorkerWriteError):
            raise writers.error(first, f"{err} (writing the worker processes' temporary files)") from None
        raise
    finally:
        _WORKER.clear()
        shutil.rmtree(temp_dir, ignore_errors=True)
