r"""Fine-tuning on real lengths: dynamic padding (and length bucketing) against padding to --max_seq_length, for
`run_classifier.py` training and prediction and for `run_squad.py` prediction, with the predictions compared.

    python -m bench.bench_finetuning                                   # everything: ~40 min on 2 quiet cores
    python -m bench.bench_finetuning --parts=glue_speed --rounds=3 --seq_lengths=128
    python -m bench.bench_finetuning --parts=accuracy --accuracy_seeds=1,2 --accuracy_steps=500

Flags:
  --parts             what to run, comma-separated: `glue_speed`, `squad_speed`, `accuracy`, `squad_identity`
                      (all four).
  --glue_dir          the GLUE folder (../shared/data/glue). SST-2 gives single sentences; MNLI is not there, so
                      MRPC gives the sentence pairs (`--pair_task`; MNLI's pairs are of similar length, ~40-60
                      pieces).
  --pair_task         the GLUE pair task (mrpc).
  --squad_file        SQuAD questions for the SQuAD parts (../shared/data/squad/dev-v1.1.json.zip).
  --speed_preset      AlbertConfig preset whose shape is timed (base_v2), randomly initialised.
  --accuracy_config   the model trained for the accuracy and identity parts (data/albert_config_tiny.json, from
                      scratch; max_position_embeddings raised to 512 for SQuAD).
  --seq_lengths       --max_seq_length values of the classifier timings (128,512).
  --squad_seq_lengths --max_seq_length values of the SQuAD timings (384,512; --doc_stride 128).
  --rounds            rounds; every time is the MEDIAN over rounds (3). Rounds go over every configuration in
                      turn, so load from other processes hits all alike.
  --train_batch_size  classifier training batch of the timings (8; the per-step cost grows linearly with it).
  --fixed_train_steps, --dynamic_train_steps
                      timed training steps per round (2 padded to max_seq_length, 8 with dynamic padding: their
                      length varies, so more are averaged), after an untimed one.
  --train_examples    training examples sampled (seed 0) from each task's train.tsv for the timings (10000).
  --predict_examples  dev examples predicted per round in the timings (64; batch 8, the original's default).
  --squad_questions   questions of --squad_file in the SQuAD timings (32).
  --accuracy_steps, --accuracy_seeds, --accuracy_init_checkpoint, --accuracy_learning_rate
                      SST-2 (full train set, --max_seq_length 128, batch 64, learning rate 1e-3, 10 % warm-up;
                      from random initialisation, or from a checkpoint such as bench_pretrain_finetune.py's
                      pretraining: from scratch, the tiny model still predicts the majority class after 2000 steps
                      at these settings), bucketing off and on, for each seed (1000 steps; seeds 1,2,3): dev accuracy
                      mean +- spread (max - min) over seeds, and the predictions of each trained model with and
                      without dynamic padding (and, as a negative control, with input_mask all ones).
  --squad_epochs      epochs of the tiny SQuAD models (v1.1 and v2.0 heads) trained on data/squad/dev-v1.1-
                      sample.json for the identity part (3).
  --work_dir          where features and runs go (a temporary directory, removed at the end).
  --output_json       where the table of figures goes, with the command and machine
                      (bench/results/bench_finetuning.json).

What is measured:
  * classifier training (glue_speed): the per-step time of `fit` on `ClassificationTask.train_dataset` (the
    records, shuffle, padding and bucketing `run_classifier.py` trains on) with the model and optimizer the runner
    builds (AdamW, clipping across replicas, graph mode), for padding to --max_seq_length, dynamic padding
    (`--dynamic_padding`, the default: the original's shuffled batches, each padded to its longest example) and
    dynamic padding with `--length_bucketing`;
  * classifier prediction (glue_speed): one pass over the dev examples of `glue.eval_dataset` (sorted within
    windows of 64 batches and cut to each batch's longest, or padded) through one persistent `tf.function`, and
    the logits of `ClassificationTask.logits` (what `run_classifier.py` writes) compared between the two:
    argmax agreement and max |difference|;
  * SQuAD prediction (squad_speed): windows of --squad_questions questions through `data.squad.prediction_dataset`
    (v2.0 head: dynamic padding is what `run_squad.py` uses for it) timed the same way, outputs compared;
  * accuracy: `run_classifier` itself, as above;
  * squad_identity: `run_squad` trained briefly (tiny model, v1.1 and v2.0), then predicting with and without
    dynamic padding: v2.0 through `run_squad` (predictions.json, nbest_predictions.json, null_odds.json
    compared); v1.1 (which `run_squad.py` pads to max_seq_length) with dynamic padding forced, to show why: the
    original's n-best ranks padding positions too, so cutting them changes answers.

The CPU model, its SIMD flags and the load average (before and after each part) are printed with the figures;
times are medians over rounds taken in one window, never the best round.
"""

import json
import os
import random
import statistics
import time

from bench.support import common  # first: the environment every benchmark needs

import keras
import numpy as np
import tensorflow as tf
from absl import app, flags
from absl import logging as absl_logging

from albert_tf.config import AlbertConfig
from albert_tf.data import glue, squad
from albert_tf.evaluation import squad_postprocessing as post
from albert_tf.model import dummy_inputs
from albert_tf.tasks.classification import ClassificationTask, ClassifierParams, run_classifier
from albert_tf.tasks.squad import INPUT_KEYS, SquadParams, TrainableSquad, padded_to, run_squad
from albert_tf.text.tokenization import FullTokenizer
from albert_tf.train.optimization import create_optimizer
from albert_tf.train.ordered_prediction import predict_in_order

ROOT = common.REPO
SPM = common.SPM_MODEL
SHARED = common.SHARED_DATA
GLUE_DIRS = {"sst-2": "SST-2", "mrpc": "MRPC", "rte": "RTE", "cola": "CoLA"}

FLAGS = flags.FLAGS
flags.DEFINE_list("parts", ["glue_speed", "squad_speed", "accuracy", "squad_identity"], "What to run.")
flags.DEFINE_string("glue_dir", os.path.join(SHARED, "glue"), "The GLUE folder.")
flags.DEFINE_string("pair_task", "mrpc", "The GLUE task giving sentence pairs.")
flags.DEFINE_string("squad_file", os.path.join(SHARED, "squad", "dev-v1.1.json.zip"), "SQuAD questions.")
flags.DEFINE_string("speed_preset", "base_v2", "Preset whose shape is timed.")
flags.DEFINE_string("accuracy_config", common.TINY_CONFIG, "Trained model.")
flags.DEFINE_list("seq_lengths", ["128", "512"], "Classifier --max_seq_length values.")
flags.DEFINE_list("squad_seq_lengths", ["384", "512"], "SQuAD --max_seq_length values.")
flags.DEFINE_integer("rounds", 3, "Rounds; every time is the median over them.")
flags.DEFINE_integer("train_batch_size", 8, "Classifier training batch of the timings.")
flags.DEFINE_integer("fixed_train_steps", 2, "Timed steps per round, padded to max_seq_length.")
flags.DEFINE_integer("dynamic_train_steps", 8, "Timed steps per round, dynamic padding.")
flags.DEFINE_integer("train_examples", 10000, "Training examples sampled for the timings.")
flags.DEFINE_integer("predict_examples", 64, "Dev examples predicted per round in the timings.")
flags.DEFINE_integer("squad_questions", 32, "Questions in the SQuAD timings.")
flags.DEFINE_integer("accuracy_steps", 1000, "SST-2 training steps of each accuracy run.")
flags.DEFINE_list("accuracy_seeds", ["1", "2", "3"], "Seeds of the accuracy runs.")
flags.DEFINE_string("accuracy_init_checkpoint", None, "Checkpoint the accuracy runs start from (e.g. the pretraining "
                    "of bench_pretrain_finetune.py); None: random initialisation.")
flags.DEFINE_float("accuracy_learning_rate", 1e-3, "Learning rate of the accuracy runs.")
flags.DEFINE_float("squad_epochs", 3.0, "Epochs of the tiny SQuAD models of the identity part.")
common.define_work_dir("features and runs")
common.define_output_json("bench_finetuning")

WARMUP_STEPS = 1
PREDICT_BATCH = 8
MODES = {"fixed": (False, False), "dynamic": (True, False), "dynamic+bucketing": (True, True)}


def log(message=""):
    print(message, flush=True)


def median(values):
    return statistics.median(values)


# ------------------------------------------------------------------------------------------------ data
def sample_glue(source, work, task, train_examples, dev_examples, seed=0):
    """A GLUE folder with `train_examples` rows of `task`'s train.tsv (sampled) and its first `dev_examples` dev
    rows (None: all), headers kept."""
    folder = GLUE_DIRS[task]
    os.makedirs(os.path.join(work, folder), exist_ok=True)
    for split, keep in (("train", train_examples), ("dev", dev_examples)):
        with open(os.path.join(source, folder, f"{split}.tsv"), encoding="utf-8") as f:
            header, *rows = f.readlines()
        if keep is not None and keep < len(rows):
            rows = random.Random(seed).sample(rows, keep) if split == "train" else rows[:keep]
        with open(os.path.join(work, folder, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.writelines([header] + rows)
    return work


def classifier_task(params):
    """A `ClassificationTask` checked and prepared as the runner does (features cached in params.cached_dir)."""
    strategy = tf.distribute.get_strategy()
    task = ClassificationTask()
    task.check(params, strategy)
    task.prepare(params, strategy, params.cached_dir)
    return task


def padded_tokens(lengths, batch, sort_window=None):
    """Tokens a pass computes when each batch is cut to its longest example (sorted within windows of
    `sort_window` examples, if given), as a fraction of padding all to the longest possible."""
    lengths = list(lengths)
    if sort_window:
        lengths = [n for i in range(0, len(lengths), sort_window) for n in sorted(lengths[i:i + sort_window])]
    return sum(max(lengths[i:i + batch]) * len(lengths[i:i + batch]) for i in range(0, len(lengths), batch))


# ------------------------------------------------------------------------------------------------ timing
class StepTimes(keras.callbacks.Callback):
    """Wall time at the end of every training step (the loss is read, so the step has finished)."""

    def on_train_begin(self, logs=None):
        self.times = [time.perf_counter()]

    def on_train_batch_end(self, batch, logs=None):
        float(logs["loss"])
        self.times.append(time.perf_counter())


def seconds_per_step(model, dataset, steps):
    """Mean seconds of `steps` training steps after WARMUP_STEPS untimed ones (one `fit` call)."""
    timer = StepTimes()
    model.fit(dataset, epochs=1, steps_per_epoch=WARMUP_STEPS + steps, verbose=0, callbacks=[timer])
    return (timer.times[-1] - timer.times[WARMUP_STEPS]) / steps


def inference_fn(model):
    return tf.function(lambda inputs: model(inputs, training=False), reduce_retracing=True)


def seconds_per_pass(infer, dataset_fn, keys):
    """Seconds of one pass of `infer` over a fresh `dataset_fn()` (outputs fetched)."""
    start = time.perf_counter()
    for batch in dataset_fn():
        tf.nest.map_structure(lambda t: t.numpy(), infer({k: batch[k] for k in keys if k in batch}))
    return time.perf_counter() - start


def compare(reference, candidate, valid=None):
    """(argmax agreement over the last axis, max |difference|) of two arrays (or dicts of them), on `valid`."""
    if isinstance(reference, dict):
        return {k: compare(reference[k], candidate[k], None if valid is None else valid.get(k))
                for k in reference}
    diff = np.abs(reference.astype(np.float64) - candidate.astype(np.float64))
    if valid is not None:
        diff = np.where(valid, diff, 0.0)
    agree = float(np.mean(reference.argmax(-1) == candidate.argmax(-1))) if reference.ndim > 1 else None
    return agree, float(diff.max()) if diff.size else 0.0


def glue_speed(work, config, table):
    """Classifier training and prediction times, fixed vs dynamic padding (and bucketing), per task and length."""
    tasks = ["sst-2", FLAGS.pair_task]
    model = None
    configs = {}
    for task_name in tasks:
        data_dir = sample_glue(FLAGS.glue_dir, os.path.join(work, "glue_speed"), task_name, FLAGS.train_examples,
                               FLAGS.predict_examples)
        for length in map(int, FLAGS.seq_lengths):
            for mode, (dynamic, bucketing) in MODES.items():
                params = ClassifierParams(
                    albert_config=config, output_dir=os.path.join(work, "unused"), task_name=task_name,
                    data_dir=data_dir, spm_model_file=SPM, cached_dir=os.path.join(work, "cache"),
                    max_seq_length=length, do_train=True, do_eval=True, train_batch_size=FLAGS.train_batch_size,
                    eval_batch_size=PREDICT_BATCH, dynamic_padding=dynamic, length_bucketing=bucketing,
                    train_step=10 ** 6, log_every=0)
                task = classifier_task(params)
                if model is None:
                    model = task.build_model(params)
                    model.compile(optimizer=create_optimizer("adamw", 1e-5, 10 ** 6, 0), jit_compile=False,
                                  **task.compile_args(params))
                configs[(task_name, length, mode)] = (task, params)
    infer = inference_fn(model)
    times = {}
    for round_index in range(FLAGS.rounds):
        for key, (task, params) in configs.items():
            steps = FLAGS.fixed_train_steps if key[2] == "fixed" else FLAGS.dynamic_train_steps
            dataset = task.train_dataset(params, tf.distribute.InputContext(), 0)
            times.setdefault(key + ("train",), []).append(seconds_per_step(model, dataset, steps))
            if key[2] == "dynamic+bucketing":
                continue  # bucketing changes training batches only
            features = task.features["dev"]

            def dataset_fn(features=features, params=params):
                return glue.eval_dataset(features.path, params.max_seq_length, PREDICT_BATCH, False,
                                         features.num_examples, dynamic_padding=params.dynamic_padding)

            if round_index == 0:
                seconds_per_pass(infer, dataset_fn, glue.FEATURE_NAMES)  # traces
            times.setdefault(key + ("predict",), []).append(seconds_per_pass(infer, dataset_fn, glue.FEATURE_NAMES))
        log(f"  glue round {round_index + 1}/{FLAGS.rounds} done (load {common.load_average()})")
    strategy = tf.distribute.get_strategy()
    for task_name in tasks:
        for length in map(int, FLAGS.seq_lengths):
            logits = {mode: configs[(task_name, length, mode)][0].logits(
                model, configs[(task_name, length, mode)][1], strategy, "dev", PREDICT_BATCH)
                for mode in ("fixed", "dynamic")}
            agree, max_diff = compare(logits["fixed"], logits["dynamic"])
            task = configs[(task_name, length, "fixed")][0]
            lengths = [int(np.sum(r)) for r in _masks(task.features["dev"].path, length)]
            train = {m: median(times[(task_name, length, m, "train")]) for m in MODES}
            predict = {m: median(times[(task_name, length, m, "predict")]) for m in ("fixed", "dynamic")}
            table.append({
                "part": "glue_speed", "task": task_name, "max_seq_length": length,
                "train_s_per_step": train,
                "train_speedup": {m: train["fixed"] / train[m] for m in MODES if m != "fixed"},
                "predict_s_per_pass": predict, "predict_speedup": predict["fixed"] / predict["dynamic"],
                "predict_examples": len(lengths), "mean_length": float(np.mean(lengths)),
                "predict_tokens_fraction": padded_tokens(lengths, PREDICT_BATCH, 64 * PREDICT_BATCH)
                / (length * len(lengths)),
                "predictions": {"argmax_agreement": agree, "max_abs_logit_diff": max_diff}})


def _masks(path, length):
    spec = {"input_mask": tf.io.FixedLenFeature([length], tf.int64)}
    return [tf.io.parse_single_example(r, spec)["input_mask"].numpy() for r in tf.data.TFRecordDataset(path)]


def squad_windows(work, length, questions):
    """Prediction windows (a `FeatureSet`) of the first `questions` questions of --squad_file."""
    tokenizer = FullTokenizer(spm_model_file=SPM)
    examples, stats = squad.read_examples(FLAGS.squad_file, False)
    return squad.build_or_load_features(FLAGS.squad_file, os.path.join(work, f"squad_{length}_{questions}.tfrecord"),
                                        tokenizer, length, 128, 64, False, examples=(examples[:questions], stats))


def squad_speed(work, config, table):
    """SQuAD v2.0-head prediction times, fixed vs dynamic padding, per --max_seq_length."""
    model = TrainableSquad(config, version_2=True)
    model(dummy_inputs(seq_length=4), training=False)
    sets = {length: squad_windows(work, length, FLAGS.squad_questions)
            for length in map(int, FLAGS.squad_seq_lengths)}
    infers = {(length, dynamic): inference_fn(padded_to(model, length) if dynamic else model)
              for length in sets for dynamic in (False, True)}
    times = {}
    for round_index in range(FLAGS.rounds):
        for (length, dynamic), infer in infers.items():
            data = sets[length]

            def dataset_fn(data=data, length=length, dynamic=dynamic):
                return squad.prediction_dataset(data.feature_file, length, PREDICT_BATCH, data.num_features,
                                                dynamic_padding=dynamic, min_length=5)

            if round_index == 0:
                seconds_per_pass(infer, dataset_fn, INPUT_KEYS)  # traces
            times.setdefault((length, dynamic), []).append(seconds_per_pass(infer, dataset_fn, INPUT_KEYS))
        log(f"  squad round {round_index + 1}/{FLAGS.rounds} done (load {common.load_average()})")
    for length, data in sets.items():
        outputs = {dynamic: predict_in_order(
            padded_to(model, length) if dynamic else model,
            lambda context, dynamic=dynamic, data=data, length=length: squad.prediction_dataset(
                data.feature_file, length, PREDICT_BATCH, data.num_features, context, dynamic_padding=dynamic,
                min_length=5),
            data.num_features, PREDICT_BATCH, INPUT_KEYS) for dynamic in (False, True)}
        valid = np.array([f.input_mask for f in data.features], bool)
        diffs = compare(outputs[False], outputs[True], {"start_log_probs": valid})
        same_index = {k: float(np.mean(outputs[False][k] == outputs[True][k]))
                      for k in ("start_top_index", "end_top_index")}
        predictions = {d: v2_predictions(data, outputs[d]) for d in (False, True)}
        lengths = [sum(f.input_mask) for f in data.features]
        fixed, dynamic = median(times[(length, False)]), median(times[(length, True)])
        table.append({
            "part": "squad_speed", "head": "v2.0", "max_seq_length": length, "questions": len(data.examples),
            "windows": data.num_features, "mean_window_length": float(np.mean(lengths)),
            "predict_s_per_pass": {"fixed": fixed, "dynamic": dynamic}, "predict_speedup": fixed / dynamic,
            "predict_tokens_fraction": padded_tokens(lengths, PREDICT_BATCH, 64 * PREDICT_BATCH)
            / (length * len(lengths)),
            "max_abs_diff": {k: v[1] for k, v in diffs.items() if outputs[False][k].dtype.kind == "f"},
            "same_top_indices": same_index,
            "same_predictions": sum(predictions[False][q] == predictions[True][q] for q in predictions[False]),
            "of": len(predictions[False])})


def v2_predictions(data, outputs, n_best_size=20, max_answer_length=30):
    """predictions.json of v2.0 outputs (threshold 0.0), as `SquadTask` post-processes them."""
    result_dict, cls_dict = {}, {}
    results = post.raw_results_v2([f.unique_id for f in data.features], outputs)
    post.accumulate_predictions_v2(result_dict, cls_dict, data.examples, data.features, results, n_best_size,
                                   max_answer_length, 5, 5)
    return post.write_predictions_v2(result_dict, cls_dict, data.examples, data.features, n_best_size, 0.0)[0]


def v1_predictions(data, outputs, n_best_size=20, max_answer_length=30):
    result_dict = {}
    results = post.raw_results_v1([f.unique_id for f in data.features], outputs["start_logits"],
                                  outputs["end_logits"])
    post.accumulate_predictions_v1(result_dict, data.examples, data.features, results, n_best_size,
                                   max_answer_length)
    return post.write_predictions_v1(result_dict, data.examples, data.features, n_best_size)[0]


# ------------------------------------------------------------------------------------------------ accuracy
def accuracy(work, table):
    """SST-2 (from scratch, or from --accuracy_init_checkpoint), bucketing off and on, per seed; identical
    predictions of every trained model."""
    config = AlbertConfig.from_json_file(FLAGS.accuracy_config)
    data_dir = sample_glue(FLAGS.glue_dir, os.path.join(work, "glue_full"), "sst-2", None, None)
    runs = {}
    for seed in map(int, FLAGS.accuracy_seeds):
        for bucketing in (False, True):
            out = os.path.join(work, f"sst2_seed{seed}_bucketing{int(bucketing)}")
            params = ClassifierParams(
                albert_config=config, output_dir=out, task_name="sst-2", data_dir=data_dir, spm_model_file=SPM,
                cached_dir=os.path.join(work, "cache"), max_seq_length=128, do_train=True, do_eval=True,
                train_batch_size=64, eval_batch_size=128, learning_rate=FLAGS.accuracy_learning_rate,
                train_step=FLAGS.accuracy_steps, init_checkpoint=FLAGS.accuracy_init_checkpoint,
                warmup_step=FLAGS.accuracy_steps // 10, save_checkpoints_steps=FLAGS.accuracy_steps,
                iterations_per_loop=100, length_bucketing=bucketing, random_seed=seed, log_every=0)
            outcome = run_classifier(params)
            runs[(seed, bucketing)] = {"accuracy": outcome["eval_results"]["eval_accuracy"],
                                       "train_seconds": outcome["train_seconds"],
                                       "identity": trained_identity(params)}
            log(f"  SST-2 seed {seed} bucketing {bucketing}: dev accuracy {runs[(seed, bucketing)]['accuracy']:.4f}"
                f" in {outcome['train_seconds']:.0f} s (load {common.load_average()})")
    for bucketing in (False, True):
        accuracies = [runs[(s, bucketing)]["accuracy"] for s in map(int, FLAGS.accuracy_seeds)]
        table.append({"part": "accuracy", "length_bucketing": bucketing, "dev_accuracies": accuracies,
                      "mean": float(np.mean(accuracies)), "spread": float(max(accuracies) - min(accuracies)),
                      "train_seconds": [runs[(s, bucketing)]["train_seconds"] for s in map(int, FLAGS.accuracy_seeds)],
                      "identity": [runs[(s, bucketing)]["identity"] for s in map(int, FLAGS.accuracy_seeds)]})


def trained_identity(params):
    """Dev logits of the trained model: dynamic padding vs padding to max_seq_length, and the negative control
    (input_mask all ones: the padding is read)."""
    task = classifier_task(params)
    model = task.build_model(params)
    tf.train.Checkpoint(model=model).read(tf.train.latest_checkpoint(params.output_dir)).expect_partial()
    strategy = tf.distribute.get_strategy()
    logits = {}
    for dynamic in (False, True):
        logits[dynamic] = task.logits(model, ClassifierParams(**{**vars(params), "dynamic_padding": dynamic}),
                                      strategy, "dev", params.eval_batch_size)
    agree, max_diff = compare(logits[False], logits[True])
    batch = {k: [] for k in glue.FEATURE_NAMES}
    spec = glue.record_spec(params.max_seq_length, False)
    for record in tf.data.TFRecordDataset(task.features["dev"].path):
        parsed = tf.io.parse_single_example(record, spec)
        for k in batch:
            batch[k].append(parsed[k].numpy().astype(np.int32))
    batch = {k: np.stack(v) for k, v in batch.items()}
    batch["input_mask"] = np.ones_like(batch["input_mask"])
    ones = np.concatenate([model({k: v[i:i + 128] for k, v in batch.items()}, training=False).numpy()
                           for i in range(0, len(batch["input_ids"]), 128)])
    return {"argmax_agreement": agree, "max_abs_logit_diff": max_diff,
            "mask_ones_max_abs_diff": float(np.abs(ones - logits[False]).max()),
            "mask_ones_argmax_agreement": float(np.mean(ones.argmax(-1) == logits[False].argmax(-1)))}


def squad_identity(work, table):
    """Tiny SQuAD models trained briefly; predictions with and without dynamic padding."""
    raw = json.load(open(FLAGS.accuracy_config, encoding="utf-8"))
    config = AlbertConfig(**{**raw, "max_position_embeddings": max(raw["max_position_embeddings"], 512)})
    sample = os.path.join(ROOT, "data", "squad", "dev-v1.1-sample.json")
    for version_2 in (False, True):
        out = os.path.join(work, f"squad_v{2 if version_2 else 1}")
        common = dict(albert_config=config, spm_model_file=SPM, output_dir=out, predict_file=sample,
                      version_2_with_negative=version_2, max_seq_length=384, predict_batch_size=PREDICT_BATCH,
                      null_score_diff_threshold=0.0, log_every=0)
        trained = run_squad(SquadParams(**common, train_file=sample, do_train=True, do_predict=True,
                                        dynamic_padding=False, train_batch_size=16, learning_rate=5e-4,
                                        num_train_epochs=FLAGS.squad_epochs))
        files = ("predictions", "nbest_predictions") + (("null_odds",) if version_2 else ())
        fixed = {name: json.load(open(os.path.join(out, f"{name}.json"), encoding="utf-8")) for name in files}
        row = {"part": "squad_identity", "head": "v2.0" if version_2 else "v1.1",
               "f1_on_its_training_questions": trained["eval_results"]["f1"], "questions": len(fixed["predictions"])}
        if version_2:
            run_squad(SquadParams(**common, do_predict=True, dynamic_padding=True))
            dynamic = {name: json.load(open(os.path.join(out, f"{name}.json"), encoding="utf-8")) for name in files}
            row["run_squad_same_predictions"] = sum(fixed["predictions"][q] == dynamic["predictions"][q]
                                                    for q in fixed["predictions"])
            row["same_nbest_texts"] = sum([e["text"] for e in fixed["nbest_predictions"][q]]
                                          == [e["text"] for e in dynamic["nbest_predictions"][q]]
                                          for q in fixed["nbest_predictions"])
            row["max_abs_null_odds_diff"] = max(abs(fixed["null_odds"][q] - dynamic["null_odds"][q])
                                                for q in fixed["null_odds"])
        else:
            row["forced_dynamic_same_predictions"] = forced_v1(out, config, sample)
        table.append(row)


def forced_v1(out, config, sample):
    """Predictions of the v1.1 model with dynamic padding forced (run_squad.py never does it) equal to padding to
    max_seq_length, counted."""
    model = TrainableSquad(config, version_2=False)
    model(dummy_inputs(seq_length=4), training=False)
    tf.train.Checkpoint(model=model).read(tf.train.latest_checkpoint(out)).expect_partial()
    data = squad.build_or_load_features(sample, os.path.join(out, "predict.tf_record"),
                                        FullTokenizer(spm_model_file=SPM), 384, 128, 64, False)
    predictions = {}
    for dynamic in (False, True):
        outputs = predict_in_order(
            padded_to(model, 384) if dynamic else model,
            lambda context, dynamic=dynamic: squad.prediction_dataset(data.feature_file, 384, PREDICT_BATCH,
                                                                      data.num_features, context,
                                                                      dynamic_padding=dynamic),
            data.num_features, PREDICT_BATCH, INPUT_KEYS)
        predictions[dynamic] = v1_predictions(data, outputs)
    return sum(predictions[False][q] == predictions[True][q] for q in predictions[False])


# ------------------------------------------------------------------------------------------------ report
def report(table):
    log("\n=== Fine-tuning on real lengths: figures (medians over rounds) ===")
    for row in table:
        if row["part"] == "glue_speed":
            t, s = row["train_s_per_step"], row["train_speedup"]
            p = row["predictions"]
            log(f"{row['task']:>6} L={row['max_seq_length']:<3} train s/step: fixed {t['fixed']:.3f}, dynamic "
                f"{t['dynamic']:.3f} ({s['dynamic']:.2f}x), dynamic+bucketing {t['dynamic+bucketing']:.3f} "
                f"({s['dynamic+bucketing']:.2f}x) | predict {row['predict_examples']} ex (mean {row['mean_length']:.1f}"
                f" tokens): fixed {row['predict_s_per_pass']['fixed']:.2f} s, dynamic "
                f"{row['predict_s_per_pass']['dynamic']:.2f} s ({row['predict_speedup']:.2f}x; tokens "
                f"{row['predict_tokens_fraction']:.3f} of fixed) | argmax agreement {p['argmax_agreement']:.4f}, "
                f"max |logit diff| {p['max_abs_logit_diff']:.2e}")
        elif row["part"] == "squad_speed":
            log(f" SQuAD {row['head']} L={row['max_seq_length']} {row['questions']} questions, {row['windows']} "
                f"windows (mean {row['mean_window_length']:.1f} tokens): fixed "
                f"{row['predict_s_per_pass']['fixed']:.2f} s, "
                f"dynamic {row['predict_s_per_pass']['dynamic']:.2f} s ({row['predict_speedup']:.2f}x; tokens "
                f"{row['predict_tokens_fraction']:.3f} of fixed) | same predictions {row['same_predictions']}/"
                f"{row['of']}, same top indices {row['same_top_indices']}, max |diff| "
                + ", ".join(f"{k} {v:.1e}" for k, v in row["max_abs_diff"].items()))
        elif row["part"] == "accuracy":
            ids = row["identity"]
            start = f"from {FLAGS.accuracy_init_checkpoint}" if FLAGS.accuracy_init_checkpoint else "from scratch"
            log(f" SST-2 tiny {start}, length_bucketing={row['length_bucketing']}: dev accuracy "
                f"{100 * row['mean']:.2f} % +- {100 * row['spread'] / 2:.2f} (spread {100 * row['spread']:.2f}; "
                f"{', '.join(f'{100 * a:.2f}' for a in row['dev_accuracies'])}), train "
                f"{', '.join(f'{s:.0f}' for s in row['train_seconds'])} s | dynamic vs fixed padding: argmax "
                f"agreement {min(i['argmax_agreement'] for i in ids):.4f}, max |logit diff| "
                f"{max(i['max_abs_logit_diff'] for i in ids):.2e}; input_mask all ones (control): max |logit diff| "
                f"{min(i['mask_ones_max_abs_diff'] for i in ids):.2f}.."
                f"{max(i['mask_ones_max_abs_diff'] for i in ids):.2f}"
                f", argmax agreement {min(i['mask_ones_argmax_agreement'] for i in ids):.3f}")
        elif row["part"] == "squad_identity":
            extra = (f"run_squad dynamic vs fixed: same predictions {row['run_squad_same_predictions']}/"
                     f"{row['questions']}, same n-best texts {row['same_nbest_texts']}/{row['questions']}, max "
                     f"|null odds diff| {row['max_abs_null_odds_diff']:.1e}" if row["head"] == "v2.0" else
                     f"dynamic padding forced (run_squad.py pads v1.1): same predictions "
                     f"{row['forced_dynamic_same_predictions']}/{row['questions']}")
            log(f" SQuAD {row['head']} tiny (F1 {row['f1_on_its_training_questions']:.1f} on its training "
                f"questions): {extra}")


def main(argv):
    del argv
    absl_logging.set_verbosity(absl_logging.WARNING)
    tf.get_logger().setLevel("ERROR")
    model, simd = common.cpu_description()
    log(f"CPU: {model}, {os.cpu_count()} cores, SIMD: {' '.join(simd) or '-'}")
    log(f"TensorFlow {tf.__version__}, Keras {keras.__version__}; timed shape {FLAGS.speed_preset}, "
        f"{FLAGS.rounds} rounds")
    table = []
    speed_config = AlbertConfig.preset(FLAGS.speed_preset)
    parts = {"glue_speed": lambda work: glue_speed(work, speed_config, table),
             "squad_speed": lambda work: squad_speed(work, speed_config, table),
             "accuracy": lambda work: accuracy(work, table),
             "squad_identity": lambda work: squad_identity(work, table)}
    with common.scratch_dir(FLAGS.work_dir, "bench_finetuning_") as work:
        for name in FLAGS.parts:
            start = time.time()
            log(f"[{name}] load average before: {common.load_average()}")
            parts[name](work)
            log(f"[{name}] {time.time() - start:.0f} s; load average after: {common.load_average()}")
        report(table)
        common.write_result({"table": table}, FLAGS.output_json)


if __name__ == "__main__":
    app.run(main)
