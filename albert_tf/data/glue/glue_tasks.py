"""The GLUE tasks of the original's `run_classifier`, as `albert_tf.task_table` declares them (where each split's
file is, `<data_dir>/<TaskDir>/<file>` or the task folder itself, its header rows, column positions and label set):
`GlueProcessor` reading them, and `get_processor`, which gives the processor of a task of the table or, given files,
the reader of a user's own (`CsvProcessor`)."""

import logging
import os

import tensorflow as tf

from albert_tf import task_table
from albert_tf.data.glue.errors import MalformedRowError, MissingSplitError, UnknownTaskError
from albert_tf.data.glue.processor import SPLITS, DataProcessor, InputExample
from albert_tf.data.glue.rows import read_rows

# The GLUE tasks' entries of the table as it stood at import, by name (`get_processor` reads the table itself).
GLUE_TASKS = {task.name: task for task in task_table.TASKS if isinstance(task.source, task_table.GlueFiles)}


def _known_tasks():
    return ", ".join(sorted(task.name for task in task_table.named_tasks(task_table.CLASSIFIER)))


class GlueProcessor(DataProcessor):
    """A task of `task_table` whose files are GLUE's (`task.source`, a `task_table.GlueFiles`: layouts, files)."""

    def __init__(self, task_name):
        task_name = task_name.lower()
        entry = task_table.get(task_name)
        if entry is None or not isinstance(entry.source, task_table.GlueFiles):
            raise UnknownTaskError(f"unknown task {task_name!r}; known tasks: {_known_tasks()}")
        self.task_name = task_name
        self.task = entry.source
        self.labels = list(entry.labels)
        self.is_regression = entry.regression

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


# The options naming a user's own files: any of them given makes the task the user's own.
OWN_FILE_OPTIONS = ("train_file", "dev_file", "test_file")


def get_processor(task_name, **csv_options):
    """The processor of a task of `task_table` (its reader, given the task's name), or with `csv_options` (see
    `CsvProcessor`) the reader of a user's own files.

    Raises:
      UnknownTaskError: `task_name` names no `run_classifier.py` task and no files were given; the message lists
        the tasks.
    """
    if any(csv_options.get(k) for k in OWN_FILE_OPTIONS):
        own = task_table.own_files_task()
        return own.reader_class()(task_name=(task_name or own.name).lower(), **csv_options)
    if not task_name:
        raise UnknownTaskError(f"no task name given; known tasks: {_known_tasks()} (or give your own train/dev/test "
                               "files)")
    entry = task_table.get(task_name)
    if entry is None or entry.script != task_table.CLASSIFIER or entry.own_files:
        raise UnknownTaskError(f"unknown task {task_name.lower()!r}; known tasks: {_known_tasks()}")
    return entry.reader_class()(entry.name)
