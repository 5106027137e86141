"""The errors of sentence (pair) classification data: a bad task name, a missing split file, a row that does not
fit its task's layout, a label outside the label set. All are `albert_tf.errors.DataError`s."""

from albert_tf import errors


class GlueDataError(errors.DataError):
    """Bad task data or task name; the message says what and where."""


DataError = GlueDataError  # its old name in this namespace, kept for code written against it


class UnknownTaskError(GlueDataError):
    """The task name is not one of the known tasks (the message lists them)."""


class MissingSplitError(GlueDataError):
    """A split's file does not exist (the message names the paths tried)."""


class MalformedRowError(GlueDataError):
    """A row of a data file cannot be read as the task's layout; `path` and `line` say where."""

    def __init__(self, path, line, message):
        super().__init__(f"{path}, line {line}: {message}")
        self.path = path
        self.line = line


class UnknownLabelError(MalformedRowError):
    """A row's label is not in the task's label set."""
