r"""Pretraining speed on this machine: the training step, the input pipeline and a checkpoint save (`throughput`),
and what online masking costs the input pipeline (`masking`).

    python -m bench.bench_pretraining [throughput] [flags]
    python -m bench.bench_pretraining masking [flags]

`throughput` (the default) was `python bench/bench_pretraining.py` and `masking` was `python bench/bench_masking.py`,
with the same flags; `python -m bench.bench_pretraining <subcommand> --help` lists a subcommand's flags.

throughput: the full training step, the input pipeline alone, a checkpoint save.

    python -m bench.bench_pretraining                  # base_v2 at seq 128 batch 8, and the demo's tiny config
    python -m bench.bench_pretraining --base_steps=10 --tiny_steps=400
    python -m bench.bench_pretraining --base_steps=1 --tiny_steps=10 --pipeline_batches=10 --saves=1 \
        --output_json=/tmp/p.json                         # smoke run

Measures, on pretraining records made from the shipped corpus (seq 128, 20 predictions, as the demo's):
  * the full step (`TrainablePretraining` under `fit`: tf.data input, forward, MLM + SOP loss, backward, clipping
    across replicas, LAMB) in steps/s and examples/s, for the base_v2 shape (batch --base_batch_size, one step
    per call into TF) and for `data/albert_config_tiny.json` with the demo's batch 32 (--tiny_per_loop steps per
    call). The first --warmup_calls calls (tracing, pipeline warm-up) are excluded: the rate is taken between
    the callbacks that follow;
  * the input pipeline alone (`records.pretraining_dataset`, as training reads it) in examples/s, and its ratio
    to what each model consumes (the issue's target: at least 10x);
  * the cost of one checkpoint save of the base model with its LAMB state (`tf.train.CheckpointManager.save`, as
    training saves), best of --saves.
The load average is printed before and after: other processes on the machine slow every figure. The figures go
to --output_json (bench/results/bench_pretraining.json), with the command and the machine.

masking: the cost of online masking (`--masked_lm_budget`): the training input pipeline's examples/s with the stored masks and
with new masks drawn on every pass, on records of the shipped corpus (max_predictions_per_seq 20), and the masked
predictions per sequence each gives.

    python -m bench.bench_pretraining masking [--seq_lengths=128,512] [--batch_size=256] [--batches=40] [--rounds=3]
    python -m bench.bench_pretraining masking --seq_lengths=128 --batches=2 --rounds=1 --output_json=/tmp/m.json   # smoke

Each rate is the median of --rounds runs of --batches batches after one warm-up batch, in one process; the
pipeline runs with its default parallelism (4 parse/mask calls) on however many cores the machine gives it. The
figures go to --output_json (bench/results/bench_masking.json), with the command and the machine.
"""

import glob
import os
import statistics
import tempfile
import time

from bench.support import common  # first: the environment every benchmark needs

import keras
import tensorflow as tf
from absl import flags

from albert_tf.config import AlbertConfig
from albert_tf.data import masking, records
from albert_tf.data.pretraining import PretrainingConfig, create_pretraining_data
from albert_tf.model import dummy_inputs
from albert_tf.tasks.pretraining import TrainablePretraining
from albert_tf.text.tokenization import FullTokenizer
from albert_tf.train import optimization

REPO = common.REPO
FLAGS = flags.FLAGS
BOOKS = os.path.join(REPO, "data", "corpus", "gutenberg-*.txt")


def define_throughput_flags():
    """The flags of `throughput`."""
    flags.DEFINE_integer("seq_length", 128, "max_seq_length of the records and the model.")
    flags.DEFINE_integer("num_predictions", 20, "max_predictions_per_seq of the records.")
    flags.DEFINE_integer("base_batch_size", 8, "Batch of the base_v2 steps.")
    flags.DEFINE_integer("base_steps", 5, "Timed base_v2 steps (after the warm-up calls).")
    flags.DEFINE_integer("tiny_batch_size", 32, "Batch of the tiny config (the demo's).")
    flags.DEFINE_integer("tiny_per_loop", 10, "Steps per call for the tiny config (the demo runs 50).")
    flags.DEFINE_integer("tiny_steps", 30, "Timed tiny steps (a multiple of --tiny_per_loop).")
    flags.DEFINE_integer("warmup_calls", 1, "Calls into TF excluded from the rates (tracing, warm-up).")
    flags.DEFINE_integer("pipeline_batches", 1000, "Batches of the input pipeline timed (of --tiny_batch_size).")
    flags.DEFINE_integer("saves", 3, "Checkpoint saves timed (best reported).")
    flags.DEFINE_string("records", None, "Pretraining records to read (default: made from two shipped books).")
    common.define_work_dir("the records and checkpoints")
    common.define_output_json("bench_pretraining")



def make_records(work_dir, books, seq_length, num_predictions, name):
    """(path, instances) of records of the shipped books `books` (dupe_factor 1) in `work_dir`."""
    path = os.path.join(work_dir, name)
    config = PretrainingConfig(max_seq_length=seq_length, max_predictions_per_seq=num_predictions, dupe_factor=1)
    stats = create_pretraining_data(",".join(books), [path], spm_model_file=common.SPM_MODEL, config=config,
                                    num_workers=2)
    return path, stats.instances


def throughput_records(work_dir):
    """Records of the first two shipped books at --seq_length and --num_predictions."""
    books = sorted(glob.glob(BOOKS))[:2]
    start = time.time()
    path, instances = make_records(work_dir, books, FLAGS.seq_length, FLAGS.num_predictions, "bench.tfrecord")
    print(f"records: {instances} instances from {', '.join(os.path.basename(b) for b in books)} in "
          f"{time.time() - start:.1f} s")
    return path


def dataset(path, batch_size):
    return records.pretraining_dataset(path, FLAGS.seq_length, FLAGS.num_predictions, batch_size, is_training=True,
                                       seed=12345)


class CallTimes(keras.callbacks.Callback):
    """Wall time and step after each call into TF."""

    def __init__(self):
        super().__init__()
        self.marks = []

    def on_train_batch_end(self, batch, logs=None):
        self.marks.append((time.perf_counter(), int(self.model.optimizer.iterations.numpy())))


def train_rate(name, config, path, batch_size, per_loop, steps):
    """(steps/s, examples/s, model) of `fit` on the records, excluding the warm-up calls."""
    keras.utils.set_random_seed(1)
    model = TrainablePretraining(config)
    model(dummy_inputs(num_predictions=1), training=False)
    model.compile(optimizer=optimization.create_optimizer("lamb", 1e-4, 10 ** 6, 0), steps_per_execution=per_loop)
    times = CallTimes()
    total = steps + FLAGS.warmup_calls * per_loop
    start = time.perf_counter()
    model.fit(dataset(path, batch_size), epochs=1, steps_per_epoch=total, callbacks=[times], verbose=0)
    (t0, s0), (t1, s1) = times.marks[FLAGS.warmup_calls - 1], times.marks[-1]
    rate = (s1 - s0) / (t1 - t0)
    params = sum(int(tf.size(v)) for v in model.trainable_variables)
    print(f"{name}: {params / 1e6:.1f}M parameters, batch {batch_size}, seq {FLAGS.seq_length}, "
          f"{per_loop} step(s)/call: {rate:.3g} steps/s, {rate * batch_size:.3g} examples/s "
          f"({1000 / rate:.0f} ms/step; first {FLAGS.warmup_calls} call(s) incl. tracing took "
          f"{t0 - start:.1f} s)")
    return rate, rate * batch_size, model


def pipeline_rate(path, batch_size, batches):
    iterator = iter(dataset(path, batch_size))
    for _ in range(10):  # open files, fill the shuffle buffer
        next(iterator)
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    seconds = time.perf_counter() - start
    rate = batches * batch_size / seconds
    print(f"input pipeline alone: {batches} batches of {batch_size} in {seconds:.2f} s: {rate:.0f} examples/s")
    return rate


def save_cost(model, work_dir, saves):
    """(best seconds, bytes on disk) of saving `model` with its optimizer state, as training saves it."""
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    manager = tf.train.CheckpointManager(checkpoint, os.path.join(work_dir, "ckpt"), max_to_keep=2)
    times = []
    for _ in range(saves):
        start = time.perf_counter()
        path = manager.save()
        times.append(time.perf_counter() - start)
    size = sum(os.path.getsize(os.path.join(os.path.dirname(path), f)) for f in os.listdir(os.path.dirname(path))
               if f.startswith(os.path.basename(path) + "."))
    print(f"checkpoint save (base_v2 weights + LAMB m, v): {size / 2 ** 20:.0f} MiB, best {min(times):.2f} s, "
          f"all {', '.join(f'{t:.2f}' for t in times)} s")
    return min(times), size


def throughput_main(argv):
    del argv
    load_before = common.load_average()
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, {os.cpu_count()} CPUs; load average {load_before}")
    with common.scratch_dir(FLAGS.work_dir, "bench_pretraining.") as work_dir:
        path = FLAGS.records or throughput_records(work_dir)
        pipeline = pipeline_rate(path, FLAGS.tiny_batch_size, FLAGS.pipeline_batches)

        tiny = AlbertConfig.from_json_file(common.TINY_CONFIG)
        tiny_steps, tiny_examples, _ = train_rate("tiny demo config", tiny, path, FLAGS.tiny_batch_size, FLAGS.tiny_per_loop,
                                         FLAGS.tiny_steps)
        base_steps, base_examples, base_model = train_rate("base_v2", AlbertConfig.preset("base_v2"), path,
                                                  FLAGS.base_batch_size, 1, FLAGS.base_steps)
        seconds, size = save_cost(base_model, work_dir, FLAGS.saves)

        print("\nsummary")
        print(f"  base_v2 full step: {base_examples:.3g} examples/s; input pipeline {pipeline:.0f} examples/s = "
              f"{pipeline / base_examples:.0f}x what it consumes")
        print(f"  tiny demo full step: {tiny_examples:.3g} examples/s; input pipeline = "
              f"{pipeline / tiny_examples:.1f}x what it consumes (target >= 10x: "
              f"{'met' if pipeline >= 10 * max(tiny_examples, base_examples) else 'NOT met'})")
        print(f"  one base_v2 checkpoint save: {seconds:.2f} s")
        print(f"  load average {common.load_average()}")
        common.write_result({"load_average_before": load_before, "seq_length": FLAGS.seq_length,
                             "num_predictions": FLAGS.num_predictions,
                             "tiny": {"batch_size": FLAGS.tiny_batch_size, "steps_per_second": tiny_steps,
                                      "examples_per_second": tiny_examples},
                             "base_v2": {"batch_size": FLAGS.base_batch_size, "steps_per_second": base_steps,
                                         "examples_per_second": base_examples},
                             "pipeline_examples_per_second": pipeline, "base_v2_checkpoint_save_seconds": seconds,
                             "base_v2_checkpoint_mib": size / 2 ** 20},
                            FLAGS.output_json)


# ----------------------------------------------------------------------------------------- masking
SLOTS = 20  # max_predictions_per_seq of the masking records


def define_masking_flags():
    """The flags of `masking`."""
    flags.DEFINE_list("seq_lengths", ["128", "512"], "Record lengths to measure.")
    flags.DEFINE_integer("batch_size", 256, "Batch size of the pipeline.")
    flags.DEFINE_integer("batches", 40, "Batches timed per round.")
    flags.DEFINE_integer("rounds", 3, "Rounds per setting (the median is printed).")
    common.define_output_json("bench_masking")


def masking_rate(dataset, batches, rounds):
    """(median examples/s, mean masked predictions per sequence) over `rounds` runs of `batches` batches."""
    iterator = iter(dataset)
    next(iterator)
    rates, masked, sequences = [], 0.0, 0
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(batches):
            batch = next(iterator)
            masked += float(batch["masked_lm_weights"].numpy().sum())
            sequences += batch["masked_lm_weights"].shape[0]
        rates.append(batches * batch["input_ids"].shape[0] / (time.perf_counter() - start))
    return statistics.median(rates), masked / sequences


def masking_main(argv):
    del argv
    config = masking.MaskingConfig.from_tokenizer(FullTokenizer(spm_model_file=common.SPM_MODEL), 0.15, SLOTS)
    load_before, figures = common.load_average(), {}
    print(f"load average before: {load_before}")
    with tempfile.TemporaryDirectory() as work_dir:
        for seq_length in (int(s) for s in FLAGS.seq_lengths):
            path, instances = make_records(work_dir, sorted(glob.glob(BOOKS)), seq_length, SLOTS,
                                           f"corpus-{seq_length}.tfrecord")
            results = {}
            for name, online in (("stored masks", None), ("online masking", config)):
                dataset = records.pretraining_dataset(path, seq_length, SLOTS, FLAGS.batch_size, is_training=True,
                                                      seed=1, masking=online)
                results[name] = masking_rate(dataset, FLAGS.batches, FLAGS.rounds)
                print(f"seq {seq_length} ({instances} records), {name}: {results[name][0]:,.0f} examples/s, "
                      f"{results[name][1]:.2f} masked predictions per sequence")
            stored, online = results["stored masks"][0], results["online masking"][0]
            print(f"  online masking costs {stored / online:.1f}x the pipeline time of the stored masks")
            figures[str(seq_length)] = {"records": instances, **{
                name: {"examples_per_second": rate_, "masked_per_sequence": masked}
                for name, (rate_, masked) in results.items()}}
    print(f"load average after: {common.load_average()}")
    common.write_result({"load_average_before": load_before, "batch_size": FLAGS.batch_size, "batches": FLAGS.batches,
                         "rounds": FLAGS.rounds, "seq_lengths": figures}, FLAGS.output_json, "bench_masking")


if __name__ == "__main__":
    common.run_subcommands({"throughput": common.absl_subcommand(define_throughput_flags, throughput_main),
                            "masking": common.absl_subcommand(define_masking_flags, masking_main)}, "throughput")
