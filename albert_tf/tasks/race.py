"""RACE multiple-choice reading comprehension, as the original's `run_race.py`.

What differs from the other tasks: the data (`data.race`: the RACE JSON files, four (article, question + option)
sequences per question, cached as the original's records), the model (`AlbertForMultipleChoice`), the metric
(accuracy, overall and per level; the best checkpoint is picked by it, as the original's polling loop did), the
prediction files (`eval_predictions.{json,tsv}` and `test_predictions.{json,tsv}`, plus `predict_results.txt`
when the test set has answers) and the export (ids, and with the tokenizer the `text` signature).

Unlike the original's predict step (which had a bug and never ran, see the README), prediction here covers every
test question, under any strategy.
"""

import dataclasses
import os

import keras
import tensorflow as tf

from albert_tf import fileio, task_table
from albert_tf.config import AlbertConfig
from albert_tf.data import race
from albert_tf.errors import DataError
from albert_tf.evaluation import race as race_metrics
from albert_tf.model import AlbertForMultipleChoice
from albert_tf.serving.race import export_race_model
from albert_tf.settings import NON_NEGATIVE, POSITIVE, Range, setting
from albert_tf.tasks.base import TaskBase
from albert_tf.tasks.common_settings import (
    albert_config_setting,
    do_lower_case_setting,
    init_checkpoint_setting,
    output_dir_setting,
    spm_model_file_setting,
    vocab_file_setting,
)
from albert_tf.train import runner
from albert_tf.train.ordered_prediction import predict_in_order
from albert_tf.train.runner import RUN_WRITES, RuntimeParams, Schedule
from albert_tf.train.steps import TrainStep

INPUT_KEYS = ("input_ids", "input_mask", "segment_ids")
RACE_WRITES = RUN_WRITES + ("eval_predictions.*", "test_predictions.*", "predict_results.txt")


@keras.saving.register_keras_serializable(package="albert_tf")
class TrainableMultipleChoice(TrainStep, AlbertForMultipleChoice):
    """`AlbertForMultipleChoice` with the project's train/test step (the original's clipping across replicas)."""


@dataclasses.dataclass(kw_only=True)
class RaceParams(RuntimeParams):
    """Everything a RACE run needs; each `setting` is also `run_race.py`'s flag of the same name and default (the
    original's), with its help text."""

    random_seed: int = setting(12345, "Seed of the initialisation, dropout and input order.")
    albert_config: AlbertConfig = albert_config_setting("The albert_config.json of the pre-trained model.")
    data_dir: str = setting(help_text="Directory holding RACE/{train,dev,test}/{middle,high}/*.txt. Without it: the "
                                      "demo.", flag_default=None, role="input_dir")
    output_dir: str = output_dir_setting("Where checkpoints, results and predictions are written.", RACE_WRITES)
    spm_model_file: str = spm_model_file_setting()
    vocab_file: str = vocab_file_setting()
    init_checkpoint: str = init_checkpoint_setting()
    do_lower_case: bool = do_lower_case_setting()
    dropout_prob: float = setting(0.1, "Dropout probability before the output layer.",
                                  bounds=Range(0, 1, high_open=True))
    max_seq_length: int = setting(512, "Tokens per (article, question + option) sequence, padded or truncated to "
                                       "this length.", bounds=Range(3))
    max_qa_length: int = setting(128, "Question + option tokens kept (the last ones).", bounds=POSITIVE)
    num_keep_checkpoint: int = setting(5, "Maximum number of checkpoints kept.", bounds=NON_NEGATIVE, trains=False)
    high_only: bool = setting(False, "Use only the high school questions.")
    middle_only: bool = setting(False, "Use only the middle school questions.")
    do_train: bool = setting(True, "Whether to run training.", trains=False, required=("do_eval", "do_predict"))
    do_eval: bool = setting(True, "Whether to evaluate on the dev set.", trains=False)
    do_predict: bool = setting(False, "Whether to predict on the test set.", trains=False)
    train_file: str = setting(None, "TFRecord cache of the training features (built if absent or stale; default "
                                    "<output_dir>/train.tf_record).", role="output_file")
    eval_file: str = setting(None, "TFRecord cache of the dev features (default <output_dir>/eval.tf_record).",
                             role="output_file", trains=False)
    predict_file: str = setting(None, "TFRecord cache of the test features (default "
                                      "<output_dir>/predict.tf_record).", role="output_file", trains=False)
    train_batch_size: int = setting(32, "Global batch size for training.", bounds=POSITIVE)
    eval_batch_size: int = setting(8, "Global batch size for eval.", bounds=POSITIVE, trains=False)
    predict_batch_size: int = setting(8, "Global batch size for predict.", bounds=POSITIVE, trains=False)
    learning_rate: float = setting(1e-5, "The initial learning rate.", bounds=Range(0, low_open=True))
    train_step: int = setting(12000, "Total number of training steps.", bounds=NON_NEGATIVE, trains=False)
    warmup_step: int = setting(1000, "Steps of linear learning-rate warmup.", bounds=NON_NEGATIVE)
    save_checkpoints_steps: int = setting(100, "How often to save a checkpoint.", bounds=POSITIVE, trains=False)
    iterations_per_loop: int = setting(1000, "Steps run per call into the device (Keras steps_per_execution).",
                                       bounds=POSITIVE, trains=False)
    optimizer: str = setting("adamw", "The optimizer (the original uses adamw for RACE).", choices=("adamw", "lamb"))
    export_dir: str = setting(None, "Where to write the SavedModel, as <export_dir>/<global_step>/ (default after "
                                    "training: <output_dir>/saved_model).", role="output_dir", trains=False)


def build_model(config, dropout_prob=0.1):
    """A trainable `AlbertForMultipleChoice` with its weights built."""
    model = TrainableMultipleChoice(config, num_choices=race.NUM_CHOICES, dropout_prob=dropout_prob)
    ones = tf.ones((1, race.NUM_CHOICES, 2), tf.int32)
    model({"input_ids": ones, "input_mask": ones, "segment_ids": tf.zeros_like(ones)}, training=False)
    return model


def write_predictions(prefix, examples, logits):
    """Writes `<prefix>.json` (see `evaluation.race.predictions`) and `<prefix>.tsv` (question_id, level, answer,
    the four probabilities, label), each atomically. Returns the two paths."""
    preds = race_metrics.predictions(examples, logits)
    json_path = fileio.write_json(prefix + ".json", preds)
    lines = ["question_id\tlevel\tanswer\t" + "\t".join(f"prob_{l}" for l in race_metrics.LABELS) + "\tlabel\n"]
    for qid, entry in preds.items():
        lines.append("\t".join([qid, entry["level"], entry["answer"], *(f"{p:.6f}" for p in entry["probabilities"]),
                                entry.get("label", "")]) + "\n")
    return json_path, fileio.write_text(prefix + ".tsv", "".join(lines))


class RaceTask(TaskBase):
    """The `run_race.py` task."""

    name = "race"

    def __init__(self):
        self.tokenizer_ = None
        self.examples = {}
        self.record_files = {}

    def check(self, params, strategy):
        race.check_lengths(params.max_seq_length, params.max_qa_length)
        race.levels_to_read(params.high_only, params.middle_only)
        self.check_batch_sizes(params, strategy, ["train_batch_size", "eval_batch_size", "predict_batch_size"])
        self.tokenizer_ = self.tokenizer(params)
        for split, on in (("train", params.do_train), ("dev", params.do_eval), ("test", params.do_predict)):
            if not on:
                continue
            examples = race.read_race(params.data_dir, split, params.high_only, params.middle_only)
            if not examples:
                raise DataError(f"the {split} set under {params.data_dir} holds no question")
            if split == "train" and any(e.label is None for e in examples):
                raise DataError("the train set has questions without answers")
            if split == "dev" and all(e.label is None for e in examples):
                raise DataError(f"the dev set under {params.data_dir} has no answers to evaluate against")
            self.examples[split] = examples

    def prepare(self, params, strategy, cache_dir):
        names = {"train": params.train_file or os.path.join(cache_dir, "train.tf_record"),
                 "dev": params.eval_file or os.path.join(cache_dir, "eval.tf_record"),
                 "test": params.predict_file or os.path.join(cache_dir, "predict.tf_record")}
        for split, examples in self.examples.items():
            path, ordered = race.prepare_records(examples, self.tokenizer_, names[split], params.max_seq_length,
                                                 params.max_qa_length, split,
                                                 shuffle_seed=params.random_seed if split == "train" else None)
            self.record_files[split] = path
            if ordered is not None:
                self.examples[split] = ordered

    def train_files(self, params):
        return [self.record_files["train"]]

    def primary_metric(self, params):
        return task_table.get(self.name).scoring.primary

    def train_schedule(self, params):
        return Schedule(params.train_step, params.warmup_step, 0, 1.0, params.optimizer, params.learning_rate,
                        params.save_checkpoints_steps, params.num_keep_checkpoint, params.iterations_per_loop,
                        params.train_batch_size)

    def build_model(self, params):
        return build_model(params.albert_config, params.dropout_prob)

    def compile_args(self, params):
        return {"metrics": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]}

    def train_dataset(self, params, input_context, skip_batches):
        return race.train_dataset(self.record_files["train"], params.max_seq_length,
                                  input_context.get_per_replica_batch_size(params.train_batch_size),
                                  seed=params.random_seed, input_context=input_context, skip_batches=skip_batches)

    def has_dev(self, params):
        return params.do_eval

    def logits(self, model, params, strategy, split, batch_size):
        """float32 logits [questions, 4] of a split, in record order."""
        path, count = self.record_files[split], len(self.examples[split])
        return predict_in_order(
            model, lambda context: race.inference_dataset(path, params.max_seq_length, count, batch_size, context),
            count, batch_size, INPUT_KEYS, strategy)

    def evaluate(self, model, params, strategy):
        return race_metrics.accuracy_by_level(self.examples["dev"],
                                              self.logits(model, params, strategy, "dev", params.eval_batch_size))

    def predict(self, model, params, strategy, output_dir):
        outcome = {}
        if params.do_eval:
            logits = self.logits(model, params, strategy, "dev", params.eval_batch_size)
            outcome["eval_predictions"] = write_predictions(os.path.join(output_dir, "eval_predictions"),
                                                            self.examples["dev"], logits)
        examples = self.examples["test"]
        logits = self.logits(model, params, strategy, "test", params.predict_batch_size)
        outcome["predictions"] = write_predictions(os.path.join(output_dir, "test_predictions"), examples, logits)
        results = race_metrics.accuracy_by_level(examples, logits)
        if results:
            outcome["predict_results"] = results
            outcome["predict_results_file"] = fileio.write_results(os.path.join(output_dir, "predict_results.txt"),
                                                                   results)
        return outcome

    def export(self, model, params, export_dir):
        return export_race_model(model, export_dir, tokenizer_file=params.spm_model_file or params.vocab_file,
                                 do_lower_case=params.do_lower_case, is_sentencepiece=bool(params.spm_model_file),
                                 max_seq_length=params.max_seq_length, max_qa_length=params.max_qa_length)


def run_race(params):
    """Trains (resuming from `output_dir`), evaluates every checkpoint on dev (keeping the best), predicts on test
    and exports, as `run_race.py` does; returns the runner's outcome."""
    return runner.run(RaceTask(), params)
