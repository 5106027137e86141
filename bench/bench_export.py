r"""Serving benchmark of the exports: the base-shape encoder as a SavedModel (float32) vs TFLite float32 vs TFLite
int8 (dynamic-range), with their sizes on disk.

    python -m bench.bench_export                                  # base_v2 shape, random weights, ~3-4 min
    python -m bench.bench_export --init_checkpoint=albert_base --albert_config_file=albert_base/albert_config.json
    python -m bench.bench_export --throughput_batches=3 --rounds=3
    python -m bench.bench_export --albert_config_file=data/albert_config_tiny.json --rounds=1 --output_json=/tmp/e.json

For each engine: latency of one request (batch 1, --seq_length tokens; median and p90 of --latency_calls calls)
and throughput at --batch_size (examples/s over --throughput_batches batches). The SavedModel runs as TF Serving
would run it (its `serving_default` signature, loaded with `tf.saved_model.load`; TF's own thread pools); TFLite
runs with --tflite_threads threads (XNNPACK for float32). Rounds alternate the engines and the best round of each is
kept, which makes the comparison robust to other load on the machine (the load average is printed). Weights do not
change the speed: random weights are used unless --init_checkpoint is given. The agreement of each TFLite model with
the SavedModel (max abs diff of pooled_output on the timed inputs) is printed too. The figures go to
--output_json (bench/results/bench_export.json), with the command and the machine.
"""

import os
import statistics
import time

from bench.support import common  # first: the environment every benchmark needs

import numpy as np
import tensorflow as tf
from absl import app, flags
from absl import logging as absl_logging

from albert_tf.config import AlbertConfig
from albert_tf.model import AlbertModel, dummy_inputs
from albert_tf.serving import encoder, savedmodel, tflite

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "base_v2", "AlbertConfig preset of the benchmarked shape (without --albert_config_file).")
flags.DEFINE_string("albert_config_file", None, "Benchmark this config instead of --preset.")
flags.DEFINE_string("init_checkpoint", None, "Optional weights (any supported format); random weights otherwise.")
flags.DEFINE_integer("seq_length", 128, "Sequence length of every request.")
flags.DEFINE_integer("batch_size", 32, "Batch size of the throughput measurement.")
flags.DEFINE_integer("latency_calls", 5, "Timed batch-1 calls per round.")
flags.DEFINE_integer("throughput_batches", 1, "Timed batches per round for the throughput.")
flags.DEFINE_integer("rounds", 2, "Rounds over the engines; the best round of each is reported.")
flags.DEFINE_integer("tflite_threads", None, "TFLite interpreter threads (default: the machine's cores).")
common.define_work_dir("the exports")
common.define_output_json("bench_export")


def _inputs(config, batch_size, seq_length, seed=0):
    sample = tflite.sample_id_inputs([batch_size, seq_length], config.vocab_size, seed=seed)
    sample["input_mask"][:] = 1  # full-length requests: the cost of seq_length tokens
    return sample


def main(argv):
    del argv
    absl_logging.set_verbosity(absl_logging.WARNING)  # TensorFlow logs each step of writing a SavedModel at INFO
    config = (AlbertConfig.from_json_file(FLAGS.albert_config_file) if FLAGS.albert_config_file
              else AlbertConfig.preset(FLAGS.preset))
    print(f"Shape: {FLAGS.albert_config_file or FLAGS.preset} (H={config.hidden_size}, L={config.num_hidden_layers}, "
          f"E={config.embedding_size}, V={config.vocab_size}), {config.num_parameters() / 1e6:.1f}M parameters; "
          f"seq {FLAGS.seq_length}, throughput batch {FLAGS.batch_size}")
    load_before = common.load_average()
    print(f"Load average before: {load_before} on {os.cpu_count()} cores")
    started = time.time()
    with common.scratch_dir(FLAGS.work_dir, "bench_export_") as work:
        model = AlbertModel(config)
        model(dummy_inputs(), training=False)
        if FLAGS.init_checkpoint:
            from albert_tf.checkpoints import load_checkpoint  # pylint: disable=import-outside-toplevel

            print(load_checkpoint(model, FLAGS.init_checkpoint))

        timings = {}
        t = time.time()
        saved_model_dir = encoder.export_encoder(model, os.path.join(work, "saved_model"), overwrite=True)
        timings["export SavedModel"] = time.time() - t
        lite = {}
        for quantize in (None, "dynamic_int8"):
            name = "TFLite int8" if quantize else "TFLite fp32"
            t = time.time()
            info = tflite.export_tflite(model, os.path.join(work, f"{name.split()[-1]}.tflite"), quantize=quantize,
                                        seq_length=FLAGS.seq_length, overwrite=True, verify=False)
            timings[f"convert {name}"] = time.time() - t
            lite[name] = info
        print("Export/conversion times: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()))
        del model

        loaded = tf.saved_model.load(saved_model_dir)
        signature = loaded.signatures["serving_default"]
        threads = FLAGS.tflite_threads or os.cpu_count()
        engines = {"SavedModel fp32": lambda x: {k: v.numpy() for k, v in
                                                 signature(**{n: tf.constant(a) for n, a in x.items()}).items()}}
        for name, info in lite.items():
            runner = tflite.TFLiteModel(info.path, num_threads=threads)
            engines[name] = lambda x, runner=runner: runner(**x)
        sizes = {"SavedModel fp32": savedmodel.saved_model_size(saved_model_dir)["total"],
                 **{name: info.size_bytes for name, info in lite.items()}}

        one = _inputs(config, 1, FLAGS.seq_length)
        batch = _inputs(config, FLAGS.batch_size, FLAGS.seq_length, seed=1)
        reference = engines["SavedModel fp32"](batch)["pooled_output"]
        agreement = {}
        for name, fn in engines.items():  # warm-up (and agreement on the batch)
            fn(one)
            agreement[name] = float(np.max(np.abs(fn(batch)["pooled_output"] - reference)))
        best = {name: {"latency": None, "throughput": 0.0} for name in engines}
        for round_index in range(FLAGS.rounds):
            for name, fn in engines.items():
                latencies = common.time_calls(lambda: fn(one), FLAGS.latency_calls)
                median = statistics.median(latencies)
                p90 = sorted(latencies)[min(len(latencies) - 1, int(0.9 * len(latencies)))]
                seconds = sum(common.time_calls(lambda: fn(batch), FLAGS.throughput_batches))
                throughput = FLAGS.throughput_batches * FLAGS.batch_size / seconds
                record = best[name]
                if record["latency"] is None or median < record["latency"][0]:
                    record["latency"] = (median, p90)
                record["throughput"] = max(record["throughput"], throughput)
                print(f"  round {round_index + 1} {name}: latency {median * 1e3:.1f} ms (p90 {p90 * 1e3:.1f}), "
                      f"{throughput:.1f} examples/s", flush=True)

        print(f"Load average after: {common.load_average()}; total {time.time() - started:.0f} s\n")
        header = (f"{'engine':<17} {'size on disk':>13} {'latency b=1 (median/p90)':>26} "
                  f"{f'throughput b={FLAGS.batch_size}':>18} {'max |diff| vs SavedModel':>25}")
        print(header)
        print("-" * len(header))
        results = {}
        for name in engines:
            median, p90 = best[name]["latency"]
            results[name] = {"size_mb": sizes[name] / 1e6, "latency_ms_median": median * 1e3,
                             "latency_ms_p90": p90 * 1e3, "examples_per_second": best[name]["throughput"],
                             "max_abs_diff_pooled_output": agreement[name]}
            print(f"{name:<17} {sizes[name] / 1e6:>10.1f} MB {median * 1e3:>13.1f} / {p90 * 1e3:>6.1f} ms "
                  f"{best[name]['throughput']:>13.1f} ex/s {agreement[name]:>25.2g}")
        common.write_result({"load_average_before": load_before, "shape": config.to_dict(),
                             "seq_length": FLAGS.seq_length, "batch_size": FLAGS.batch_size, "tflite_threads": threads,
                             "results": results, "conversion_seconds": timings}, FLAGS.output_json)


if __name__ == "__main__":
    app.run(main)
