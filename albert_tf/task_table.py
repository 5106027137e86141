"""The one table of the fine-tuning tasks: every GLUE task of the original's `run_classifier.py`, a user's own
CSV/TSV files, SQuAD v1.1 and v2.0, and RACE, each declared once with its name, its reader, its labels, the results
it reports and the one that picks its best checkpoint.

The data readers, the metrics (`evaluation`), the scripts' `--task_name` help and the task list of
docs/training.md read it (`tests/test_task_table.py` checks the docs against it), so adding a task is one `Task`
here plus its reader. The module is plain data: a reader is named by its dotted path and imported only when asked
for (`reader`), so `data` and `evaluation` both import this module and it imports neither.
"""

import dataclasses
import importlib


@dataclasses.dataclass(frozen=True)
class Columns:
    """Where a delimited file's fields are: a header row or not, the text, label and id column positions
    (label -1: the last column; None: the file has no such column)."""

    header: bool
    text_a: int
    text_b: int = None
    label: int = None
    guid: int = None


@dataclasses.dataclass(frozen=True)
class GlueFiles:
    """A GLUE task's files: `<data_dir>/<directory>/<file>` (or the task folder itself), one file per split
    (train, dev, test) with the columns of `layouts[split]`; `skip_short_rows`: train/dev rows that lack columns are
    skipped and logged (the original's QQP reader), not refused."""

    directory: str
    layouts: dict
    files: tuple = ("train.tsv", "dev.tsv", "test.tsv")
    skip_short_rows: bool = False


def glue_layouts(train, test):
    """A GLUE task's `layouts`: dev files have the train file's columns."""
    return {"train": train, "dev": train, "test": test}


@dataclasses.dataclass(frozen=True)
class Scoring:
    """The results a task writes to eval_results (`metrics`) and the one that picks the best checkpoint."""

    metrics: tuple
    primary: str


ACCURACY = Scoring(("eval_accuracy",), "eval_accuracy")
CORRELATION = Scoring(("pearson", "spearman", "MSE"), "pearson")


@dataclasses.dataclass(frozen=True)
class Task:
    """One task.

    Attributes:
      name: the task's name (`--task_name` for `run_classifier.py`).
      script: the script that trains it.
      reader: dotted path of its reader (a `DataProcessor` class for `run_classifier.py`), imported by `reader()`.
      scoring: the results it reports and the primary one (for a classification task, when it has other than two
        labels if `two_class` is set).
      labels: the label strings in index order; () when the user's data gives them, (None,) for a score.
      regression: the label is a score (one output, squared-error loss).
      source: plain data the reader is built from (`GlueFiles` for a GLUE task).
      own_files: the user's own files: any `--task_name` names it, and the files are given by flags.
      two_class: the scoring of the task when its label set has two classes.
      summary: what the task is, for the help and the docs.
    """

    name: str
    script: str
    reader: str
    scoring: Scoring
    labels: tuple = ()
    regression: bool = False
    source: object = None
    own_files: bool = False
    two_class: Scoring = None
    summary: str = ""

    def reader_class(self):
        """The reader, imported now (the table names it so that it imports no reader itself)."""
        module, _, name = self.reader.rpartition(".")
        return getattr(importlib.import_module(module), name)

    def scoring_for(self, regression=False, two_class=False):
        """The scoring of a run: a regression run of a classification task reports the correlations."""
        if regression and not self.regression:
            return CORRELATION
        if two_class and self.two_class:
            return self.two_class
        return self.scoring


_GLUE_READER = "albert_tf.data.glue.glue_tasks.GlueProcessor"
CLASSIFIER = "run_classifier.py"
_NLI = glue_layouts(Columns(True, 1, 2, -1, 0), Columns(True, 1, 2, None, 0))
_MNLI = glue_layouts(Columns(True, 8, 9, -1, 0), Columns(True, 8, 9, None, 0))
_MNLI_LABELS = ("contradiction", "entailment", "neutral")
_BINARY = ("0", "1")
# The original kept MRPC and QQP by accuracy; GLUE ranks them by F1 (and accuracy), which is what is used here.
_F1 = Scoring(("eval_accuracy", "f1"), "f1")


def _glue(name, files, labels, scoring=ACCURACY, regression=False, summary=""):
    return Task(name, CLASSIFIER, _GLUE_READER, scoring, labels, regression, files, summary=summary)


TASKS = (
    _glue("cola", GlueFiles("CoLA", glue_layouts(Columns(False, 3, None, 1), Columns(True, 1, None, None, 0))),
          _BINARY, Scoring(("eval_accuracy", "matthew_corr"), "matthew_corr"), summary="GLUE CoLA"),
    _glue("mnli", GlueFiles("MNLI", _MNLI, ("train.tsv", "dev_matched.tsv", "test_matched.tsv")), _MNLI_LABELS,
          summary="GLUE MNLI, matched dev and test"),
    _glue("mismnli", GlueFiles("MNLI", _MNLI, ("train.tsv", "dev_mismatched.tsv", "test_mismatched.tsv")),
          _MNLI_LABELS, summary="GLUE MNLI, mismatched dev and test"),
    _glue("mrpc", GlueFiles("MRPC", glue_layouts(Columns(True, 3, 4, 0), Columns(True, 3, 4, None, 0))), _BINARY,
          _F1, summary="GLUE MRPC"),
    _glue("qnli", GlueFiles("QNLI", _NLI), ("entailment", "not_entailment"), summary="GLUE QNLI"),
    _glue("qqp", GlueFiles("QQP", glue_layouts(Columns(True, 3, 4, 5, 0), Columns(True, 1, 2, None, 0)),
                           skip_short_rows=True), _BINARY, _F1, summary="GLUE QQP"),
    _glue("rte", GlueFiles("RTE", _NLI), ("entailment", "not_entailment"), summary="GLUE RTE"),
    _glue("sst-2", GlueFiles("SST-2", glue_layouts(Columns(True, 0, None, 1), Columns(True, 1, None, None, 0))),
          _BINARY, summary="GLUE SST-2"),
    _glue("sts-b", GlueFiles("STS-B", glue_layouts(Columns(True, 7, 8, -1, 0), Columns(True, 7, 8, None, 0))),
          (None,), CORRELATION, regression=True, summary="GLUE STS-B (regression)"),
    _glue("wnli", GlueFiles("WNLI", _NLI), _BINARY, summary="GLUE WNLI"),
    Task("custom", CLASSIFIER, "albert_tf.data.glue.user_files.CsvProcessor", ACCURACY, own_files=True,
         two_class=Scoring(("eval_accuracy", "f1", "matthew_corr"), "eval_accuracy"),
         summary="your own CSV/TSV files (`--train_file` ...)"),
    Task("squad", "run_squad.py", "albert_tf.data.squad.reading.read_squad_examples",
         Scoring(("exact_match", "f1"), "f1"), summary="SQuAD v1.1"),
    Task("squad-v2", "run_squad.py", "albert_tf.data.squad.reading.read_squad_examples",
         Scoring(("exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1"), "f1"),
         summary="SQuAD v2.0 (`--version_2_with_negative`)"),
    Task("race", "run_race.py", "albert_tf.data.race.read_race",
         Scoring(("accuracy", "accuracy_middle", "accuracy_high", "eval_accuracy"), "accuracy"),
         ("A", "B", "C", "D"), summary="RACE (multiple choice)"),
)


def get(name):
    """The task named `name` (any case), or None."""
    name = (name or "").lower()
    return next((task for task in TASKS if task.name == name), None)


def named_tasks(script):
    """The tasks of `script` that a `--task_name` picks with no files of the user's, in table order."""
    return [task for task in TASKS if task.script == script and not task.own_files]


def own_files_task(script=CLASSIFIER):
    """The entry of a user's own files for `script`."""
    return next(task for task in TASKS if task.script == script and task.own_files)


def classifier_task(name):
    """The `run_classifier.py` task a `--task_name` names: a named task, or the user's own files' entry for any
    other name."""
    task = get(name)
    return task if task is not None and task.script == CLASSIFIER else own_files_task()


def task_name_help():
    """`run_classifier.py`'s `--task_name` help: the named tasks, or any name for one's own files."""
    names = ", ".join(task.name for task in named_tasks(CLASSIFIER))
    return f"The task: {names}; or any name for your own files (default '{own_files_task().name}')."


def best_metric_help():
    """`run_classifier.py`'s `--best_metric` help: each task's primary result where it is not the default."""
    default = own_files_task().scoring.primary
    by_metric = {}
    for task in named_tasks(CLASSIFIER):
        if task.scoring.primary != default:
            by_metric.setdefault(task.scoring.primary, []).append(task.name)
    parts = [default]
    for metric, names in by_metric.items():
        also = " and any regression" if metric == CORRELATION.primary else ""
        parts.append(f"{metric} for {'/'.join(names)}{also}")
    return f"Result that picks the best checkpoint (default: the task's: {'; '.join(parts)})."


def _labels_cell(task):
    if task.regression:
        return "a score"
    if not task.labels:
        return "the data's (or `--label_list`); a score with `--regression`" if task.own_files else "from the data"
    return ", ".join(task.labels)


def _scoring_cell(task, field):
    def cell(scoring):
        value = getattr(scoring, field)
        return ", ".join(value) if isinstance(value, tuple) else value

    text = cell(task.scoring)
    if task.two_class and cell(task.two_class) != text:
        text += f"; two labels: {cell(task.two_class)}"
    if task.own_files:
        text += f"; a score: {cell(CORRELATION)}"
    return text


def docs_table():
    """The task table of docs/training.md, in Markdown (`tests/test_task_table.py` checks the docs hold it)."""
    rows = ["| task | what | script | reader | labels | results | best checkpoint by |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for task in TASKS:
        name = f"any name (default `{task.name}`)" if task.own_files else f"`{task.name}`"
        reader = f"`{task.reader.rpartition('.')[2]}`"
        if isinstance(task.source, GlueFiles):
            reader += f" (`{task.source.directory}/`)"
        rows.append(f"| {name} | {task.summary} | `{task.script}` | {reader} | {_labels_cell(task)} | "
                    f"{_scoring_cell(task, 'metrics')} | {_scoring_cell(task, 'primary')} |")
    return "\n".join(rows) + "\n"
