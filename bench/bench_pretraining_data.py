"""Benchmark: `create_pretraining_data.py` against the original release's own script, whole processes.

    python bench/bench_pretraining_data.py --original_dir=/path/to/google-research/albert
    python bench/bench_pretraining_data.py                  # this project's figures only
    python bench/bench_pretraining_data.py --corpus_dir=data/corpus --lengths=128 --rounds=1 --output_json=/tmp/d.json

What runs, for each `--lengths` value (default 128 and 512), `--dupe_factor` 5 and the original's other defaults
(`max_predictions_per_seq` 20, `masked_lm_prob` 0.15, `short_seq_prob` 0.1, `ngram` 3, seed 12345), with the
SentencePiece model `data/30k-clean.model`, each as a fresh process started the way a user starts it:

* ORIGINAL: `<original_dir>/create_pretraining_data.py` itself, run by `bench/original_compat.py` (which supplies
  what the TF 1 script needs under this TensorFlow; the original's files are not part of this repository and are
  never downloaded: `--original_dir` is a checkout you provide). It needs `--vocab_file` even with a SentencePiece
  model (it ignores it then); the model file is passed.
* albert_tf: the top-level `create_pretraining_data.py` with `--num_workers` 1 and 2 (`--workers`).

Both get the same input files (comma-separated, sorted) and write one output file; their logs go to files.

Corpus: whole public-domain books from `../shared/data/corpus/gutenberg` (`--books`, default Emma, Sense and
Sensibility, The Ball and the Cross, The Innocence of Father Brown: four files, about 2.4 MB) converted to the
input format (one sentence per line, a blank line between documents) by `tools/make_shipped_corpus.py` into a
temporary directory; or `--corpus_dir` (its `*.txt` files).

Measured per process: wall time (start to exit), CPU time (user + system of the process and of its worker
processes, from `wait4`), peak RSS (`ru_maxrss` from `wait4`: the largest single process of the tree) and, with
several workers, the sampled peak of the tree's summed RSS (pages the forked workers share with the parent count
in each, so it is an upper bound). Instances are counted from the output's TFRecord frames. Rounds (`--rounds`,
default 3) run every configuration once each, interleaved, in one window; medians over the rounds are printed (with
the wall-time range), then the speed-ups original / albert_tf on wall and CPU time, and the scaling from 1 to 2
workers, with the tool's default shards (4 MB: here one shard per file, of unequal sizes) and with
`--small_shards_mb` shards (0.25 MB: many shards, the workers evenly loaded; the output differs, its statistics
do not). The CPU model, its SIMD flags and the load average (before and after) are printed with the figures, and
the medians go to --output_json (bench/results/bench_pretraining_data.json) with the command and the machine.
"""

import argparse
import contextlib
import glob
import hashlib
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

import common  # first: the environment and sys.path every bench script needs

ROOT = common.REPO
SPM_MODEL = os.path.join(ROOT, "data", "30k-clean.model")
GUTENBERG = os.path.join(ROOT, "..", "shared", "data", "corpus", "gutenberg")
DEFAULT_BOOKS = "austen-emma,austen-sense,chesterton-ball,chesterton-brown"


def count_records(path):
    """Records in a TFRecord file, from its frame headers."""
    count = 0
    with open(path, "rb") as f:
        while True:
            header = f.read(12)
            if len(header) < 12:
                return count
            (length,) = struct.unpack("<Q", header[:8])
            f.seek(length + 4, os.SEEK_CUR)
            count += 1


def _descendants(pid):
    out, todo = [], [pid]
    while todo:
        parent = todo.pop()
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{parent}/task"):
                with open(f"/proc/{parent}/task/{tid}/children", encoding="utf-8") as f:
                    kids = [int(k) for k in f.read().split()]
                out.extend(kids)
                todo.extend(kids)
    return out


def _rss_kb(pid):
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class TreeRss:
    """Samples the summed RSS of a process and its descendants every 0.1 s (Linux /proc; 0 elsewhere)."""

    def __init__(self, pid):
        self.pid = pid
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(0.1):
            pids = [self.pid] + _descendants(self.pid)
            self.peak_kb = max(self.peak_kb, sum(_rss_kb(p) for p in pids))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def run_process(command, log_path, sample_tree):
    """Runs `command` to completion; returns dict wall, cpu, maxrss_mb, tree_rss_mb. Raises on failure."""
    with open(log_path, "wb") as log:
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)  # pylint: disable=consider-using-with
        sampler = TreeRss(proc.pid) if sample_tree else contextlib.nullcontext()
        with sampler:
            _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        with open(log_path, "rb") as f:
            tail = f.read()[-3000:].decode("utf-8", "replace")
        raise RuntimeError(f"{' '.join(command[:3])} ... failed with exit status {proc.returncode}:\n{tail}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "maxrss_mb": usage.ru_maxrss / 1024,
            "tree_rss_mb": sampler.peak_kb / 1024 if sample_tree else None}


def commands(args, corpus_files, length, out_dir):
    """(name, workers, command, output path, variant) of every configuration at `length`."""
    common = [f"--input_file={','.join(corpus_files)}", f"--spm_model_file={SPM_MODEL}",
              f"--max_seq_length={length}", f"--max_predictions_per_seq={args.max_predictions_per_seq}",
              f"--dupe_factor={args.dupe_factor}"]
    configs = []
    if args.original_dir:
        out = os.path.join(out_dir, f"original-{length}.tfrecord")
        script = os.path.join(args.original_dir, "create_pretraining_data.py")
        configs.append(("original", 1, [sys.executable, os.path.join(ROOT, "bench", "original_compat.py"), script]
                        + common + [f"--vocab_file={SPM_MODEL}", f"--output_file={out}"], out, "original"))
    variants = [(None, "default shards")] + ([(args.small_shards_mb, f"{args.small_shards_mb:g} MB shards")]
                                             if args.small_shards_mb else [])
    for shard_mb, variant in variants:
        for workers in args.workers:
            out = os.path.join(out_dir, f"albert_tf-{length}-{workers}-{shard_mb}.tfrecord")
            shards = [f"--shard_size_mb={shard_mb}"] if shard_mb else []
            suffix = f", {variant}" if shard_mb else ""
            configs.append((f"albert_tf, {workers} worker{'s' if workers > 1 else ''}{suffix}", workers,
                            [sys.executable, os.path.join(ROOT, "create_pretraining_data.py")] + common + shards
                            + [f"--num_workers={workers}", f"--output_file={out}"], out, variant))
    return configs


def prepare_corpus(args, tmp):
    if args.corpus_dir:
        return sorted(glob.glob(os.path.join(args.corpus_dir, "*.txt"))), args.corpus_dir
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import make_shipped_corpus as tool  # pylint: disable=import-outside-toplevel

    corpus = os.path.join(tmp, "corpus")
    books = [b for b in args.books.split(",") if b]
    return sorted(tool.prepare(GUTENBERG, corpus, books, bytes_per_book=0)), f"{len(books)} books: {args.books}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--original_dir", default=None,
                        help="a checkout of google-research/albert (its create_pretraining_data.py and "
                             "tokenization.py); without it only this project's figures are printed")
    parser.add_argument("--lengths", default="128,512")
    parser.add_argument("--workers", default="1,2", help="--num_workers values for albert_tf")
    parser.add_argument("--dupe_factor", type=int, default=5)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3, help="rounds; medians over them are printed")
    parser.add_argument("--small_shards_mb", type=float, default=0.25,
                        help="also run albert_tf with --shard_size_mb of this size (0: not): many small shards "
                             "balance the workers on a small corpus (the output changes, not its statistics)")
    parser.add_argument("--books", default=DEFAULT_BOOKS, help="Gutenberg books (whole) making the corpus")
    parser.add_argument("--corpus_dir", default=None, help="use these *.txt files instead of --books")
    parser.add_argument("--output_json", default=None,
                        help="where the medians go (default: bench/results/bench_pretraining_data.json)")
    args = parser.parse_args()
    args.workers = [int(w) for w in args.workers.split(",") if w]
    lengths = [int(x) for x in args.lengths.split(",") if x]
    if args.original_dir:
        script = os.path.join(args.original_dir, "create_pretraining_data.py")
        if not os.path.isfile(script) or not os.path.isfile(os.path.join(args.original_dir, "tokenization.py")):
            parser.error(f"--original_dir {args.original_dir} needs create_pretraining_data.py and tokenization.py")
    with tempfile.TemporaryDirectory() as tmp:
        files, corpus_name = prepare_corpus(args, tmp)
        if not files:
            parser.error("the corpus has no *.txt files")
        size = sum(os.path.getsize(f) for f in files)
        model, simd = common.cpu_description()
        print(f"cpu: {model}, {os.cpu_count()} cores, SIMD: {' '.join(simd) or '-'}")
        print(f"corpus: {corpus_name}; {len(files)} files, {size / 1e6:.2f} MB; dupe_factor {args.dupe_factor}, "
              f"max_predictions_per_seq {args.max_predictions_per_seq}; {args.rounds} rounds, medians")
        if args.original_dir:
            with open(os.path.join(args.original_dir, "create_pretraining_data.py"), "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()[:12]
            print(f"original: {os.path.abspath(args.original_dir)} (create_pretraining_data.py sha256 {digest}), "
                  f"run by bench/original_compat.py")
        load_before = common.load_average()
        print(f"load average before: {load_before}")
        configs = {length: commands(args, files, length, tmp) for length in lengths}
        results = {(length, name): [] for length in lengths for name, *_ in configs[length]}
        counts = {}
        for _ in range(args.rounds):
            for length in lengths:
                for name, workers, command, out, _ in configs[length]:
                    log = os.path.join(tmp, "log.txt")
                    results[(length, name)].append(run_process(command, log, sample_tree=workers > 1))
                    counts[(length, name)] = count_records(out)
                    os.remove(out)
        print(f"load average after: {common.load_average()}")
        header = (f"{'implementation':<36}{'seq':>5}{'instances':>10}{'wall s':>8}{'(range)':>14}{'CPU s':>8}"
                  f"{'inst/s':>8}{'MB/s':>7}{'peak RSS MB':>12}{'tree RSS MB':>12}")
        figures = {}
        for length in lengths:
            print()
            print(header)
            print("-" * len(header))
            medians = {}
            for name, *_ in configs[length]:
                runs = results[(length, name)]
                wall = statistics.median(r["wall"] for r in runs)
                cpu = statistics.median(r["cpu"] for r in runs)
                rss = statistics.median(r["maxrss_mb"] for r in runs)
                tree = [r["tree_rss_mb"] for r in runs if r["tree_rss_mb"] is not None]
                medians[name] = (wall, cpu)
                n = counts[(length, name)]
                figures.setdefault(str(length), {})[name] = {
                    "instances": n, "wall_s": wall, "cpu_s": cpu, "peak_rss_mb": rss,
                    "tree_rss_mb": statistics.median(tree) if tree else None,
                    "wall_s_range": [min(r["wall"] for r in runs), max(r["wall"] for r in runs)]}
                spread = f"{min(r['wall'] for r in runs):.2f}-{max(r['wall'] for r in runs):.2f}"
                tree_text = f"{statistics.median(tree):.0f}" if tree else "-"
                print(f"{name:<36}{length:>5}{n:>10}{wall:>8.2f}{spread:>14}{cpu:>8.2f}{n / wall:>8.0f}"
                      f"{size / wall / 1e6:>7.2f}{rss:>12.0f}{tree_text:>12}")
            if "original" in medians:
                base_wall, base_cpu = medians["original"]
                print("speed-up, original / albert_tf: " + "; ".join(
                    f"{name.split(', ', 1)[1]}: wall {base_wall / wall:.1f}x, CPU {base_cpu / cpu:.1f}x"
                    for name, (wall, cpu) in medians.items() if name != "original"))
            for variant in dict.fromkeys(v for *_, v in configs[length] if v != "original"):
                ours = [(w, medians[n]) for n, w, *_, v in configs[length] if v == variant]
                if len(ours) > 1:
                    (w1, (wall1, cpu1)), rest = ours[0], ours[1:]
                    print(f"scaling ({variant}): " + "; ".join(
                        f"{w} workers vs {w1}: {wall1 / wall:.2f}x faster (wall), {cpu / cpu1:.2f}x the CPU time"
                        for w, (wall, cpu) in rest))
        common.write_result({"load_average_before": load_before, "corpus": corpus_name, "corpus_mb": size / 1e6,
                             "dupe_factor": args.dupe_factor, "rounds": args.rounds, "medians": figures},
                            args.output_json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
