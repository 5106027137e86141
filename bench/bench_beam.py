"""CPU time per record: the local tool (`create_pretraining_data`, pool of 1 and 2 processes) against the Apache Beam
pipeline on Beam's in-process DirectRunner (1 worker in memory, 2 worker processes), on the same input and flags.

Each configuration runs in a fresh Python process; its CPU time is the user + system time of that process and every
process it started (Beam's worker processes included), imports and start-up included. A tiny run of each
configuration (one small file, dupe_factor 1) gives its fixed cost, so the marginal CPU per record (large run less
tiny run) is reported too. Writes bench/results/beam.json.

  python bench/bench_beam.py [--dupe_factor=40] [--max_seq_length=128]
"""

import argparse
import glob
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import common  # first: the environment and sys.path every bench script needs

REPO = common.REPO
SPM = os.path.join(REPO, "data", "30k-clean.model")
CORPUS = sorted(glob.glob(os.path.join(REPO, "data", "corpus", "gutenberg-*.txt")))
TINY = [os.path.join(REPO, "data", "corpus", "sample_text.txt")]
CONFIGS = {
    "local pool, 1 process": ("local", 1),
    "local pool, 2 processes": ("local", 2),
    "Beam DirectRunner, in_memory (1 worker)": ("beam", 1),
    "Beam DirectRunner, multi_processing (2 workers)": ("beam", 2),
    "Beam DirectRunner, 2 workers, --global_shuffle": ("beam-shuffle", 2),
}


def _one(kind, workers, inputs, out, dupe_factor, max_seq_length):
    """Runs one configuration in this process; prints the number of records."""
    # pylint: disable-next=import-outside-toplevel
    from albert_tf.data.pretraining import PretrainingConfig, create_pretraining_data

    config = PretrainingConfig(max_seq_length=max_seq_length, max_predictions_per_seq=20, dupe_factor=dupe_factor)
    if kind == "local":
        stats = create_pretraining_data(inputs, [os.path.join(out, "local.tfrecord")], spm_model_file=SPM,
                                        config=config, num_workers=workers)
    else:
        from albert_tf.data.pretraining import beam  # pylint: disable=import-outside-toplevel

        mode = ["--direct_running_mode=in_memory"] if workers == 1 else [
            "--direct_running_mode=multi_processing", f"--direct_num_workers={workers}"]
        stats = beam.create_pretraining_data_beam(
            inputs, os.path.join(out, "pretraining"), spm_model_file=SPM, config=config, num_output_shards=workers,
            global_shuffle=kind == "beam-shuffle", pipeline_args=["--runner=DirectRunner", *mode])
    print(json.dumps({"records": stats.instances}))


def _measure(kind, workers, inputs, dupe_factor, max_seq_length):
    with tempfile.TemporaryDirectory() as out:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        result = subprocess.run([sys.executable, __file__, "--one", kind, str(workers), ",".join(inputs), out,
                                 str(dupe_factor), str(max_seq_length)], capture_output=True, text=True, check=False,
                                env={**os.environ, "PYTHONPATH": REPO, "CUDA_VISIBLE_DEVICES": "-1"})
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode:
        raise SystemExit(f"{kind} {workers} failed:\n{result.stderr[-3000:]}")
    records = json.loads(result.stdout.strip().splitlines()[-1])["records"]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"records": records, "cpu_s": round(cpu, 3), "wall_s": round(wall, 3)}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        kind, workers, inputs, out, dupe, seq = sys.argv[2:8]
        _one(kind, int(workers), inputs, out, int(dupe), int(seq))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--dupe_factor", type=int, default=40)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--output", default=os.path.join(REPO, "bench", "results", "beam.json"))
    args = parser.parse_args()
    rows = {}
    for name, (kind, workers) in CONFIGS.items():
        big = _measure(kind, workers, CORPUS, args.dupe_factor, args.max_seq_length)
        tiny = _measure(kind, workers, TINY, 1, args.max_seq_length)
        marginal = (big["cpu_s"] - tiny["cpu_s"]) / max(big["records"] - tiny["records"], 1)
        rows[name] = {**big, "cpu_ms_per_record": round(1000 * big["cpu_s"] / big["records"], 3),
                      "fixed_cpu_s": tiny["cpu_s"], "marginal_cpu_ms_per_record": round(1000 * marginal, 3)}
        row = rows[name]
        print(f"{name:50s} {big['records']:6d} records  CPU {big['cpu_s']:7.2f} s  wall {big['wall_s']:6.2f} s  "
              f"{row['cpu_ms_per_record']:6.3f} ms/record (marginal {row['marginal_cpu_ms_per_record']:.3f}, "
              f"fixed {tiny['cpu_s']:.2f} s)", flush=True)
    base = rows["local pool, 1 process"]
    for name, row in rows.items():
        row["cpu_per_record_vs_local_1"] = round(row["cpu_ms_per_record"] / base["cpu_ms_per_record"], 3)
        row["marginal_vs_local_1"] = round(row["marginal_cpu_ms_per_record"] / base["marginal_cpu_ms_per_record"], 3)
    common.write_result({
        "input": {"files": [os.path.relpath(p, REPO) for p in CORPUS],
                  "text_bytes": sum(os.path.getsize(p) for p in CORPUS), "dupe_factor": args.dupe_factor,
                  "max_seq_length": args.max_seq_length, "max_predictions_per_seq": 20},
        "results": rows,
    }, args.output)


if __name__ == "__main__":
    main()
