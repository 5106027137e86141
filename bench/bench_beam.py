"""CPU time per record: the local tool (`create_pretraining_data`, pool of 1 and 2 processes) against the Apache Beam
pipeline on Beam's in-process DirectRunner (1 worker in memory, 2 worker processes), on the same input and flags.

Each configuration runs in a fresh Python process; its CPU time is the user + system time of that process and every
process it started (Beam's worker processes included), imports and start-up included. A tiny run of each
configuration (one small file, dupe_factor 1) gives its fixed cost, so the marginal CPU per record (large run less
tiny run) is reported too; the default dupe_factor (100: about 95 000 records) keeps that difference well above the
run-to-run noise of the fixed cost. CPU time on a shared machine moves with the other load, so every configuration is
measured `--repeats` times, the configurations interleaved (one round of all of them, then the next), and the medians
are reported (the marginal figure is the median large run less the median tiny run). Writes bench/results/beam.json.

  python bench/bench_beam.py [--dupe_factor=100] [--max_seq_length=128] [--repeats=3]
"""

import argparse
import glob
import json
import os
import resource
import statistics
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
    parser.add_argument("--dupe_factor", type=int, default=100)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--output", default=os.path.join(REPO, "bench", "results", "beam.json"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs = {name: {"large": [], "tiny": []} for name in CONFIGS}
    for repeat in range(args.repeats):
        for name, (kind, workers) in CONFIGS.items():
            big = _measure(kind, workers, CORPUS, args.dupe_factor, args.max_seq_length)
            tiny = _measure(kind, workers, TINY, 1, args.max_seq_length)
            runs[name]["large"].append(big)
            runs[name]["tiny"].append(tiny)
            print(f"round {repeat + 1}/{args.repeats}  {name:50s} {big['records']:6d} records  "
                  f"CPU {big['cpu_s']:7.2f} s  wall {big['wall_s']:6.2f} s  tiny run CPU {tiny['cpu_s']:.2f} s",
                  flush=True)
    rows = {}
    for name, measured in runs.items():
        records = measured["large"][0]["records"]
        tiny_records = measured["tiny"][0]["records"]
        cpu = statistics.median(m["cpu_s"] for m in measured["large"])
        fixed = statistics.median(m["cpu_s"] for m in measured["tiny"])
        marginal = (cpu - fixed) / max(records - tiny_records, 1)
        rows[name] = {"records": records, "cpu_s": round(cpu, 3),
                      "wall_s": round(statistics.median(m["wall_s"] for m in measured["large"]), 3),
                      "cpu_ms_per_record": round(1000 * cpu / records, 3), "fixed_cpu_s": round(fixed, 3),
                      "marginal_cpu_ms_per_record": round(1000 * marginal, 3),
                      "cpu_s_runs": [m["cpu_s"] for m in measured["large"]],
                      "fixed_cpu_s_runs": [m["cpu_s"] for m in measured["tiny"]]}
        row = rows[name]
        print(f"{name:50s} {records:6d} records  CPU {cpu:7.2f} s (median of {args.repeats})  "
              f"{row['cpu_ms_per_record']:6.3f} ms/record (marginal {row['marginal_cpu_ms_per_record']:.3f}, "
              f"fixed {fixed:.2f} s)", flush=True)
    base = rows["local pool, 1 process"]
    for name, row in rows.items():
        row["cpu_per_record_vs_local_1"] = round(row["cpu_ms_per_record"] / base["cpu_ms_per_record"], 3)
        row["marginal_vs_local_1"] = round(row["marginal_cpu_ms_per_record"] / base["marginal_cpu_ms_per_record"], 3)
    common.write_result({
        "input": {"files": [os.path.relpath(p, REPO) for p in CORPUS],
                  "text_bytes": sum(os.path.getsize(p) for p in CORPUS), "dupe_factor": args.dupe_factor,
                  "max_seq_length": args.max_seq_length, "max_predictions_per_seq": 20},
        "repeats": args.repeats,
        "results": rows,
    }, args.output)


if __name__ == "__main__":
    main()
