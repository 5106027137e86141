"""The progress-line rule of the long jobs (`albert_tf/progress.py`) and the lines the data scripts log with it."""

import dataclasses
import logging

import pytest

from albert_tf import progress
from albert_tf.data.corpus.pipeline import CorpusStats
from albert_tf.data.pretraining import Progress
from albert_tf.progress import ProgressLine, ProgressLog, time_left


def test_a_line_is_due_once_per_interval_forced_ones_always_and_none_when_off():
    line = ProgressLine(10.0)
    assert [line.due(t) for t in (0.0, 9.9, 10.0, 15.0, 19.9, 20.0)] == [False, False, True, False, False, True]
    assert line.due(21.0, force=True) and not line.due(30.0) and line.due(31.0)
    at_once = ProgressLine(10.0, first_at_once=True)
    assert [at_once.due(t) for t in (0.5, 5.0, 10.5)] == [True, False, True]
    off = ProgressLine(0)
    assert not off.due(100.0) and not off.due(100.0, force=True) and not ProgressLine(-1).due(5.0, force=True)


def test_the_time_left_is_told_while_work_remains():
    assert time_left(30.0, 0.25) == ", about 90 s left"
    assert time_left(30.0, 0.0) == time_left(30.0, 1.0) == ""


def test_the_pretraining_data_line_comes_at_once_then_per_interval_and_at_the_end(caplog):
    log = ProgressLog(10.0, first_at_once=True)

    def state(done, elapsed):
        return Progress(shards_done=done, shards_total=4, documents=10 * done, instances=100 * done,
                        text_bytes_done=int(1e6 * done), text_bytes_total=int(4e6), elapsed_seconds=elapsed)

    with caplog.at_level(logging.INFO, logger=progress.logger.name):
        for done, elapsed in ((1, 5.0), (2, 10.0), (3, 15.1), (4, 16.0)):
            log(state(done, elapsed))
    assert [r.getMessage() for r in caplog.records] == [
        "shards 1/4, documents 10, instances 100 (20/s), text 1.0/4.0 MB, about 15 s left",
        "shards 3/4, documents 30, instances 300 (20/s), text 3.0/4.0 MB, about 5 s left",
        "shards 4/4, documents 40, instances 400 (25/s), text 4.0/4.0 MB",
    ]


def test_the_pretraining_data_line_at_its_edges():
    """No time yet and no text (an empty shard list): a line, no division by zero; one byte of one done is all of
    it (nothing left to tell). A report is a value: it cannot be changed after it is made."""
    nothing = Progress(shards_done=0, shards_total=0, documents=0, instances=0, text_bytes_done=0,
                       text_bytes_total=0, elapsed_seconds=0.0)
    assert nothing.describe() == "shards 0/0, documents 0, instances 0 (0/s), text 0.0/0.0 MB" and nothing.finished
    tiny = dataclasses.replace(nothing, shards_done=0, shards_total=1, text_bytes_done=1, text_bytes_total=1,
                               elapsed_seconds=2.0)
    assert tiny.describe() == "shards 0/1, documents 0, instances 0 (0/s), text 0.0/0.0 MB" and not tiny.finished
    with pytest.raises(dataclasses.FrozenInstanceError):
        tiny.instances = 5


def test_the_corpus_line_comes_per_interval(caplog):
    log = ProgressLog(10.0)
    with caplog.at_level(logging.INFO, logger=progress.logger.name):
        for done, elapsed in ((1, 5.0), (2, 10.0), (3, 12.0)):
            log(CorpusStats(files_done=done, files_total=4, bytes_done=int(2e6 * done), bytes_total=int(8e6),
                            documents_read=7 * done, elapsed_seconds=elapsed))
    assert [r.getMessage() for r in caplog.records] == [
        "files 2/4, 4.0/8.0 MB (0.40 MB/s), 14 documents, about 10 s left"]
