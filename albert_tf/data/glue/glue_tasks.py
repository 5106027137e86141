"""The GLUE tasks of the original's `run_classifier`: where each split's file is (`<data_dir>/<TaskDir>/<file>`, or
the task folder itself), its header rows, column positions and label set (`GLUE_TASKS`), `GlueProcessor` reading
them, and `get_processor`, which gives a GLUE task's processor or, given files, a `CsvProcessor` for a user's own."""

import dataclasses
import logging
import os

import tensorflow as tf

from albert_tf.data.glue.errors import MalformedRowError, MissingSplitError, UnknownTaskError
from albert_tf.data.glue.processor import SPLITS, DataProcessor, InputExample
from albert_tf.data.glue.rows import read_rows
from albert_tf.data.glue.user_files import CsvProcessor


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
