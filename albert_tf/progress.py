"""When the long jobs (records, corpus, vocabulary) log a progress line, and the time left it ends with: one rule
for every job, so each line tells the rate and the time left and none comes more often than asked."""

import logging

logger = logging.getLogger(__name__)


class ProgressLine:
    """Whether a progress line is due: at most one every `interval` seconds (none at all with `interval` <= 0),
    the first at the first call with `first_at_once` (else `interval` seconds after the start), and a forced one
    (the last of a run) whenever lines are on."""

    def __init__(self, interval, first_at_once=False):
        self.interval = interval
        self.last = None if first_at_once else 0.0

    def due(self, elapsed, force=False):
        """Whether to log now, `elapsed` seconds after the start; a line logged counts from now."""
        if self.interval <= 0:
            return False
        if not force and self.last is not None and elapsed - self.last < self.interval:
            return False
        self.last = elapsed
        return True


def time_left(elapsed, share):
    """`", about N s left"` after `elapsed` seconds with `share` (0 to 1) of the work done, at the rate so far;
    empty before any work is done and once all is."""
    return f", about {elapsed / share - elapsed:.0f} s left" if 0 < share < 1 else ""


class ProgressLog:
    """A job's progress callback that logs `progress.describe()` when a line is due (see `ProgressLine`), judged
    by `progress.elapsed_seconds`; a progress whose `finished` is true is always logged."""

    def __init__(self, interval, first_at_once=False):
        self.line = ProgressLine(interval, first_at_once)

    def __call__(self, progress):
        if self.line.due(progress.elapsed_seconds, force=getattr(progress, "finished", False)):
            logger.info("%s", progress.describe())
