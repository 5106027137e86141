"""`CsvProcessor`: a user's own delimited files as a classification task: the paths of the splits, the text, label
and id columns (by position or header name), delimiter, header, and the label list (given, or inferred from the train
file in natural order) or regression."""

import logging
import os
import re

import tensorflow as tf

from albert_tf.data.glue.errors import GlueDataError, MalformedRowError, MissingSplitError
from albert_tf.data.glue.processor import DataProcessor, InputExample
from albert_tf.data.glue.rows import read_rows
from albert_tf.data.natural_order import label_key


def _column_spec(value):
    if value is None or value == "":
        return None
    if isinstance(value, int):
        return value
    value = str(value).strip()
    return int(value) if re.fullmatch(r"-?\d+", value) else value


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
      labels: the label strings in index order; None: the distinct labels of the train file, or of the dev file
        when there is no train file, numbers first by value, then the others as text (`natural_order.label_key`).
      regression: labels are numbers and the model outputs one score.
      quoting: a `csv` quoting constant (default: none for tab-separated files, CSV quoting otherwise).
      task_name: the name used in cache file names and reports.
      data_dir: where relative paths are looked up when `split_path` is given no `data_dir` (as
        `run_classifier.py --data_dir`); the label list is inferred before any split is read, so it needs it here.
    """

    def __init__(self, train_file=None, dev_file=None, test_file=None, text_a_column=0, text_b_column=None,
                 label_column=1, guid_column=None, delimiter="\t", header=True, labels=None, regression=False,
                 quoting=None, task_name="custom", data_dir=None):
        self.data_dir = data_dir
        self.files = {"train": train_file, "dev": dev_file, "test": test_file}
        self.columns = {"text_a": _column_spec(text_a_column), "text_b": _column_spec(text_b_column),
                        "label": _column_spec(label_column), "guid": _column_spec(guid_column)}
        if self.columns["text_a"] is None:
            raise GlueDataError("text_a_column is required")
        if self.columns["label"] is None and (train_file or dev_file):
            raise GlueDataError("label_column is required to read train or dev files")
        delimiter = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";"}.get(delimiter, delimiter)
        if len(delimiter) != 1:
            raise GlueDataError(f"delimiter must be one character (or tab/comma), got {delimiter!r}")
        if not header and any(isinstance(c, str) for c in self.columns.values()):
            raise GlueDataError("columns can be given by name only when the files have a header row")
        self.delimiter = delimiter
        self.header = header
        self.quoting = quoting
        self.task_name = task_name
        self.is_regression = bool(regression)
        self._labels = list(labels) if labels else None
        if self._labels and len(set(self._labels)) != len(self._labels):
            raise GlueDataError(f"the label list has duplicates: {self._labels}")

    @property
    def labels(self):
        if self._labels is None and not self.is_regression:
            self._labels = self._infer_labels()
        return self._labels

    def _infer_labels(self):
        split = "train" if self.files["train"] else "dev" if self.files["dev"] else None
        if split is None:
            raise GlueDataError(f"task {self.task_name}: no label list given and no train or dev file to infer it "
                                "from")
        path = self.split_path(self.data_dir, split)
        values = {row[i].strip() for _, row, i in self._label_cells(path)}
        if not values:
            raise GlueDataError(f"{path}: no labelled rows to infer the label list from")
        labels = sorted(values, key=label_key)
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
        data_dir = data_dir or self.data_dir
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
