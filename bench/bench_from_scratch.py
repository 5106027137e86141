"""Pretraining from raw text, step by step: CPU time and peak memory per MB of text for preparing the corpus
(`prepare_corpus.py`), training the vocabulary (`create_vocab.py`) and writing the records
(`create_pretraining_data.py`), on a set of books and on `--copies` times them, and from those figures the CPU time,
cores and memory for Wikipedia + BookCorpus (about 16 GB of text) and for 1 TB at the original's settings.

Each step runs as a user runs it (the top-level script, in a fresh process, one process: `--num_workers=1`); its CPU
time is the user + system time of that process and what it started, its memory the peak resident set (`wait4`).
The cost per MB of a step is the difference between the two corpus sizes (start-up cancels), and the peak memory at
both sizes shows whether it grows with the corpus. Records are written at dupe_factor 1 and 10: their difference gives
the cost of one more copy of the data with other masks, the rest the cost of reading and tokenizing once, so
dupe_factor 40 is extrapolated from measured runs.
Writes bench/results/from_scratch.json.

  python -m bench.bench_from_scratch --books_dir=<folder of plain-text books> [--copies=1,4]

Without --books_dir it uses the shipped excerpts in data/corpus/ (0.5 MB; too small for the memory question).

With --vocab_limits it measures instead the largest `--vocab_size` `create_vocab.py` (the default unigram recipe)
accepts on the first 1, 2, 5 MB of the prepared books, on all of them, and on all of them repeated: SentencePiece
names the limit when a larger size is refused, and the limit is then trained (accepted) and the limit + 1 tried
(refused). Writes bench/results/vocab_limits.json.

  python -m bench.bench_from_scratch --vocab_limits --books_dir=../shared/data/corpus/gutenberg
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from bench.support import common  # first: the environment every benchmark needs

REPO = common.REPO
SPM = common.SPM_MODEL
MB = 1 << 20
DUPES = (1, 10)  # records are written at these dupe factors; their difference is the cost of more copies
TARGETS = {"Wikipedia + BookCorpus (16 GB)": 16 * 1024, "1 TB": 1024 * 1024}


def run_step(name, args, log_dir):
    """Runs `python <script> args` to completion; returns (CPU seconds, peak RSS MB, wall seconds)."""
    env = common.child_env(TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="-1")
    log_path = os.path.join(log_dir, f"{name}.log")
    start = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen([sys.executable, os.path.join(REPO, args[0]), *args[1:]], cwd=REPO, env=env,
                                   stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status):
        with open(log_path, encoding="utf-8") as f:
            tail = f.read()[-3000:]
        raise SystemExit(f"{name} failed:\n{tail}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, wall


def make_books(books, copies, directory):
    """`copies` copies of every book (as separate files) in `directory`; returns its size in MB."""
    os.makedirs(directory)
    for copy in range(copies):
        for path in books:
            shutil.copyfile(path, os.path.join(directory, f"c{copy}-{os.path.basename(path)}"))
    return sum(os.path.getsize(p) for p in glob.glob(os.path.join(directory, "*"))) / MB


def measure(books, copies, work, vocab_size, max_seq_length, max_predictions_per_seq):
    raw = os.path.join(work, f"raw{copies}")
    raw_mb = make_books(books, copies, raw)
    corpus = os.path.join(work, f"corpus{copies}.txt")
    steps = {}
    cpu, rss, wall = run_step(f"prepare{copies}", [
        "prepare_corpus.py", f"--input_file={raw}/*.txt", f"--output_file={corpus}", "--document_per_file",
        "--nodeduplicate", "--num_workers=1", "--progress_interval=0"], work)
    steps["prepare_corpus"] = {"input_mb": raw_mb, "cpu_s": cpu, "peak_rss_mb": rss, "wall_s": wall}
    corpus_mb = os.path.getsize(corpus) / MB
    cpu, rss, wall = run_step(f"vocab{copies}", [
        "create_vocab.py", f"--input_file={corpus}", f"--model_prefix={work}/vocab{copies}",
        f"--vocab_size={vocab_size}", "--progress_interval=0"], work)
    steps["create_vocab"] = {"input_mb": corpus_mb, "cpu_s": cpu, "peak_rss_mb": rss, "wall_s": wall}
    for dupe in DUPES:
        cpu, rss, wall = run_step(f"records{copies}_d{dupe}", [
            "create_pretraining_data.py", f"--input_file={corpus}", f"--output_file={work}/records{copies}_{dupe}.tf",
            f"--spm_model_file={SPM}", f"--max_seq_length={max_seq_length}",
            f"--max_predictions_per_seq={max_predictions_per_seq}", f"--dupe_factor={dupe}", "--num_workers=1",
            "--progress_interval=0"], work)
        steps[f"create_pretraining_data_dupe{dupe}"] = {
            "input_mb": corpus_mb, "cpu_s": cpu, "peak_rss_mb": rss, "wall_s": wall,
            "output_mb": os.path.getsize(f"{work}/records{copies}_{dupe}.tf") / MB}
    for step in steps.values():
        step["cpu_s_per_mb"] = step["cpu_s"] / step["input_mb"]
        step["mb_per_s_per_core"] = step["input_mb"] / step["cpu_s"]
    return steps


def marginal(small, large):
    """CPU seconds per extra MB between two runs of a step (start-up and other fixed costs cancel)."""
    return (large["cpu_s"] - small["cpu_s"]) / (large["input_mb"] - small["input_mb"])


def extrapolate(small, large, dupe_factor):
    """CPU hours and memory per worker for each target corpus, from the marginal cost between two corpus sizes."""
    per_mb = {name: marginal(small[name], large[name]) for name in ("prepare_corpus", "create_vocab")}
    low, high = (marginal(small[f"create_pretraining_data_dupe{d}"], large[f"create_pretraining_data_dupe{d}"])
                 for d in DUPES)
    copy_cost = (high - low) / (DUPES[1] - DUPES[0])
    once_cost = low - DUPES[0] * copy_cost
    per_mb["create_pretraining_data"] = once_cost + dupe_factor * copy_cost
    d_low, d_high = (large[f"create_pretraining_data_dupe{d}"] for d in DUPES)
    output_per_mb = (d_high["output_mb"] - d_low["output_mb"]) / (DUPES[1] - DUPES[0]) / d_low["input_mb"] \
        * dupe_factor
    out = {"cpu_s_per_mb": per_mb, "record_copy_cpu_s_per_mb": copy_cost, "record_once_cpu_s_per_mb": once_cost,
           "peak_rss_mb": {name: {"small": max(v["peak_rss_mb"] for k, v in small.items() if k.startswith(name)),
                                  "large": max(v["peak_rss_mb"] for k, v in large.items() if k.startswith(name))}
                           for name in ("prepare_corpus", "create_vocab", "create_pretraining_data")},
           "targets": {}}
    for target, mb in TARGETS.items():
        hours = {name: cost * mb / 3600 for name, cost in per_mb.items()}
        out["targets"][target] = {"text_mb": mb, "cpu_hours": hours, "records_gb": output_per_mb * mb / 1024,
                                  "cores_for_one_day": {n: max(1, -(-int(h) // 24)) for n, h in hours.items()}}
    return out


# create_vocab.py's one line when SentencePiece refuses a size: it names the largest the text allows.
TOO_HIGH = re.compile(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)")
PROBE_SIZE = 1_000_000  # above any limit a corpus of these sizes has


def create_vocab(corpus, vocab_size, work):
    """Runs `create_vocab.py` on `corpus` at `vocab_size`; returns (accepted, output, wall seconds)."""
    env = common.child_env(TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="-1")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, os.path.join(REPO, "create_vocab.py"), f"--input_file={corpus}",
                           f"--model_prefix={work}/vocab", f"--vocab_size={vocab_size}", "--progress_interval=0"],
                          cwd=REPO, env=env, capture_output=True, text=True, check=False)
    return done.returncode == 0, done.stdout + done.stderr, time.perf_counter() - start


def vocab_limit(corpus, work):
    """The largest `--vocab_size` accepted on `corpus`: the limit SentencePiece names when refusing
    `PROBE_SIZE`, checked by training it (accepted) and the limit + 1 (refused)."""
    accepted, output, _ = create_vocab(corpus, PROBE_SIZE, work)
    found = TOO_HIGH.search(output)
    if accepted or not found:
        raise SystemExit(f"create_vocab.py at --vocab_size={PROBE_SIZE} on {corpus} did not name a limit:\n"
                         f"{output[-3000:]}")
    limit = int(found.group(2))
    at_limit, output, seconds = create_vocab(corpus, limit, work)
    if not at_limit:
        raise SystemExit(f"create_vocab.py refused the limit it named ({limit}) on {corpus}:\n{output[-3000:]}")
    above, output, _ = create_vocab(corpus, limit + 1, work)
    if above:
        raise SystemExit(f"create_vocab.py accepted {limit + 1}, above the limit it named ({limit}), on {corpus}")
    return {"largest_vocab_size": limit, "train_wall_s_at_limit": seconds}


def text_slice(corpus, mb, path, repeat=1):
    """The first `mb` MB of `corpus` (None: all of it) cut at a line end, `repeat` times, written to `path`;
    returns (MB, lines)."""
    with open(corpus, "rb") as f:
        text = f.read()
    if mb is not None:
        text = text[:text.rfind(b"\n", 0, int(mb * MB)) + 1]
    with open(path, "wb") as f:
        for _ in range(repeat):
            f.write(text)
    return len(text) * repeat / MB, text.count(b"\n") * repeat


def measure_vocab_limits(books, work, slices_mb, repeat):
    """The largest vocabulary of each slice of the prepared `books` (see `vocab_limit`)."""
    raw = os.path.join(work, "raw")
    make_books(books, 1, raw)
    corpus = os.path.join(work, "corpus.txt")
    run_step("prepare", ["prepare_corpus.py", f"--input_file={raw}/*.txt", f"--output_file={corpus}",
                         "--document_per_file", "--nodeduplicate", "--num_workers=1", "--progress_interval=0"], work)
    total_mb = os.path.getsize(corpus) / MB
    plan = [(mb, 1) for mb in slices_mb if mb < total_mb] + [(None, 1)] + ([(None, repeat)] if repeat > 1 else [])
    rows = []
    for mb, times in plan:
        path = os.path.join(work, f"slice-{mb}-{times}.txt")
        size_mb, lines = text_slice(corpus, mb, path, times)
        row = {"text_mb": size_mb, "lines": lines, "repeated": times, **vocab_limit(path, work)}
        print(f"{size_mb:6.2f} MB ({lines} lines{f', the corpus {times} times' if times > 1 else ''}): "
              f"largest --vocab_size {row['largest_vocab_size']}", flush=True)
        rows.append(row)
    return {"corpus_mb": total_mb, "slices": rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--books_dir", default=None, help="Folder of plain-text books (*.txt); default: the shipped "
                        "excerpts in data/corpus/.")
    parser.add_argument("--copies", default="1,4", help="Comma-separated corpus sizes, in copies of the books.")
    parser.add_argument("--vocab_size", type=int, default=30000)
    parser.add_argument("--max_seq_length", type=int, default=512)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--dupe_factor", type=int, default=40, help="The dupe factor extrapolated to.")
    parser.add_argument("--output", default=None, help="Default: bench/results/from_scratch.json, with "
                        "--vocab_limits bench/results/vocab_limits.json.")
    parser.add_argument("--vocab_limits", action="store_true", help="Measure the largest vocabulary per corpus "
                        "size instead (see the module docstring).")
    parser.add_argument("--vocab_slices_mb", default="1,2,5", help="--vocab_limits: slice sizes in MB (sizes "
                        "above the corpus are left out; the whole corpus is always measured).")
    parser.add_argument("--vocab_repeat", type=int, default=4, help="--vocab_limits: also the whole corpus this "
                        "many times over (1: not).")
    args = parser.parse_args()
    books = sorted(glob.glob(os.path.join(args.books_dir, "*.txt"))) if args.books_dir else sorted(
        glob.glob(os.path.join(REPO, "data", "corpus", "gutenberg-*.txt")))
    if not books:
        raise SystemExit(f"no *.txt books in {args.books_dir}")
    if args.vocab_limits:
        with tempfile.TemporaryDirectory() as work:
            limits = measure_vocab_limits(books, work, [float(x) for x in args.vocab_slices_mb.split(",")],
                                          args.vocab_repeat)
        common.write_result({"books": [os.path.basename(b) for b in books], "recipe": "create_vocab.py defaults "
                             "(unigram, character_coverage 0.99995, do_lower_case)", **limits},
                            args.output or os.path.join(REPO, "bench", "results", "vocab_limits.json"))
        return
    load_before = os.getloadavg()[0]
    runs = {}
    with tempfile.TemporaryDirectory() as work:
        for copies in (int(c) for c in args.copies.split(",")):
            runs[copies] = measure(books, copies, work, args.vocab_size, args.max_seq_length,
                                   args.max_predictions_per_seq)
            for step, v in runs[copies].items():
                print(f"x{copies} {step:36s} {v['input_mb']:7.1f} MB  {v['cpu_s']:8.1f} CPU s  "
                      f"{v['mb_per_s_per_core']:6.3f} MB/s/core  peak {v['peak_rss_mb']:7.0f} MB", flush=True)
    if len(runs) < 2:
        raise SystemExit("give two sizes in --copies (e.g. 1,4): the costs per MB are their difference")
    sizes = sorted(runs)
    result = {"books": [os.path.basename(b) for b in books], "load_before": load_before,
              "settings": {"vocab_size": args.vocab_size, "max_seq_length": args.max_seq_length,
                           "max_predictions_per_seq": args.max_predictions_per_seq, "num_workers": 1},
              "runs": {str(k): v for k, v in runs.items()},
              "extrapolated": extrapolate(runs[sizes[0]], runs[sizes[-1]], args.dupe_factor),
              "dupe_factor": args.dupe_factor}
    for target, t in result["extrapolated"]["targets"].items():
        print(f"{target}: " + ", ".join(f"{n} {h:,.0f} CPU h ({t['cores_for_one_day'][n]} cores for a day)"
                                        for n, h in t["cpu_hours"].items())
              + f"; records {t['records_gb']:,.0f} GB at dupe_factor {args.dupe_factor}")
    common.write_result(result, args.output or os.path.join(REPO, "bench", "results", "from_scratch.json"))


if __name__ == "__main__":
    main()
