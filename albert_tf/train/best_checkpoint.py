"""Evaluating saved checkpoints and keeping the best one, for every task with a metric.

State lives in the output directory and survives restarts: `eval_history.json` (every evaluated step's
results), `eval_results.txt` (the original's `key = value` blocks, one per checkpoint, then `best_step` and
`best_<metric>`), and the best checkpoint copied to `best_checkpoint/` (with a `checkpoint` state file, so
`tf.train.latest_checkpoint` and `load_checkpoint` find it) described by `best_checkpoint.json` (step, metric,
value, results).
"""

import json
import logging
import math
import os

import tensorflow as tf

from albert_tf import checkpoints, fileio
from albert_tf.errors import UsageError

BEST_DIR = "best_checkpoint"
BEST_JSON = "best_checkpoint.json"
HISTORY_JSON = "eval_history.json"
RESULTS_TXT = "eval_results.txt"


def format_value(value):
    return repr(value) if isinstance(value, float) else str(value)


def is_better(value, best):
    """Whether metric `value` beats `best` (higher is better; None = nothing yet); NaN never wins."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    if best is None or (isinstance(best, float) and math.isnan(best)):
        return True
    return value > best


def copy_checkpoint(prefix, output_dir, step):
    """Copies the files of checkpoint `prefix` to `output_dir/best_checkpoint/ckpt-<step>`, replacing the
    previous best atomically. Returns the new prefix."""
    target = os.path.join(output_dir, BEST_DIR)
    name = f"ckpt-{step}"
    with fileio.atomic_path(target, directory=True, replace_directory_ok=True) as tmp:  # an empty folder
        for source in tf.io.gfile.glob(prefix + ".*"):
            tf.io.gfile.copy(source, os.path.join(tmp, name + source[len(prefix):]))
        with tf.io.gfile.GFile(os.path.join(tmp, "checkpoint"), "w") as f:
            f.write(f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n')
    return os.path.join(target, name)


class CheckpointEvaluator:
    """Evaluates checkpoints with `evaluate(step) -> results` (the weights in the model) and records them.

    Args:
      model: the model the checkpoints are restored into.
      evaluate: callable(step) -> dict of results for the model's current weights.
      metric: the result that picks the best checkpoint (higher is better).
      output_dir: where the records live.
      write: False on non-chief workers (they evaluate too, under multi-worker collectives, but write nothing).
    """

    def __init__(self, model, evaluate, metric, output_dir, write=True):
        self.model = model
        self._evaluate = evaluate
        self.metric = metric
        self.output_dir = output_dir
        self.write = write
        self.history = {}
        self.best = None
        stored = _read_json(os.path.join(output_dir, HISTORY_JSON))
        if stored and stored.get("metric") == metric:
            self.history = {int(k): v for k, v in stored.get("results", {}).items()}
        best = _read_json(os.path.join(output_dir, BEST_JSON))
        if best and best.get("metric") == metric:
            self.best = best

    def evaluate_weights(self, step):
        """Results of the model's current weights (not recorded)."""
        results = dict(self._evaluate(step))
        results["global_step"] = int(step)
        if self.metric not in results:
            raise UsageError(f"metric {self.metric!r} is not among the results ({', '.join(sorted(results))})")
        return results

    def evaluate_checkpoint(self, prefix, step, weights_loaded=False):
        """Evaluates checkpoint `prefix` (restoring it unless `weights_loaded`), records the results and, if it
        is the best so far, copies it to `best_checkpoint/`."""
        if not weights_loaded:
            with checkpoints.errors.reading(prefix):
                tf.train.Checkpoint(model=self.model).read(prefix).expect_partial()
        results = self.evaluate_weights(step)
        logging.info("Eval results at step %d: %s", step,
                     ", ".join(f"{k}={format_value(v)}" for k, v in sorted(results.items())))
        self.history[int(step)] = results
        value = results[self.metric]
        if is_better(value, None if self.best is None else self.best["value"]):
            self.best = {"step": int(step), "metric": self.metric, "value": value, "results": results,
                         "checkpoint": os.path.join(BEST_DIR, f"ckpt-{step}")}
            if self.write:
                copy_checkpoint(prefix, self.output_dir, step)
                fileio.write_json(os.path.join(self.output_dir, BEST_JSON), self.best)
            logging.info("New best %s = %s at step %d", self.metric, format_value(value), step)
        self._write_records()
        return results

    def _write_records(self):
        if not self.write:
            return
        fileio.write_json(os.path.join(self.output_dir, HISTORY_JSON),
                          {"metric": self.metric, "results": {str(k): v for k, v in sorted(self.history.items())}})
        lines = []
        for step in sorted(self.history):
            results = self.history[step]
            lines.extend(f"{key} = {format_value(results[key])}" for key in sorted(results))
            lines.append("=" * 50)
        if self.best is not None:
            lines.append(f"best_step = {self.best['step']}")
            lines.append(f"best_{self.metric} = {format_value(self.best['value'])}")
        fileio.write_text(os.path.join(self.output_dir, RESULTS_TXT), "\n".join(lines) + "\n")


def best_checkpoint_prefix(output_dir):
    """The prefix in `output_dir/best_checkpoint/`, or None; a `checkpoint` state file there that is not one raises
    `CorruptCheckpointError` naming it."""
    directory = os.path.join(output_dir, BEST_DIR)
    return checkpoints.latest_checkpoint(directory) if tf.io.gfile.isdir(directory) else None


def _read_json(path):
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path, "r") as f:
        return json.load(f)
