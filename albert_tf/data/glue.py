"""Sentence (pair) classification data: GLUE and users' own CSV/TSV files, classifier features cached as
TFRecords, and tf.data pipelines that pad each batch only to its longest example.

Processors
  `get_processor(task_name)` returns the processor of a GLUE task of the original release: cola, mnli
  (matched dev/test), mismnli (mismatched dev/test), mrpc, qnli, qqp, rte, sst-2, sts-b (regression) and wnli.
  They read the GLUE layout under `data_dir` (`<data_dir>/<TaskDir>/<split file>`, e.g. `glue_data/SST-2/dev.tsv`;
  a `data_dir` that is the task folder itself works too), with each file's header rows, column positions and label
  set as in the GLUE files and the original's processors. `CsvProcessor` reads a user's own files: paths, text and
  label columns (by position or header name), delimiter, header, label list (or inferred from the train file), or
  regression.

  Files are read as UTF-8 (a byte-order mark is dropped, as MRPC's files have one), rows split on the delimiter
  with no quote handling for tab-separated files (GLUE's texts contain bare quotes) and standard CSV quoting for
  comma-separated ones. Errors name the problem: `UnknownTaskError` (lists the known tasks), `MissingSplitError`
  (the paths tried), `MalformedRowError` (file and line number), `UnknownLabelError` (file, line, label and the
  label set).

Features
  `convert_example` gives the original's classifier features (`[CLS] A [SEP] (B [SEP])`, longest-first pair
  truncation, zero padding to max_seq_length, via `tokenization.encode_pair`). `cached_features` writes them once
  to a TFRecord file in `cached_dir` (the original's record layout: int64 `input_ids`, `input_mask`,
  `segment_ids`, `label_ids` (float for regression) and `is_real_example`), named by task, split and sequence
  length and keyed by a hash of everything the records depend on: the split file's bytes, the tokenizer file's
  bytes and casing, the label list and the sequence length. A changed input never reuses a stale file. Files are
  written under a temporary name and renamed into place, and a JSON description beside each is written last.

Datasets
  `train_dataset` (shuffled, repeated, seeded) and `eval_dataset` (one ordered pass, each example carrying its
  `example_index`) read those records. With `dynamic_padding` (the default) batches are padded to their longest
  example, not to max_seq_length: training groups examples of similar length with `bucket_by_sequence_length`;
  evaluation sorts examples by length within windows of batches and the caller restores the order with
  `example_index`. With `static_shapes` (TPUs) every batch is padded to max_seq_length and has exactly
  batch_size examples (`drop_remainder`); evaluation then appends padding examples (`is_real_example` = 0,
  `example_index` = -1) to fill the last batch, as the original did.
"""

import csv
import dataclasses
import io
import logging
import os
import re

import numpy as np
import tensorflow as tf

from albert_tf import errors, fileio
from albert_tf.data import records
from albert_tf.text import tokenization

SPLITS = ("train", "dev", "test")
RECORD_FORMAT_VERSION = 1
FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")


class DataError(errors.DataError):
    """Bad task data or task name; the message says what and where."""


class UnknownTaskError(DataError):
    """The task name is not one of the known tasks (the message lists them)."""


class MissingSplitError(DataError):
    """A split's file does not exist (the message names the paths tried)."""


class MalformedRowError(DataError):
    """A row of a data file cannot be read as the task's layout; `path` and `line` say where."""

    def __init__(self, path, line, message):
        super().__init__(f"{path}, line {line}: {message}")
        self.path = path
        self.line = line


class UnknownLabelError(MalformedRowError):
    """A row's label is not in the task's label set."""


@dataclasses.dataclass
class InputExample:
    """One example: `guid` (the GLUE `index` for test rows, used in submissions), raw `text_a`, optional raw
    `text_b`, and `label` (a label string, a float for regression, None when unlabelled). `line` is the line
    number in its file."""

    guid: str
    text_a: str
    text_b: str = None
    label: object = None
    line: int = None


# ----------------------------------------------------------------------------------------------------------------
# Reading delimited files.

_BOM = b"\xef\xbb\xbf"


def first_invalid_utf8(binary):
    """(line, column, byte, reason) of the first byte of the binary file object `binary` that is not UTF-8, or
    None. Lines are counted as the text reader counts them (a line ends at "\\n", "\\r\\n" or "\\r"), the column
    in characters from 1 (a byte-order mark at the start is not counted)."""
    # Latin-1 maps each byte to one character, and line ends are ASCII (never part of a UTF-8 sequence): the
    # lines are the text reader's lines, their bytes unchanged.
    lines = io.TextIOWrapper(binary, encoding="latin-1", newline="")
    for number, line in enumerate(lines, start=1):
        raw = line.encode("latin-1")
        if number == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM):]
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as err:
            return number, len(raw[:err.start].decode("utf-8")) + 1, raw[err.start], err.reason
    return None


def _not_utf8_error(path, binary, fallback_line):
    """The `MalformedRowError` of a file that failed to decode: the line and column of its first bad byte."""
    found = first_invalid_utf8(binary)
    if found is None:  # pragma: no cover (the file changed under us)
        return MalformedRowError(path, fallback_line, "not valid UTF-8")
    line, column, byte, reason = found
    return MalformedRowError(path, line, f"not valid UTF-8 (byte 0x{byte:02x} at column {column}: {reason})")


def _open_binary(path):
    if "://" in path:
        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")  # pylint: disable=consider-using-with


def _open_text(path):
    if "://" in path:
        with tf.io.gfile.GFile(path, "rb") as f:
            data = f.read()
        try:
            return io.StringIO(data.decode("utf-8-sig"), newline="")
        except UnicodeDecodeError:
            raise _not_utf8_error(path, io.BytesIO(data), 1) from None
    return open(path, "r", encoding="utf-8-sig", newline="")  # pylint: disable=consider-using-with


def read_rows(path, delimiter="\t", quoting=None):
    """Yields `(line_number, fields)` for each non-blank row of a delimited UTF-8 file.

    `quoting` is a `csv` quoting constant; None means no quote handling for tab-separated files (the GLUE files
    and the original's reader) and standard CSV quoting otherwise. A byte that is not UTF-8 is reported on its own
    line (the text is decoded in chunks, so the row being read when decoding fails is not where the byte is).
    """
    if quoting is None:
        quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
    try:
        handle = _open_text(path)
    except FileNotFoundError:
        raise MissingSplitError(f"data file not found: {path}") from None
    with handle:
        reader = csv.reader(handle, delimiter=delimiter, quoting=quoting, strict=quoting != csv.QUOTE_NONE)
        line = 1
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except UnicodeDecodeError:
                with _open_binary(path) as binary:
                    raise _not_utf8_error(path, binary, reader.line_num + 1) from None
            except csv.Error as err:
                raise MalformedRowError(path, reader.line_num, f"cannot parse the row: {err}") from None
            if row:
                yield line, row
            line = reader.line_num + 1


# ----------------------------------------------------------------------------------------------------------------
# Processors.

class DataProcessor:
    """Base of the processors: examples of each split and the label list.

    Subclasses implement `split_path(data_dir, split)` and `read_examples(path, split)`, and set `task_name`,
    `labels` (label strings in index order) and `is_regression`.
    """

    task_name = None
    is_regression = False

    def get_labels(self):
        """Label strings in index order (`[None]` for regression, as the original's STS-B processor)."""
        return [None] if self.is_regression else list(self.labels)

    @property
    def num_labels(self):
        """Size of the classifier's output: 1 for regression."""
        return 1 if self.is_regression else len(self.get_labels())

    def split_path(self, data_dir, split):
        raise NotImplementedError

    def read_examples(self, path, split):
        raise NotImplementedError

    def get_examples(self, data_dir, split):
        """The examples of `split` ("train", "dev" or "test")."""
        if split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
        return self.read_examples(self.split_path(data_dir, split), split)

    # The original's method names.
    def get_train_examples(self, data_dir):
        return self.get_examples(data_dir, "train")

    def get_dev_examples(self, data_dir):
        return self.get_examples(data_dir, "dev")

    def get_test_examples(self, data_dir):
        return self.get_examples(data_dir, "test")

    def label_of(self, value, path, line):
        """Checks a raw label against the label set (or parses a regression score)."""
        value = value.strip()
        if self.is_regression:
            try:
                return float(value)
            except ValueError:
                raise MalformedRowError(path, line, f"score {value!r} is not a number") from None
        if value not in self.get_labels():
            raise UnknownLabelError(path, line, f"label {value!r} is not in the label set "
                                                f"{', '.join(map(repr, self.get_labels()))} of task {self.task_name}")
        return value

    def label_index(self, label):
        """The training target of a label: its index, or the score itself for regression."""
        if self.is_regression:
            return float(label) if label is not None else 0.0
        return self.get_labels().index(label) if label is not None else 0


@dataclasses.dataclass(frozen=True)
class _Layout:
    """Where a split's fields are: header row or not, text/label/guid column positions (label -1 = last)."""

    header: bool
    text_a: int
    text_b: int = None
    label: int = None
    guid: int = None


def _layouts(train, test):
    return {"train": train, "dev": train, "test": test}


@dataclasses.dataclass(frozen=True)
class _GlueTask:
    directory: str
    labels: tuple
    layouts: dict
    files: tuple = ("train.tsv", "dev.tsv", "test.tsv")
    regression: bool = False
    skip_short_rows: bool = False


_NLI_LAYOUT = _layouts(_Layout(True, 1, 2, -1, 0), _Layout(True, 1, 2, None, 0))
_MNLI_LAYOUT = _layouts(_Layout(True, 8, 9, -1, 0), _Layout(True, 8, 9, None, 0))

GLUE_TASKS = {
    "cola": _GlueTask("CoLA", ("0", "1"), _layouts(_Layout(False, 3, None, 1), _Layout(True, 1, None, None, 0))),
    "mnli": _GlueTask("MNLI", ("contradiction", "entailment", "neutral"), _MNLI_LAYOUT,
                      files=("train.tsv", "dev_matched.tsv", "test_matched.tsv")),
    "mismnli": _GlueTask("MNLI", ("contradiction", "entailment", "neutral"), _MNLI_LAYOUT,
                         files=("train.tsv", "dev_mismatched.tsv", "test_mismatched.tsv")),
    "mrpc": _GlueTask("MRPC", ("0", "1"), _layouts(_Layout(True, 3, 4, 0), _Layout(True, 3, 4, None, 0))),
    "qnli": _GlueTask("QNLI", ("entailment", "not_entailment"), _NLI_LAYOUT),
    # The original skips QQP train/dev rows that lack columns; so does this reader (each one is logged).
    "qqp": _GlueTask("QQP", ("0", "1"), _layouts(_Layout(True, 3, 4, 5, 0), _Layout(True, 1, 2, None, 0)),
                     skip_short_rows=True),
    "rte": _GlueTask("RTE", ("entailment", "not_entailment"), _NLI_LAYOUT),
    "sst-2": _GlueTask("SST-2", ("0", "1"), _layouts(_Layout(True, 0, None, 1), _Layout(True, 1, None, None, 0))),
    "sts-b": _GlueTask("STS-B", (None,), _layouts(_Layout(True, 7, 8, -1, 0), _Layout(True, 7, 8, None, 0)),
                       regression=True),
    "wnli": _GlueTask("WNLI", ("0", "1"), _NLI_LAYOUT),
}


class GlueProcessor(DataProcessor):
    """A GLUE task of the original's `run_classifier` (see `GLUE_TASKS` for layouts and label sets)."""

    def __init__(self, task_name):
        task_name = task_name.lower()
        if task_name not in GLUE_TASKS:
            raise UnknownTaskError(f"unknown task {task_name!r}; known tasks: {', '.join(sorted(GLUE_TASKS))}")
        self.task_name = task_name
        self.task = GLUE_TASKS[task_name]
        self.labels = list(self.task.labels)
        self.is_regression = self.task.regression

    def split_path(self, data_dir, split):
        if not data_dir:
            raise MissingSplitError(f"task {self.task_name}: no data_dir given")
        name = self.task.files[SPLITS.index(split)]
        candidates = [os.path.join(data_dir, self.task.directory, name), os.path.join(data_dir, name)]
        for path in candidates:
            if tf.io.gfile.exists(path):
                return path
        raise MissingSplitError(f"task {self.task_name}: the {split} file {name} is not in {data_dir} (tried "
                                f"{' and '.join(candidates)})")

    def read_examples(self, path, split):
        layout = self.task.layouts[split]
        columns = [c for c in (layout.text_a, layout.text_b, layout.guid) if c is not None]
        needed = max(columns) + 1
        if layout.label is not None:
            needed = max(needed, layout.label + 1 if layout.label >= 0 else needed + 1)
        examples, first = [], True
        for line, row in read_rows(path):
            if first and layout.header:
                first = False
                continue
            first = False
            if len(row) < needed:
                if self.task.skip_short_rows and split != "test":
                    logging.warning("%s, line %d: skipped (%d fields, %d needed)", path, line, len(row), needed)
                    continue
                raise MalformedRowError(path, line, f"{len(row)} fields, the {self.task_name} {split} layout "
                                                    f"needs at least {needed}")
            label = None
            if layout.label is not None:
                label = self.label_of(row[layout.label], path, line)
            guid = row[layout.guid].strip() if layout.guid is not None else f"{split}-{len(examples)}"
            text_b = row[layout.text_b] if layout.text_b is not None else None
            examples.append(InputExample(guid, row[layout.text_a], text_b, label, line))
        return examples


def _column_spec(value):
    if value is None or value == "":
        return None
    if isinstance(value, int):
        return value
    value = str(value).strip()
    return int(value) if re.fullmatch(r"-?\d+", value) else value


def _natural_key(label):
    try:
        return (0, float(label), label)
    except ValueError:
        return (1, 0.0, label)


class CsvProcessor(DataProcessor):
    """A user's own delimited files.

    Args:
      train_file, dev_file, test_file: paths of the splits (any may be None if that split is not used).
      text_a_column, text_b_column, label_column, guid_column: column positions (0-based ints, or digit strings)
        or, with `header`, column names. `text_b_column` None: single-text task. `guid_column` None: row numbers.
        Test files need no label column (test labels are not read); a test file's `guid_column` (if set) becomes
        the submission's index.
      delimiter: field separator ("\\t", ","; "tab" and "comma" are accepted too).
      header: whether each file's first row is a header.
      labels: the label strings in index order; None: the sorted distinct labels of the train file (numbers
        sorted numerically), or of the dev file when there is no train file.
      regression: labels are numbers and the model outputs one score.
      quoting: a `csv` quoting constant (default: none for tab-separated files, CSV quoting otherwise).
      task_name: the name used in cache file names and reports.
    """

    def __init__(self, train_file=None, dev_file=None, test_file=None, text_a_column=0, text_b_column=None,
                 label_column=1, guid_column=None, delimiter="\t", header=True, labels=None, regression=False,
                 quoting=None, task_name="custom"):
        self.files = {"train": train_file, "dev": dev_file, "test": test_file}
        self.columns = {"text_a": _column_spec(text_a_column), "text_b": _column_spec(text_b_column),
                        "label": _column_spec(label_column), "guid": _column_spec(guid_column)}
        if self.columns["text_a"] is None:
            raise DataError("text_a_column is required")
        if self.columns["label"] is None and (train_file or dev_file):
            raise DataError("label_column is required to read train or dev files")
        delimiter = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";"}.get(delimiter, delimiter)
        if len(delimiter) != 1:
            raise DataError(f"delimiter must be one character (or tab/comma), got {delimiter!r}")
        if not header and any(isinstance(c, str) for c in self.columns.values()):
            raise DataError("columns can be given by name only when the files have a header row")
        self.delimiter = delimiter
        self.header = header
        self.quoting = quoting
        self.task_name = task_name
        self.is_regression = bool(regression)
        self._labels = list(labels) if labels else None
        if self._labels and len(set(self._labels)) != len(self._labels):
            raise DataError(f"the label list has duplicates: {self._labels}")

    @property
    def labels(self):
        if self._labels is None and not self.is_regression:
            self._labels = self._infer_labels()
        return self._labels

    def _infer_labels(self):
        split = "train" if self.files["train"] else "dev" if self.files["dev"] else None
        if split is None:
            raise DataError(f"task {self.task_name}: no label list given and no train or dev file to infer it from")
        path = self.split_path(None, split)
        values = {row[i].strip() for _, row, i in self._label_cells(path)}
        if not values:
            raise DataError(f"{path}: no labelled rows to infer the label list from")
        labels = sorted(values, key=_natural_key)
        logging.info("Task %s: labels inferred from %s: %s", self.task_name, path, labels)
        return labels

    def _label_cells(self, path):
        index = None
        for line, row, header_row in self._data_rows(path):
            if index is None:
                index = self._resolve(row, "label", path, header_row)
            if index >= len(row):
                raise MalformedRowError(path, line, f"{len(row)} fields, no label column {index}")
            yield line, row, index

    def split_path(self, data_dir, split):
        path = self.files.get(split)
        if not path:
            raise MissingSplitError(f"task {self.task_name}: no {split} file given (--{split}_file)")
        if data_dir and not os.path.isabs(path) and "://" not in path and not tf.io.gfile.exists(path):
            path = os.path.join(data_dir, path)
        if not tf.io.gfile.exists(path):
            raise MissingSplitError(f"task {self.task_name}: the {split} file {path} does not exist")
        return path

    def _data_rows(self, path):
        """Yields (line, fields, header fields or None) for each data row."""
        header_row = None
        for line, row in read_rows(path, self.delimiter, self.quoting):
            if self.header and header_row is None:
                header_row = [c.strip() for c in row]
                continue
            yield line, row, header_row

    def _resolve(self, row, name, path, header_row, optional=False):
        spec = self.columns[name]
        if spec is None:
            return None
        if isinstance(spec, str):
            if spec not in (header_row or []):
                if optional:
                    return None
                raise MalformedRowError(path, 1, f"no column named {spec!r} for {name} (header: {header_row})")
            return header_row.index(spec)
        return spec if spec >= 0 else len(row) + spec

    def read_examples(self, path, split):
        examples = []
        positions = None
        for line, row, header_row in self._data_rows(path):
            if positions is None:
                positions = {name: self._resolve(row, name, path, header_row,
                                                 optional=(split == "test" and name == "label"))
                             for name in self.columns}
            needed = max(p for n, p in positions.items() if p is not None and not (split == "test" and n == "label"))
            if len(row) <= needed:
                raise MalformedRowError(path, line, f"{len(row)} fields, column {needed} is needed")
            label = self.label_of(row[positions["label"]], path, line) if split != "test" else None
            guid = row[positions["guid"]].strip() if positions["guid"] is not None else str(len(examples))
            text_b = row[positions["text_b"]] if positions["text_b"] is not None else None
            examples.append(InputExample(guid, row[positions["text_a"]], text_b, label, line))
        return examples


def get_processor(task_name, **csv_options):
    """The processor of a GLUE task (`GLUE_TASKS`), or with `csv_options` (see `CsvProcessor`) a user's files.

    Raises:
      UnknownTaskError: `task_name` is not a GLUE task and no files were given; the message lists the tasks.
    """
    if any(csv_options.get(k) for k in ("train_file", "dev_file", "test_file")):
        return CsvProcessor(task_name=(task_name or "custom").lower(), **csv_options)
    if not task_name:
        raise UnknownTaskError(f"no task name given; known tasks: {', '.join(sorted(GLUE_TASKS))} (or give your "
                               "own train/dev/test files)")
    return GlueProcessor(task_name)


# ----------------------------------------------------------------------------------------------------------------
# Features and the TFRecord cache.

def convert_example(example, processor, tokenizer, max_seq_length):
    """The original's classifier features of one example: a dict of `input_ids`, `input_mask`, `segment_ids`
    (lists of max_seq_length ints), `label_ids` (label index, or the float score) and `is_real_example` (1)."""
    input_ids, input_mask, segment_ids = tokenization.encode_pair(tokenizer, example.text_a, example.text_b or None,
                                                                 max_seq_length)
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
            "label_ids": processor.label_index(example.label), "is_real_example": 1}


def _example_proto(features, regression):
    feature = {name: records.int64_feature(features[name]) for name in FEATURE_NAMES}
    if regression:
        feature["label_ids"] = tf.train.Feature(float_list=tf.train.FloatList(value=[features["label_ids"]]))
    else:
        feature["label_ids"] = records.int64_feature([features["label_ids"]])
    feature["is_real_example"] = records.int64_feature([features["is_real_example"]])
    return tf.train.Example(features=tf.train.Features(feature=feature))


def tokenizer_fingerprint(tokenizer):
    """What the features depend on in a `FullTokenizer`: its mode, casing, quote rule (caches written when the
    LaTeX quotes were always mapped have no such field, so they are rebuilt) and the hash of its model file."""
    path = tokenizer.spm_model_file or tokenizer.vocab_file
    return {"mode": "sentencepiece" if tokenizer.is_sentencepiece else "wordpiece",
            "file_sha256": fileio.file_sha256(path), "do_lower_case": bool(tokenizer.do_lower_case),
            "map_latex_quotes": bool(tokenizer.map_latex_quotes)}


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


def read_split(processor, data_dir, split):
    """The examples of `split` (read, not converted); an empty split is refused, naming the file."""
    path = processor.split_path(data_dir, split)
    examples = processor.read_examples(path, split)
    if not examples:
        raise DataError(f"{path}: the {split} split holds no example")
    return path, examples


def cached_features(processor, data_dir, split, tokenizer, max_seq_length, cached_dir, examples=None):
    """Converts `split` to features and caches them as a TFRecord file in `cached_dir` (reused when everything
    they depend on is unchanged; see the module docstring). Returns a `CachedFeatures`."""
    path, read = read_split(processor, data_dir, split)
    examples = read if examples is None else examples
    key_parts = {
        "format": RECORD_FORMAT_VERSION, "task": processor.task_name, "split": split,
        "max_seq_length": int(max_seq_length), "data_sha256": fileio.file_sha256(path),
        "tokenizer": tokenizer_fingerprint(tokenizer), "labels": processor.get_labels(),
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
            writer.write(_example_proto(features, processor.is_regression).SerializeToString())
        return {"source": path, "max_length": max_length}

    cached = records.cached_records(os.path.join(cached_dir, stem + ".tf_record"), key_parts, write)
    return CachedFeatures(cached.path, cached.num_records, examples, cached.meta.get("max_length", max_seq_length),
                          cached.written)


def features_from_texts(tokenizer, texts_a, texts_b=None, max_seq_length=128):
    """Numpy int32 arrays `input_ids`, `input_mask`, `segment_ids` [N, max_seq_length] for lists of texts (the
    same features as the records), e.g. for `tf.data.Dataset.from_tensor_slices` in a Keras workflow."""
    texts_b = texts_b if texts_b is not None else [None] * len(texts_a)
    if len(texts_b) != len(texts_a):
        raise ValueError(f"texts_a and texts_b differ in length: {len(texts_a)} vs {len(texts_b)}")
    rows = [tokenization.encode_pair(tokenizer, a, b or None, max_seq_length) for a, b in zip(texts_a, texts_b)]
    arrays = np.asarray(rows, np.int32).reshape(len(rows), 3, max_seq_length)
    return {name: arrays[:, i] for i, name in enumerate(FEATURE_NAMES)}


# ----------------------------------------------------------------------------------------------------------------
# tf.data pipelines.

def record_spec(max_seq_length, regression):
    """The `tf.io.parse_example` spec of the classifier records."""
    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64) for name in FEATURE_NAMES}
    spec["label_ids"] = tf.io.FixedLenFeature([], tf.float32 if regression else tf.int64)
    spec["is_real_example"] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def _parse(max_seq_length, regression):
    spec = record_spec(max_seq_length, regression)

    def parse(serialized):
        parsed = tf.io.parse_single_example(serialized, spec)
        return {name: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for name, v in parsed.items()}

    return parse


def _length(features):
    return tf.reduce_sum(features["input_mask"])


def length_buckets(max_seq_length):
    """Bucket boundaries for training batches: steps of 8 tokens up to 64, then growing by about a quarter."""
    boundaries, edge = [], 8
    while edge <= max_seq_length:
        boundaries.append(edge)
        edge = edge + 8 if edge < 64 else int(edge * 1.25) // 8 * 8
    return boundaries


def _trim(features):
    """Cuts the sequence features to the example's length (the padding is all at the end)."""
    length = tf.maximum(_length(features), 1)
    return {name: value[:length] if name in FEATURE_NAMES else value for name, value in features.items()}


def _padded_shapes(features):
    return {name: [None] if name in FEATURE_NAMES else [] for name in features}


def _split_labels(features):
    return {name: features[name] for name in FEATURE_NAMES}, features["label_ids"]


def train_dataset(record_path, max_seq_length, batch_size, regression, seed=None, dynamic_padding=True,
                  bucketing=True, static_shapes=False, input_context=None, shuffle_buffer=10000, skip_batches=0):
    """Training batches `(features, labels)`, shuffled and repeated forever.

    Every iterator yields the same batches for a given `seed` (`records.shuffled_passes`), so a resumed run can
    skip the batches it already trained on (`skip_batches`).

    Args:
      record_path: a classifier TFRecord file (`cached_features`).
      max_seq_length: the length the records were written with.
      batch_size: this pipeline's batch size (per replica under `tf.distribute`).
      regression: float labels (else int32 label indices).
      seed: shuffle seed; None: unseeded.
      dynamic_padding: pad each batch to its longest example (else to max_seq_length).
      bucketing: with dynamic padding, batch examples of similar length together (`bucket_by_sequence_length`,
        which changes which examples share a batch); without it, batches are the shuffled order's consecutive
        examples, as the original's.
      static_shapes: pad to max_seq_length (TPUs); overrides `dynamic_padding`.
      input_context: a `tf.distribute.InputContext`: this pipeline reads every n-th record.
      shuffle_buffer: records in the shuffle buffer.
      skip_batches: batches to skip at the start (a resumed run).
    """
    dataset = records.shuffled_passes(records.shard_for(tf.data.TFRecordDataset(record_path), input_context), seed,
                                      shuffle_buffer)
    dataset = dataset.map(_parse(max_seq_length, regression), num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=True)
    if static_shapes or not dynamic_padding:
        dataset = dataset.batch(batch_size, drop_remainder=True)
    elif not bucketing:
        dataset = dataset.map(_trim).padded_batch(batch_size, padded_shapes=_padded_shapes(dataset.element_spec),
                                                   drop_remainder=True)
    else:
        boundaries = length_buckets(max_seq_length)
        dataset = dataset.map(_trim).bucket_by_sequence_length(
            _length, bucket_boundaries=boundaries, bucket_batch_sizes=[batch_size] * (len(boundaries) + 1),
            padded_shapes=None, pad_to_bucket_boundary=False, drop_remainder=True)
    if skip_batches:
        dataset = dataset.skip(skip_batches)
    return dataset.map(_split_labels).prefetch(tf.data.AUTOTUNE)


def eval_dataset(record_path, max_seq_length, batch_size, regression, num_examples, dynamic_padding=True,
                 input_context=None, window_batches=64):
    """One pass of evaluation/prediction batches (`records.ordered_batches`): dicts of the features plus
    `label_ids`, `is_real_example` and `example_index` (position in the file; -1 for the padding examples that
    fill the last step).

    With `dynamic_padding`, examples are sorted by length within windows of batches and each batch is padded
    to its longest; `example_index` restores file order (`albert_tf.train.ordered_prediction`).
    """
    examples = tf.data.TFRecordDataset(record_path).map(_parse(max_seq_length, regression),
                                                        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return records.ordered_batches(examples, num_examples, batch_size, input_context=input_context,
                                   dynamic_padding=dynamic_padding, sequence_features=FEATURE_NAMES,
                                   sort_window_batches=window_batches)


def model_inputs(batch):
    """The model's inputs from an `eval_dataset` batch."""
    return {name: batch[name] for name in FEATURE_NAMES}
