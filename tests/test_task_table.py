"""The one task table (`albert_tf/task_table.py`): the original's tasks are in it, every entry's reader and results
are real, a new entry reaches the readers, the metrics, the `--task_name` help and the docs, and docs/training.md
holds the table the code holds."""

import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from albert_tf import task_table
from albert_tf.data import glue
from albert_tf.evaluation import glue as glue_metrics
from albert_tf.evaluation import race as race_metrics
from albert_tf.evaluation import squad as squad_metrics
from tests.helpers import (COLLECT_SCRIPT_FLAGS, DATA_DIR, REPO, SAMPLE_GLUE, SPM, assert_one_line_error, run_script,
                           subprocess_env)

# The independent reference: the `processors` of google-research/albert's run_classifier.py and the `get_labels`
# of its classifier_utils.py.
ORIGINAL_LABELS = {
    "cola": ["0", "1"], "mnli": ["contradiction", "entailment", "neutral"],
    "mismnli": ["contradiction", "entailment", "neutral"], "mrpc": ["0", "1"],
    "qnli": ["entailment", "not_entailment"], "qqp": ["0", "1"], "rte": ["entailment", "not_entailment"],
    "sst-2": ["0", "1"], "sts-b": [None], "wnli": ["0", "1"],
}
DOCS = os.path.join(REPO, "docs", "training.md")
TABLE_START = "<!-- the task table: task_table.docs_table(), checked by tests/test_task_table.py -->\n"
TABLE_END = "<!-- end of the task table -->\n"

# A task added by one entry, read by the GLUE reader from `TOY/{train,dev,test}.tsv`.
TOY = task_table.Task(
    "toy", task_table.CLASSIFIER, "albert_tf.data.glue.glue_tasks.GlueProcessor",
    task_table.Scoring(("eval_accuracy", "f1"), "f1"), ("no", "yes"),
    source=task_table.GlueFiles("TOY", task_table.glue_layouts(task_table.Columns(True, 0, None, 1),
                                                                task_table.Columns(True, 1, None, None, 0))),
    summary="a toy task")
TOY_SOURCE = "from albert_tf.task_table import Columns, GlueFiles, Scoring, Task\ntoy = " + repr(TOY)


def test_the_original_tasks_and_labels():
    named = task_table.named_tasks(task_table.CLASSIFIER)
    assert {task.name: list(task.labels) for task in named} == ORIGINAL_LABELS
    assert [task.name for task in task_table.TASKS if task.script != task_table.CLASSIFIER] == [
        "squad", "squad-v2", "race"]
    assert {task.name: glue.get_processor(task.name).get_labels() for task in named} == ORIGINAL_LABELS
    assert race_metrics.LABELS == ("A", "B", "C", "D")


def test_every_reader_and_result_is_real():
    for task in task_table.TASKS:
        assert callable(task.reader_class()), task.name
        assert task.scoring.primary in task.scoring.metrics, task.name
    labels, predictions = [0, 1, 1, 0], [0, 1, 0, 0]
    for task in task_table.named_tasks(task_table.CLASSIFIER) + [task_table.own_files_task()]:
        sample = ([1.0, 2.0, 3.0], [1.0, 2.5, 2.9]) if task.regression else (labels, predictions)
        reported = glue_metrics.task_metrics(task.name, *sample, num_labels=3)
        assert tuple(reported) == task.scoring.metrics, task.name
        assert glue_metrics.primary_metric(task.name, task.regression) == task.scoring.primary

    dataset = [{"paragraphs": [{"context": "a b", "qas": [{"id": "1", "answers": [{"text": "a"}]},
                                                          {"id": "2", "answers": []}]}]}]
    v1 = squad_metrics.evaluate_v1([{"paragraphs": [{"qas": [{"id": "1", "answers": [{"text": "a"}]}]}]}], {"1": "a"})
    assert tuple(v1) == task_table.get("squad").scoring.metrics
    v2 = squad_metrics.evaluate_v2(dataset, {"1": "a", "2": ""})
    assert set(task_table.get("squad-v2").scoring.metrics) <= set(v2)
    examples = [types.SimpleNamespace(label=0, level=level) for level in race_metrics.LEVELS]
    reported = race_metrics.accuracy_by_level(examples, np.eye(2, 4))
    assert set(task_table.get("race").scoring.metrics) <= set(reported)


def test_a_users_task_is_scored_by_its_labels():
    labels, predictions = [0, 1, 1, 0], [0, 1, 0, 0]
    own = task_table.own_files_task()
    assert tuple(glue_metrics.task_metrics("mine", labels, predictions, num_labels=2)) == own.two_class.metrics
    assert tuple(glue_metrics.task_metrics("mine", [0, 2], [0, 1], num_labels=3)) == own.scoring.metrics
    assert tuple(glue_metrics.task_metrics("mine", labels, predictions, regression=True)) == (
        task_table.CORRELATION.metrics)
    assert glue_metrics.primary_metric("mine") == "eval_accuracy"
    assert glue_metrics.primary_metric("mine", regression=True) == "pearson"
    processor = glue.get_processor("Mine", train_file="train.tsv")
    assert isinstance(processor, own.reader_class()) and processor.task_name == "mine"


def _write_toy(folder):
    os.makedirs(folder / "TOY")
    for split in ("train", "dev"):
        (folder / "TOY" / f"{split}.tsv").write_text("sentence\tlabel\nfine\tyes\nbad\tno\n")
    (folder / "TOY" / "test.tsv").write_text("index\tsentence\n0\tfine\n")


def test_one_entry_adds_a_task(monkeypatch, tmp_path):
    monkeypatch.setattr(task_table, "TASKS", task_table.TASKS + (TOY,))
    processor = glue.get_processor("TOY")
    _write_toy(tmp_path)
    assert [(e.text_a, e.label) for e in processor.get_dev_examples(str(tmp_path))] == [("fine", "yes"),
                                                                                        ("bad", "no")]
    assert processor.get_labels() == ["no", "yes"] and not processor.is_regression
    assert glue_metrics.primary_metric("toy") == "f1"
    assert set(glue_metrics.task_metrics("toy", [0, 1, 1], [0, 1, 0])) == {"eval_accuracy", "f1"}
    assert "sts-b, wnli, toy; or any name" in task_table.task_name_help()
    assert "f1 for mrpc/qqp/toy;" in task_table.best_metric_help()
    assert "| `toy` | a toy task | `run_classifier.py` | `GlueProcessor` (`TOY/`) | no, yes |" in (
        task_table.docs_table())
    with pytest.raises(glue.UnknownTaskError, match="known tasks: .*sts-b, toy, wnli"):
        glue.get_processor("toys")


@pytest.mark.slow
def test_run_classifier_flags_read_the_table():
    """The script's `--task_name` and `--best_metric` help, with the table as it is and with a new entry."""
    code = ("from albert_tf import task_table\nimport json\n" + TOY_SOURCE + "\n"
            "import sys\nif sys.argv[2] == 'toy':\n    task_table.TASKS += (toy,)\n" + COLLECT_SCRIPT_FLAGS +
            "print(json.dumps([defined['task_name'][2], defined['best_metric'][2], task_table.task_name_help(), "
            "task_table.best_metric_help()]))\n")
    for variant in ("as_is", "toy"):
        result = subprocess.run([sys.executable, "-c", code, "run_classifier", variant], cwd=REPO,
                                env=subprocess_env(), capture_output=True, text=True, timeout=300, check=True)
        task_name, best_metric, expected_task_name, expected_best = json.loads(result.stdout.splitlines()[-1])
        assert (task_name, best_metric) == (expected_task_name, expected_best)
        assert ("toy" in task_name, "toy" in best_metric) == (variant == "toy",) * 2


@pytest.mark.slow
def test_an_unknown_task_is_one_line_naming_the_flag(tmp_path):
    result = run_script("run_classifier.py", ["--task_name=sst2", f"--data_dir={SAMPLE_GLUE}",
                                              f"--output_dir={tmp_path / 'out'}", f"--spm_model_file={SPM}",
                                              f"--albert_config_file={DATA_DIR}/albert_config_tiny.json",
                                              "--do_train"])
    line = assert_one_line_error(result, "--task_name=sst2", "known tasks: cola, mismnli, mnli, mrpc, qnli, qqp, "
                                 "rte, sst-2, sts-b, wnli", status=2)
    assert not (tmp_path / "out").exists(), line


def test_the_docs_hold_the_table():
    with open(DOCS, encoding="utf-8") as f:
        text = f.read()
    assert TABLE_START in text and TABLE_END in text
    held = text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0]
    assert held == task_table.docs_table(), (
        "docs/training.md's task table is not the code's; put this between its markers:\n" + task_table.docs_table())
