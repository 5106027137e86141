"""How a worker's input error reaches the user as one line: a worker marks the message of a `PretrainingDataError`
or `TokenizerError`, the runner carries it (in-process, a subprocess, a remote job's report) inside whatever it
raises, and the launcher finds the mark again; Beam's logging of the failed bundle is dropped meanwhile."""

import contextlib
import logging
import re

from albert_tf.data.pretraining.config import PretrainingDataError
from albert_tf.text import tokenization

# Spelled in pieces so that a traceback's source line never holds the marks.
_OPEN, _CLOSE = "<<albert_tf" + "-error: ", " :albert_tf" + "-error>>"
_MARK = re.compile(re.escape(_OPEN) + "(.*?)" + re.escape(_CLOSE), re.S)


class BeamWorkerError(RuntimeError):
    """An input or flag error found by a pipeline worker, its one-line message marked for the launcher."""


@contextlib.contextmanager
def marked_errors():
    """Re-raises an input or tokenizer error of the block as a `BeamWorkerError` holding its marked message."""
    try:
        yield
    except (PretrainingDataError, tokenization.TokenizerError) as err:
        raise BeamWorkerError(_OPEN + str(err) + _CLOSE) from None


def marked_message(err):
    """The first marked worker message in `err`, its chain or its text (None if there is none)."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        found = _MARK.search(str(err))
        if found:
            return found.group(1)
        err = err.__cause__ or err.__context__
    return None


class _DropMarkedErrors(logging.Filter):
    """Drops the log records of a marked worker error (Beam logs each failed bundle with its traceback); the
    launcher reports it in one line."""

    def filter(self, record):
        try:
            text = record.getMessage()
        except Exception:  # pylint: disable=broad-except
            text = str(record.msg)
        if record.exc_info and record.exc_info[1] is not None:
            text += str(record.exc_info[1])
        return _OPEN not in text


@contextlib.contextmanager
def quiet_marked_errors():
    """The root logger's handlers drop marked worker errors within the block."""
    handlers = list(logging.getLogger().handlers)
    drop = _DropMarkedErrors()
    for handler in handlers:
        handler.addFilter(drop)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(drop)
