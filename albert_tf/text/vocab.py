"""Vocabulary training: a SentencePiece model with the original release's recipe, or a WordPiece vocabulary.

The corpus is read in one streaming pass; a seeded reservoir keeps a uniform sample of at most
`input_sentence_size` sentences (memory is bounded by the sample, never by the corpus). SentencePiece is trained
in-process on the sample after the tokenizer's own `preprocess_text`, so the pieces are learned on the text the
tokenizer will see; WordPiece goes through tensorflow-text's `bert_vocab_from_dataset`. Outputs are written
atomically through `albert_tf.fileio`. The recipe, its flags and what differs from `spm_train`: docs/vocabulary.md.
"""

import bz2
import dataclasses
import gzip
import io
import logging
import os
import random
import re
import sys
import tempfile
import threading
import time

from albert_tf import fileio
from albert_tf.errors import DataError, UsageError
from albert_tf.progress import ProgressLine, time_left
from albert_tf.settings import POSITIVE, Range, setting
from albert_tf.text.tokenization import SPECIAL_TOKENS, preprocess_text

logger = logging.getLogger(__name__)

# The original's recipe (its README's spm_train command, and the trainer_spec stored in 30k-clean.model).
DEFAULT_VOCAB_SIZE = 30000
DEFAULT_CHARACTER_COVERAGE = 0.99995
DEFAULT_INPUT_SENTENCE_SIZE = 10_000_000
DEFAULT_MODEL_TYPE = "unigram"
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, -1, -1
CONTROL_SYMBOLS = ("[CLS]", "[SEP]", "[MASK]")
USER_DEFINED_SYMBOLS = ("(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac")
# SentencePiece's own defaults, which 30k-clean.model records too.
DEFAULT_NUM_THREADS = 16
DEFAULT_MAX_SENTENCE_LENGTH = 4192
DEFAULT_MAX_SENTENCEPIECE_LENGTH = 16
DEFAULT_SEED = 12345

SENTENCEPIECE_TYPES = ("unigram", "bpe", "char", "word")
MODEL_TYPES = SENTENCEPIECE_TYPES + ("wordpiece",)
# WordPiece: the special tokens take the ids the SentencePiece layout gives them (pad 0, unk 1, CLS 2, ...).
WORDPIECE_RESERVED = ("[PAD]", "[UNK]") + CONTROL_SYMBOLS

_READ_BLOCK = 1 << 20


# ----------------------------------------------------------------- inputs
def _size(path):
    if fileio.is_remote(path):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        return tf.io.gfile.stat(path).length
    return os.path.getsize(path)


def _open_raw(path):
    if fileio.is_remote(path):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")  # pylint: disable=consider-using-with


def _decompressed(path, raw):
    if path.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if path.endswith(".bz2"):
        return bz2.BZ2File(raw, mode="rb")
    return raw


def read_lines(path, on_block=None):
    """The non-blank lines of a text file (`.gz` / `.bz2` decompressed), stripped, invalid UTF-8 bytes dropped.

    `on_block(bytes_read)` is called after each block with the bytes of the file (as stored) read so far. Raises
    `DataError` naming the file when it is binary or cannot be read or decompressed.
    """
    try:
        with _open_raw(path) as raw, _decompressed(path, raw) as f:
            rest, first = b"", True
            while True:
                block = f.read(_READ_BLOCK)
                if first and b"\x00" in block:
                    raise DataError(f"input file {path!r} looks binary (it contains NUL bytes); expected text, "
                                    "one sentence per line")
                first = False
                if not block:
                    break
                lines = (rest + block).split(b"\n")
                rest = lines.pop()
                for line in lines:
                    text = line.decode("utf-8", "ignore").strip()
                    if text:
                        yield text
                if on_block:
                    on_block(raw.tell())
            text = rest.decode("utf-8", "ignore").strip()
            if text:
                yield text
    except (OSError, EOFError, gzip.BadGzipFile) as err:
        raise DataError(f"cannot read input file {path!r}: {getattr(err, 'strerror', None) or err}") from None


# ----------------------------------------------------------------- sampling
class ReservoirSampler:
    """A uniform sample of at most `capacity` items of a stream of unknown length (Algorithm R), seeded.

    Holds `capacity` items at most; after `n` items each has been kept with probability `capacity / n`.
    """

    def __init__(self, capacity, seed=DEFAULT_SEED):
        if capacity <= 0:
            raise UsageError(f"the sample size must be positive, got {capacity}")
        self.capacity = int(capacity)
        self.items = []
        self.seen = 0
        self._rng = random.Random(seed)

    def add(self, item):
        self.seen += 1
        if len(self.items) < self.capacity:
            self.items.append(item)
        else:
            j = self._rng.randrange(self.seen)
            if j < self.capacity:
                self.items[j] = item

    def sample(self):
        """The kept items, shuffled (a reservoir that never filled up is otherwise in input order)."""
        items = list(self.items)
        self._rng.shuffle(items)
        return items


class Progress:
    """Logs `<stage>: <done>/<total> <unit> (<rate>/s), <extra>, about <n> s left` at most every `interval` s."""

    def __init__(self, stage, total, unit="MB", scale=1.0, interval=10.0):
        self.stage, self.total, self.unit, self.scale = stage, total, unit, scale
        self.start = time.monotonic()
        self.line = ProgressLine(interval)

    def update(self, done, extra="", force=False):
        elapsed = time.monotonic() - self.start
        if not self.line.due(elapsed, force):
            return
        secs = max(elapsed, 1e-9)
        eta = time_left(secs, done / self.total if self.total else 1.0)
        logger.info("%s: %.1f/%.1f %s (%.1f %s/s)%s%s", self.stage, done / self.scale, self.total / self.scale,
                    self.unit, done / self.scale / secs, self.unit, f", {extra}" if extra else "", eta)


@dataclasses.dataclass
class SampleStats:
    files: int = 0
    input_bytes: int = 0
    sentences_seen: int = 0
    sentences_sampled: int = 0
    seconds: float = 0.0


def sample_sentences(files, input_sentence_size, seed=DEFAULT_SEED, progress_interval=10.0):
    """A uniform, seeded sample of the non-blank lines of `files` (read once, streaming), shuffled; and its stats.

    Raises `DataError` when the files hold no sentence at all."""
    start = time.monotonic()
    sizes = [_size(p) for p in files]
    progress = Progress("reading input", sum(sizes), "MB", 1e6, progress_interval)
    sampler = ReservoirSampler(input_sentence_size, seed)
    before = 0
    for index, path in enumerate(files):
        def on_block(done, before=before, index=index):
            progress.update(before + done, f"file {index + 1}/{len(files)}, {sampler.seen} sentences")

        for line in read_lines(path, on_block):
            sampler.add(line)
        before += sizes[index]
    progress.update(before, f"{len(files)}/{len(files)} files, {sampler.seen} sentences", force=True)
    if not sampler.seen:
        raise DataError(f"the input files ({', '.join(files[:3])}{', ...' if len(files) > 3 else ''}) hold no "
                        "text; expected one sentence per line")
    sample = sampler.sample()
    stats = SampleStats(len(files), sum(sizes), sampler.seen, len(sample), time.monotonic() - start)
    return sample, stats


def preprocess_sentences(sentences, do_lower_case=True, progress_interval=10.0):
    """`preprocess_text` (the tokenizer's own normalisation, lowercasing with `do_lower_case`) of each sentence;
    sentences it leaves empty are dropped."""
    progress = Progress("preprocessing", len(sentences), "k sentences", 1e3, progress_interval)
    out = []
    for i, sentence in enumerate(sentences):
        text = preprocess_text(sentence, lower=do_lower_case)
        if text:
            out.append(text)
        if i % 4096 == 0:
            progress.update(i)
    return out


# ----------------------------------------------------------------- SentencePiece
@dataclasses.dataclass
class SentencePieceOptions:
    """The trainer settings, named as `spm_train` names them; the defaults are the original's recipe."""

    vocab_size: int = setting(DEFAULT_VOCAB_SIZE, "Vocabulary size (WordPiece: approximate).", bounds=Range(2))
    model_type: str = setting(DEFAULT_MODEL_TYPE, "SentencePiece algorithm, or wordpiece (BERT-style vocabulary, as "
                                                  "the Chinese models use).", choices=MODEL_TYPES)
    character_coverage: float = setting(DEFAULT_CHARACTER_COVERAGE,
                                        "Share of characters the model covers (SentencePiece).",
                                        bounds=Range(0, 1, low_open=True))
    pad_id: int = setting(PAD_ID, "Id of <pad> (SentencePiece; -1: none).")
    unk_id: int = setting(UNK_ID, "Id of <unk> (SentencePiece).")
    bos_id: int = setting(BOS_ID, "Id of <s> (SentencePiece; -1: none).")
    eos_id: int = setting(EOS_ID, "Id of </s> (SentencePiece; -1: none).")
    control_symbols: tuple = setting(CONTROL_SYMBOLS, "Control symbols, after <pad> and <unk>.", kind="list",
                                     flag_default=list(CONTROL_SYMBOLS))
    user_defined_symbols: tuple = setting(USER_DEFINED_SYMBOLS, "Pieces always kept whole (SentencePiece).",
                                          kind="list", flag_default=list(USER_DEFINED_SYMBOLS))
    num_threads: int = setting(DEFAULT_NUM_THREADS, "SentencePiece trainer threads.", bounds=POSITIVE)
    max_sentence_length: int = setting(DEFAULT_MAX_SENTENCE_LENGTH,
                                       "Longer sentences (in bytes) are skipped by SentencePiece.", bounds=POSITIVE)
    max_sentencepiece_length: int = setting(DEFAULT_MAX_SENTENCEPIECE_LENGTH, "Longest piece (SentencePiece).",
                                            bounds=POSITIVE)

    def trainer_kwargs(self):
        kwargs = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("control_symbols",
                                                                                   "user_defined_symbols")}
        for key in ("control_symbols", "user_defined_symbols"):
            values = [v for v in getattr(self, key) if v]
            if values:
                kwargs[key] = values
        return kwargs


_LOG_HEAD = re.compile(rb"^[IWEF]\d{4} ")


class _StderrToLog:
    """While active, what is written to the process's stderr (SentencePiece's C++ log) goes to a temporary file;
    a thread copies its log lines to the real stderr as they appear (its progress) and drops the multi-line dumps
    between them (the trainer settings, stored in the model anyway)."""

    def __init__(self):
        self.log = tempfile.TemporaryFile()
        self.pos, self.stop = 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.wait(0.5):
            self._copy()

    def _copy(self, final=False):
        data = os.pread(self.log.fileno(), 1 << 24, self.pos)
        if not final:
            data = data[:data.rfind(b"\n") + 1]
        self.pos += len(data)
        for line in data.splitlines(keepends=True):
            if _LOG_HEAD.match(line):
                os.write(self.stderr, line if line.endswith(b"\n") else line + b"\n")

    def __enter__(self):
        sys.stderr.flush()
        self.stderr = os.dup(2)
        os.dup2(self.log.fileno(), 2)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        os.dup2(self.stderr, 2)
        self._copy(final=True)
        os.close(self.stderr)
        self.log.close()


def _trainer_message(err):
    """SentencePiece's error without its source location (`INTERNAL: src/x.cc(12) [check] `), naming the flag."""
    text = re.sub(r"^\w+: \S+\(\d+\) (\[.*?\] )?", "", " ".join(str(err).split()))
    if "Vocabulary size too high" in text:
        text += " (--vocab_size: give more text or a smaller size)"
    return f"SentencePiece cannot train on this input: {text}"


def train_sentencepiece(sentences, options=None, seed=DEFAULT_SEED, record=None):
    """Trains a SentencePiece model on `sentences` (a list, already preprocessed) in-process; returns its
    serialized ModelProto (bytes). The same sentences, options and seed give the same bytes.

    `record` ({trainer_spec field: value}, e.g. the input patterns and sample size) is stored in the model's
    trainer_spec, as spm_train stores its flags. SentencePiece's log lines go to stderr as they appear.
    """
    import sentencepiece as spm  # pylint: disable=import-outside-toplevel
    from sentencepiece import sentencepiece_model_pb2  # pylint: disable=import-outside-toplevel

    options = options or SentencePieceOptions()
    if options.model_type not in SENTENCEPIECE_TYPES:
        raise UsageError(f"--model_type={options.model_type}: must be one of {', '.join(MODEL_TYPES)}")
    spm.set_random_generator_seed(seed)
    writer = io.BytesIO()
    try:
        with _StderrToLog():
            spm.SentencePieceTrainer.Train(
                sentence_iterator=iter(sentences), model_writer=writer,
                input_sentence_size=0, shuffle_input_sentence=False, **options.trainer_kwargs())
    except RuntimeError as err:
        raise DataError(_trainer_message(err)) from None
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(writer.getvalue())
    for key, value in (record or {}).items():
        if isinstance(value, (list, tuple)):
            del getattr(proto.trainer_spec, key)[:]
            getattr(proto.trainer_spec, key).extend(value)
        else:
            setattr(proto.trainer_spec, key, value)
    return proto.SerializeToString(deterministic=True)


def load_model_proto(model_bytes):
    from sentencepiece import sentencepiece_model_pb2  # pylint: disable=import-outside-toplevel

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model_bytes)
    return proto


def check_special_layout(model_bytes):
    """Raises `DataError` unless the first pieces are the original's `<pad> <unk> [CLS] [SEP] [MASK]`."""
    first = [p.piece for p in load_model_proto(model_bytes).pieces[:len(SPECIAL_TOKENS)]]
    if tuple(first) != SPECIAL_TOKENS:
        raise DataError(f"the trained model's first pieces are {first}, not the original's layout "
                        f"{list(SPECIAL_TOKENS)}; keep the default ids and control symbols")


def vocab_text(model_bytes):
    """The `.vocab` file spm_train writes beside the model: `piece<TAB>score` per line, in id order."""
    return "".join(f"{p.piece}\t{p.score:g}\n" for p in load_model_proto(model_bytes).pieces)


# ----------------------------------------------------------------- WordPiece
def train_wordpiece(sentences, vocab_size=DEFAULT_VOCAB_SIZE, do_lower_case=True, reserved=WORDPIECE_RESERVED,
                    progress_interval=10.0, learn_params=None):
    """A WordPiece vocabulary (a list of tokens, `reserved` first) learned from `sentences` (raw text: the
    BERT basic tokenizer, lowercasing with `do_lower_case`, runs inside) by tensorflow-text's
    `bert_vocab_from_dataset`. Its size is close to `vocab_size`, not exact (the learner searches a count
    threshold)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from tensorflow_text.tools.wordpiece_vocab import (  # pylint: disable=import-outside-toplevel
        bert_vocab_from_dataset as bert_vocab)

    progress = Progress("counting words", len(sentences), "k sentences", 1e3, progress_interval)

    def generate():
        for i, sentence in enumerate(sentences):
            if i % 4096 == 0:
                progress.update(i)
            yield sentence

    dataset = tf.data.Dataset.from_generator(generate, output_signature=tf.TensorSpec((), tf.string)).batch(1024)
    try:
        tokens = bert_vocab.bert_vocab_from_dataset(
            dataset, vocab_size=vocab_size, reserved_tokens=list(reserved),
            bert_tokenizer_params={"lower_case": bool(do_lower_case)}, learn_params=learn_params or {})
    except StopIteration:  # the learner's word count found no word at all
        tokens = []
    if len(tokens) <= len(reserved):
        raise DataError("the input holds too little text to learn a WordPiece vocabulary")
    return tokens


# ----------------------------------------------------------------- outputs
def output_paths(model_prefix, model_type):
    """{what: path} of the files written for `model_prefix`: `.model` and `.vocab` (SentencePiece), or `.txt`
    (WordPiece)."""
    if model_type == "wordpiece":
        return {"vocab": model_prefix + ".txt"}
    return {"model": model_prefix + ".model", "vocab": model_prefix + ".vocab"}


@dataclasses.dataclass
class VocabResult:
    paths: dict
    size: int
    sample: SampleStats
    seconds: float = 0.0

    def summary(self):
        s = self.sample
        return (f"wrote {', '.join(self.paths.values())}: {self.size} pieces, learned from {s.sentences_sampled} "
                f"of {s.sentences_seen} sentences ({s.files} file{'s' if s.files != 1 else ''}, "
                f"{s.input_bytes / 1e6:.1f} MB) in {self.seconds:.1f} s")


def create_vocab(input_patterns, model_prefix, options=None, input_sentence_size=DEFAULT_INPUT_SENTENCE_SIZE,
                 seed=DEFAULT_SEED, do_lower_case=True, progress_interval=10.0, input_what="--input_file",
                 output_what="--model_prefix"):
    """Samples the corpus, trains, and writes the vocabulary files for `model_prefix` atomically; returns a
    `VocabResult`. An output that is one of the inputs is refused before anything is read."""
    start = time.monotonic()
    options = options or SentencePieceOptions()
    if options.model_type not in MODEL_TYPES:
        raise UsageError(f"--model_type={options.model_type}: must be one of {', '.join(MODEL_TYPES)}")
    if options.vocab_size <= len(SPECIAL_TOKENS):
        raise UsageError(f"--vocab_size={options.vocab_size}: must be larger than {len(SPECIAL_TOKENS)}")
    if input_sentence_size <= 0:
        raise UsageError(f"--input_sentence_size={input_sentence_size}: must be positive (it bounds memory)")
    if not model_prefix or model_prefix.endswith(("/", os.sep)):
        raise UsageError(f"{output_what}={model_prefix!r}: give a path prefix such as /tmp/vocab/30k-clean")
    files = fileio.expand_globs(input_patterns, input_what)
    paths = output_paths(model_prefix, options.model_type)
    outputs = [(f"{output_what} ({what})", path) for what, path in paths.items()]
    fileio.refuse_inputs_as_outputs(outputs, [(input_what, f) for f in files])
    fileio.refuse_protected(outputs)  # every output before the first is written
    for path in paths.values():
        if fileio.is_remote(path) or not os.path.isdir(path):
            continue
        raise fileio.OutputError(f"cannot write {path}: it is a directory")
    raw, stats = sample_sentences(files, input_sentence_size, seed, progress_interval)
    logger.info("sampled %d of %d sentences from %d files (%.1f MB) in %.1f s", stats.sentences_sampled,
                stats.sentences_seen, stats.files, stats.input_bytes / 1e6, stats.seconds)
    if options.model_type == "wordpiece":
        tokens = train_wordpiece(raw, options.vocab_size, do_lower_case, progress_interval=progress_interval)
        fileio.write_text(paths["vocab"], "".join(t + "\n" for t in tokens), f"{output_what} {paths['vocab']}")
        return VocabResult(paths, len(tokens), stats, time.monotonic() - start)
    sentences = preprocess_sentences(raw, do_lower_case, progress_interval)
    del raw
    if not sentences:
        raise DataError("the input holds no text after preprocessing")
    record = {"input": files, "model_prefix": os.path.basename(model_prefix),
              "input_sentence_size": input_sentence_size, "shuffle_input_sentence": True}
    logger.info("training a %s SentencePiece model of %d pieces on %d sentences", options.model_type,
                options.vocab_size, len(sentences))
    model_bytes = train_sentencepiece(sentences, options, seed, record)
    if (options.pad_id, options.unk_id) == (PAD_ID, UNK_ID) and tuple(options.control_symbols) == CONTROL_SYMBOLS:
        check_special_layout(model_bytes)
    with fileio.atomic_write(paths["model"], "wb", f"{output_what} {paths['model']}") as f:
        f.write(model_bytes)
    fileio.write_text(paths["vocab"], vocab_text(model_bytes), f"{output_what} {paths['vocab']}")
    return VocabResult(paths, len(load_model_proto(model_bytes).pieces), stats, time.monotonic() - start)
