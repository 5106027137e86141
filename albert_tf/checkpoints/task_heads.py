"""Which heads a conversion carries over: the model its input is read into, and the heads it refuses to drop.

A fine-tuned classifier's head comes from `--num_labels` / `--label_list` or the `task.json` its run left beside
the checkpoint (`run_files`); without one the model is `AlbertForPretraining`, or `AlbertForSquad` when the input
lacks the masked-LM head and holds the SQuAD v1.1 head. A task head the chosen model would leave unused is
refused (one line), never dropped, and so is a keras-hub task preset, whose head the reader cannot see.
"""

from albert_tf.checkpoints import native, run_files
from albert_tf.checkpoints.errors import CheckpointMismatchError
from albert_tf.checkpoints.loading import load_checkpoint
from albert_tf.checkpoints.name_table import pretraining_head_entries, tf1_entries
from albert_tf.errors import UsageError
from albert_tf.model import AlbertClassifier, AlbertForPretraining, AlbertForSquad


def _classifier_record(input_checkpoint):
    """(path, contents) of a classifier's `task.json`; contents None when there is none (or it records no
    labels)."""
    path, record = run_files.task_record(input_checkpoint)
    return path, record if record is not None and isinstance(record.get("labels"), list) else None


def classifier_head(input_checkpoint, num_labels=None, label_list=None):
    """(number of outputs, label names or None, regression) of the input's classifier head, or (None, None,
    False) for no classifier: from `num_labels` / `label_list` and the `task.json` that run_classifier.py leaves
    beside its checkpoints (a regression task has one output and no names). Raises `UsageError` when they
    disagree."""
    path, record = _classifier_record(input_checkpoint)
    names, regression = None, False
    if record is not None:
        regression = bool(record.get("regression"))
        names = None if regression else [str(label) for label in record["labels"]]
    recorded = (1 if regression else len(names)) if record is not None else None
    if label_list:
        if names is not None and list(label_list) != names:
            raise UsageError(f"--label_list={','.join(label_list)}, but {path} beside the input names the "
                             f"classifier's labels {names}")
        names = list(label_list)
    if num_labels is not None and names is not None and num_labels != len(names):
        raise UsageError(f"--num_labels={num_labels}, but there are {len(names)} label names ({names}, from "
                         f"{'--label_list' if label_list else path})")
    if num_labels is not None and recorded is not None and num_labels != recorded:
        raise UsageError(f"--num_labels={num_labels}, but {path} beside the input gives the classifier "
                         f"{recorded} label(s) ({record.get('labels')})")
    count = num_labels if num_labels is not None else len(names) if names is not None else recorded
    return count, names, regression


def missing_variable_ids(model, result):
    """ids of the model's variables that the checkpoint did not provide."""
    missing = set(result.missing)
    if result.format == "native":
        return {id(v) for key, v in native.object_keys(model).items() if key in missing}
    return {id(e.variable) for e in tf1_entries(model) if e.name in missing}


def load_model(config, source, num_labels, init_from_group0):
    """(model, LoadResult) of the input: `AlbertClassifier` with `num_labels`; else `AlbertForPretraining`, unless
    the input lacks the masked-LM head and has the SQuAD v1.1 head (`_has_squad_head`), then `AlbertForSquad`."""
    if num_labels:
        model = AlbertClassifier(config, num_labels)
        return model, load_checkpoint(model, source, init_from_group0=init_from_group0)
    model = AlbertForPretraining(config)
    result = load_checkpoint(model, source, init_from_group0=init_from_group0)
    if not _lacks_mlm_head(model, result) or not _has_squad_head(source, result):
        return model, result
    squad = AlbertForSquad(config)
    squad_result = load_checkpoint(squad, source, init_from_group0=init_from_group0)
    if not squad_result.missing:
        return squad, squad_result
    return model, result


def refuse_keras_hub_task(input_checkpoint):
    """A keras-hub preset holding a task (keras-hub's `task.json`, `task.weights.h5`) is refused: the converter
    reads its backbone only, and would drop the task's head."""
    task = run_files.keras_hub_task(input_checkpoint)
    if task:
        raise CheckpointMismatchError(
            f"the input {input_checkpoint} is a keras-hub {task} preset; the converter reads a preset's backbone "
            "only and would drop the task's head (task.weights.h5): convert the checkpoint the preset was made from")


def refuse_dropped_head(input_checkpoint, model, result):
    """The output never drops a task head of the input: when the model chosen has none (`AlbertForPretraining`)
    and the input holds one, a classifier's is a `UsageError` (`--num_labels` writes it), another a
    `CheckpointMismatchError`."""
    head = run_files.task_head(result) if isinstance(model, AlbertForPretraining) else []
    if not head:
        return
    shown = ", ".join(head[:2]) + (", ..." if len(head) > 2 else "")
    path, _ = run_files.task_record(input_checkpoint)
    if run_files.is_output_layer(head):
        raise UsageError(f"the input {input_checkpoint} holds a classifier head ({shown}) and no {path} gives its "
                         "labels; pass --num_labels (and, for huggingface output, --label_list), or convert the "
                         "run folder (or its best_checkpoint/) whose task.json does")
    raise CheckpointMismatchError(f"the input {input_checkpoint} holds a task head ({shown}) that the converter "
                                  "cannot write; it would be dropped, so nothing is written")


def _has_squad_head(source, result):
    """Whether the input left unused by `AlbertForPretraining` holds the SQuAD v1.1 head: by its TF1 name, or, in
    a native checkpoint (whose head key a classifier's shares), as the `task.json` of run_squad.py says."""
    if "cls/squad/output_weights" in result.unused:
        return True
    if result.format != "native" or not isinstance(source, str):
        return False
    record = run_files.task_record(source)[1]
    return bool(record) and record.get("task_name") == "squad" and not record.get("version_2_with_negative")


def _lacks_mlm_head(model, result):
    """Whether the load left the masked-LM head of `model` (an `AlbertForPretraining`) unloaded."""
    missing = missing_variable_ids(model, result)
    return any(id(e.variable) in missing for e in pretraining_head_entries(model)
               if e.name.startswith("cls/predictions/"))
