"""The files a training run leaves beside its checkpoints, found from any path to them, and the task head a
checkpoint holds that a model would leave unused.

`run_classifier.py` and `run_squad.py` write `task.json` (the task and its labels) and `albert_config.json` into
their `--output_dir`, beside `ckpt-<step>`, and copy the best checkpoint to `<output_dir>/best_checkpoint/`
(recorded in `best_checkpoint.json` beside that folder). So the run folder, a checkpoint in it, its
`best_checkpoint/` and a checkpoint in that share one set of run files: `run_file` looks beside the checkpoint,
then, when the checkpoint's folder is a run's `best_checkpoint/`, one folder up. The converter uses them to
write the head the checkpoint holds, and `task_head` names the head weights a load left unused, so that a head
is written or refused, never dropped.
"""

import json
import os
import re

from albert_tf.checkpoints.model_garden import CONFIG_NAME, config_file_beside
from albert_tf.errors import MissingDataError

TASK_JSON = "task.json"
# `albert_tf.train.best_checkpoint`'s names (checkpoints may not import train): the folder and its record.
BEST_DIR = "best_checkpoint"
BEST_JSON = "best_checkpoint.json"
# Task heads by the names a load reports them unused under: the original's (classifier and multiple choice
# `output_*`, SQuAD v1.1 `cls/squad/`, SQuAD v2.0's answer verifier) and Hugging Face's.
_HEAD = re.compile(r"output_(weights|bias)|(cls/squad|start_logits|end_logits|answer_class)/.+"
                   r"|(classifier|qa_outputs)\..+")
# The classifier's (and multiple choice's) output layer: what `--num_labels` writes.
_OUTPUT_LAYER = re.compile(r"output_(weights|bias)|classifier\.(weight|bias)|model/output_layer/.+")
# keras-hub's own task files in a preset (a classifier preset adds them to the backbone's).
_KERAS_HUB_TASK = ("task.json", "task.weights.h5")


def checkpoint_folder(path):
    """The folder a checkpoint lives in: `path` itself when it is a directory, else the prefix's directory."""
    return os.path.abspath(path) if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))


def run_folders(path):
    """The folders whose files describe the checkpoint at `path`, nearest first: its folder, and the run folder
    above it when that folder is a run's `best_checkpoint/` (so named, with `best_checkpoint.json` beside it)."""
    folder = checkpoint_folder(path)
    parent = os.path.dirname(folder)
    if os.path.basename(folder) == BEST_DIR and os.path.isfile(os.path.join(parent, BEST_JSON)):
        return [folder, parent]
    return [folder]


def run_file(path, name):
    """The file `name` of the run the checkpoint at `path` belongs to (the first of `run_folders`), or None."""
    for folder in run_folders(path):
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            return candidate
    return None


def config_file(path):
    """The `albert_config.json` of the checkpoint at `path`: beside it or in its `assets/`
    (`model_garden.config_file_beside`), else in its run folder; None when there is none."""
    return config_file_beside(path) or run_file(path, CONFIG_NAME)


def task_record(path):
    """(path, contents) of the `task.json` of the checkpoint at `path` (see `run_file`); when there is none, the
    path it would have beside the checkpoint and None. Contents None for a file that is no JSON object; one that
    cannot be read raises `MissingDataError` naming it."""
    found = run_file(path, TASK_JSON)
    if found is None:
        return os.path.join(checkpoint_folder(path), TASK_JSON), None
    try:
        with open(found, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError) as err:
        raise MissingDataError(f"cannot read {found}: {err}") from None
    return found, record if isinstance(record, dict) else None


def task_head(result):
    """The weights of a task head among those a load into `AlbertForPretraining` (its `LoadResult`) left unused:
    in a native checkpoint every one (its reader leaves optimizer and metric state out, so what that model lacks is
    a task model's head), in the other formats those under a head's name (the original's or Hugging Face's)."""
    if result.format == "native":
        return list(result.unused)
    return [name for name in result.unused if _HEAD.fullmatch(name)]


def is_output_layer(names):
    """Whether the head weights `names` are a classifier's output layer (or multiple choice's, the same layer
    with one output), which a classifier with `num_labels` outputs holds."""
    return bool(names) and all(_OUTPUT_LAYER.fullmatch(name) for name in names)


def keras_hub_task(path):
    """The class of the task a keras-hub preset folder holds besides its backbone (e.g. `AlbertTextClassifier`,
    from keras-hub's own `task.json` and `task.weights.h5`), or None."""
    if not isinstance(path, str) or not all(os.path.isfile(os.path.join(path, n)) for n in _KERAS_HUB_TASK):
        return None
    try:
        with open(os.path.join(path, "task.json"), encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return "task"  # its weights are there all the same
    return record.get("class_name", "task") if isinstance(record, dict) else "task"
