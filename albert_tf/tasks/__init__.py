"""The tasks of the original release, each declaring what differs (params, model, data, metric, prediction files,
serving export); `albert_tf.train.runner.run` does the rest. `get(name)` is the registry."""

import importlib

TASKS = {"pretraining": ("albert_tf.tasks.pretraining", "PretrainingTask", "PretrainingParams"),
         "classification": ("albert_tf.tasks.classification", "ClassificationTask", "ClassifierParams"),
         "squad": ("albert_tf.tasks.squad", "SquadTask", "SquadParams"),
         "race": ("albert_tf.tasks.race", "RaceTask", "RaceParams")}


def get(name):
    """(task class, params class) of a task by name: pretraining, classification, squad or race."""
    if name not in TASKS:
        raise KeyError(f"unknown task {name!r}; known: {', '.join(TASKS)}")
    module, task, params = TASKS[name]
    module = importlib.import_module(module)
    return getattr(module, task), getattr(module, params)
