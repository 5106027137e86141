r"""The data tools' speed: `create_pretraining_data.py` against the original's script (`original`), the local tool
against the Apache Beam pipeline (`beam`), and the sentence splitters of `prepare_corpus.py` (`sentence_split`).

    python -m bench.bench_pretraining_data [original] [flags]
    python -m bench.bench_pretraining_data beam [flags]
    python -m bench.bench_pretraining_data sentence_split [flags]

`original` (the default) was `python bench/bench_pretraining_data.py`, `beam` was `python bench/bench_beam.py` and
`sentence_split` was `python bench/bench_sentence_split.py`, with the same flags;
`python -m bench.bench_pretraining_data <subcommand> --help` lists a subcommand's flags.

original: `create_pretraining_data.py` against the original release's own script, whole processes.

    python -m bench.bench_pretraining_data --original_dir=/path/to/google-research/albert
    python -m bench.bench_pretraining_data                  # this project's figures only
    python -m bench.bench_pretraining_data --corpus_dir=data/corpus --lengths=128 --rounds=1 --output_json=/tmp/d.json

What runs, for each `--lengths` value (default 128 and 512), `--dupe_factor` 5 and the original's other defaults
(`max_predictions_per_seq` 20, `masked_lm_prob` 0.15, `short_seq_prob` 0.1, `ngram` 3, seed 12345), with the
SentencePiece model `data/30k-clean.model`, each as a fresh process started the way a user starts it:

* ORIGINAL: `<original_dir>/create_pretraining_data.py` itself, run by `bench.support.original_compat` (which supplies
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

beam: CPU time per record, the local tool (`create_pretraining_data`, pool of 1 and 2 processes) against the Apache Beam
pipeline on Beam's in-process DirectRunner (1 worker in memory, 2 worker processes), on the same input and flags.

Each configuration runs in a fresh Python process; its CPU time is the user + system time of that process and every
process it started (Beam's worker processes included), imports and start-up included. A tiny run of each
configuration (one small file, dupe_factor 1) gives its fixed cost, so the marginal CPU per record (large run less
tiny run) is reported too; the default dupe_factor (100: about 95 000 records) keeps that difference well above the
run-to-run noise of the fixed cost. CPU time on a shared machine moves with the other load, so every configuration is
measured `--repeats` times, the configurations interleaved (one round of all of them, then the next), and the medians
are reported (the marginal figure is the median large run less the median tiny run). Writes bench/results/beam.json.

    python -m bench.bench_pretraining_data beam [--dupe_factor=100] [--max_seq_length=128] [--repeats=3]

sentence_split: the sentence splitters for `prepare_corpus.py`: sentences/s and agreement with hand-checked splits, per library.

    pip install -r bench/requirements.txt   # pysbd and spaCy, compared with Bling Fire (requirements.txt)
    python -m bench.bench_pretraining_data sentence_split [--speed_mb=0.5] [--rounds=3]

Agreement is measured on `bench/data/sentence_split_sample.json` (English prose, Wikipedia-style text with
abbreviations and numbers, Chinese): a predicted sentence counts when its span equals a gold sentence's (spans
compared without whitespace); the table gives F1 per category and the share of paragraphs split exactly right.
Speed is sentences/s and MB/s of text splitting the paragraphs of the Project Gutenberg books in
`../shared/data/corpus/gutenberg/` (the first --speed_mb MB; the sample repeated when they are not there), the
best of --rounds passes in one process on one core.

Each library runs as documented for English text (Bling Fire `text_to_sentences`; pysbd `Segmenter(language="en",
clean=False)`; spaCy `blank("en")` with the rule-based `sentencizer`), once alone and once behind this project's
CJK rule (`albert_tf.data.corpus.sentences.split_with`: text is first cut after 。！？, and only pieces holding a
Latin sentence end go to the library); "blingfire + CJK rule" is exactly what `prepare_corpus.py` runs. Results go
to bench/results/sentence_split.json.
"""

import argparse
import contextlib
import glob
import hashlib
import importlib.metadata
import json
import os
import re
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

from bench.support import common  # first: the environment every benchmark needs

from absl import flags

ROOT = common.REPO
SPM_MODEL = common.SPM_MODEL
GUTENBERG = common.GUTENBERG
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
    shared = [f"--input_file={','.join(corpus_files)}", f"--spm_model_file={SPM_MODEL}",
              f"--max_seq_length={length}", f"--max_predictions_per_seq={args.max_predictions_per_seq}",
              f"--dupe_factor={args.dupe_factor}"]
    configs = []
    if args.original_dir:
        out = os.path.join(out_dir, f"original-{length}.tfrecord")
        script = os.path.join(args.original_dir, "create_pretraining_data.py")
        configs.append(("original", 1, common.module_command("bench.support.original_compat", script)
                        + shared + [f"--vocab_file={SPM_MODEL}", f"--output_file={out}"], out, "original"))
    variants = [(None, "default shards")] + ([(args.small_shards_mb, f"{args.small_shards_mb:g} MB shards")]
                                             if args.small_shards_mb else [])
    for shard_mb, variant in variants:
        for workers in args.workers:
            out = os.path.join(out_dir, f"albert_tf-{length}-{workers}-{shard_mb}.tfrecord")
            shards = [f"--shard_size_mb={shard_mb}"] if shard_mb else []
            suffix = f", {variant}" if shard_mb else ""
            configs.append((f"albert_tf, {workers} worker{'s' if workers > 1 else ''}{suffix}", workers,
                            [sys.executable, os.path.join(ROOT, "create_pretraining_data.py")] + shared + shards
                            + [f"--num_workers={workers}", f"--output_file={out}"], out, variant))
    return configs


def prepare_corpus(args, tmp):
    if args.corpus_dir:
        return sorted(glob.glob(os.path.join(args.corpus_dir, "*.txt"))), args.corpus_dir
    from tools import make_shipped_corpus as tool  # pylint: disable=import-outside-toplevel

    corpus = os.path.join(tmp, "corpus")
    books = [b for b in args.books.split(",") if b]
    return sorted(tool.prepare(GUTENBERG, corpus, books, bytes_per_book=0)), f"{len(books)} books: {args.books}"


def original_main(argv):
    parser = argparse.ArgumentParser(prog="python -m bench.bench_pretraining_data original",
                                     description=__doc__.split("\n\n")[0])
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
    args = parser.parse_args(argv[1:])
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
                  f"run by bench.support.original_compat")
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


# -------------------------------------------------------------------------------------------- beam
BEAM_CORPUS = sorted(glob.glob(os.path.join(ROOT, "data", "corpus", "gutenberg-*.txt")))
BEAM_TINY = [os.path.join(ROOT, "data", "corpus", "sample_text.txt")]
BEAM_CONFIGS = {
    "local pool, 1 process": ("local", 1),
    "local pool, 2 processes": ("local", 2),
    "Beam DirectRunner, in_memory (1 worker)": ("beam", 1),
    "Beam DirectRunner, multi_processing (2 workers)": ("beam", 2),
    "Beam DirectRunner, 2 workers, --global_shuffle": ("beam-shuffle", 2),
}


def _beam_one(kind, workers, inputs, out, dupe_factor, max_seq_length):
    """Runs one configuration in this process; prints the number of records."""
    # pylint: disable-next=import-outside-toplevel
    from albert_tf.data.pretraining import PretrainingConfig, create_pretraining_data

    config = PretrainingConfig(max_seq_length=max_seq_length, max_predictions_per_seq=20, dupe_factor=dupe_factor)
    if kind == "local":
        stats = create_pretraining_data(inputs, [os.path.join(out, "local.tfrecord")], spm_model_file=SPM_MODEL,
                                        config=config, num_workers=workers)
    else:
        from albert_tf.data.pretraining import beam  # pylint: disable=import-outside-toplevel

        mode = ["--direct_running_mode=in_memory"] if workers == 1 else [
            "--direct_running_mode=multi_processing", f"--direct_num_workers={workers}"]
        stats = beam.create_pretraining_data_beam(
            inputs, os.path.join(out, "pretraining"), spm_model_file=SPM_MODEL, config=config,
            num_output_shards=workers,
            global_shuffle=kind == "beam-shuffle", pipeline_args=["--runner=DirectRunner", *mode])
    print(json.dumps({"records": stats.instances}))


def _beam_measure(kind, workers, inputs, dupe_factor, max_seq_length):
    with tempfile.TemporaryDirectory() as out:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        args = common.module_command("bench.bench_pretraining_data", "beam", "--one", kind, str(workers),
                                     ",".join(inputs), out, str(dupe_factor), str(max_seq_length))
        result = subprocess.run(args, capture_output=True, text=True, check=False,
                                env=common.child_env(CUDA_VISIBLE_DEVICES="-1"))
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode:
        raise SystemExit(f"{kind} {workers} failed:\n{result.stderr[-3000:]}")
    records = json.loads(result.stdout.strip().splitlines()[-1])["records"]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"records": records, "cpu_s": round(cpu, 3), "wall_s": round(wall, 3)}


def beam_main(argv):
    if len(argv) > 1 and argv[1] == "--one":
        kind, workers, inputs, out, dupe, seq = argv[2:8]
        _beam_one(kind, int(workers), inputs, out, int(dupe), int(seq))
        return
    parser = argparse.ArgumentParser(prog="python -m bench.bench_pretraining_data beam",
                                     description="CPU time per record: the local tool against Apache Beam.")
    parser.add_argument("--dupe_factor", type=int, default=100)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--output", default=os.path.join(common.RESULTS_DIR, "beam.json"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv[1:])
    runs = {name: {"large": [], "tiny": []} for name in BEAM_CONFIGS}
    for repeat in range(args.repeats):
        for name, (kind, workers) in BEAM_CONFIGS.items():
            big = _beam_measure(kind, workers, BEAM_CORPUS, args.dupe_factor, args.max_seq_length)
            tiny = _beam_measure(kind, workers, BEAM_TINY, 1, args.max_seq_length)
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
        "input": {"files": [os.path.relpath(p, ROOT) for p in BEAM_CORPUS],
                  "text_bytes": sum(os.path.getsize(p) for p in BEAM_CORPUS), "dupe_factor": args.dupe_factor,
                  "max_seq_length": args.max_seq_length, "max_predictions_per_seq": 20},
        "repeats": args.repeats,
        "results": rows,
    }, args.output)


# -------------------------------------------------------------------------------- sentence_split
FLAGS = flags.FLAGS
SAMPLE = os.path.join(ROOT, "bench", "data", "sentence_split_sample.json")


def define_sentence_split_flags():
    """The flags of `sentence_split`."""
    flags.DEFINE_float("speed_mb", 0.5, "MB of book text each splitter is timed on.")
    flags.DEFINE_integer("rounds", 3, "Timed passes per splitter (the best is kept).")
    flags.DEFINE_list("workers", ["1", "2"], "--num_workers values the whole pipeline is timed with.")
    flags.DEFINE_integer("pipeline_once", 0, "(internal) time one pipeline run with this many workers, print JSON.")
    flags.DEFINE_string("output", None, "Results JSON (default bench/results/sentence_split.json).")


def libraries():
    """{name: (version, text -> sentences)} of the splitters that are installed."""
    from albert_tf.data.corpus import sentences  # pylint: disable=import-outside-toplevel

    found = {"blingfire": (importlib.metadata.version("blingfire"), sentences.bling_fire_sentences)}
    try:
        import pysbd  # pylint: disable=import-outside-toplevel

        segmenter = pysbd.Segmenter(language="en", clean=False)
        found["pysbd"] = (importlib.metadata.version("pysbd"), segmenter.segment)
    except ImportError:
        print("pysbd is not installed (pip install -r bench/requirements.txt); skipped")
    try:
        import spacy  # pylint: disable=import-outside-toplevel

        nlp = spacy.blank("en")
        nlp.add_pipe("sentencizer")
        found["spacy sentencizer"] = (importlib.metadata.version("spacy"),
                                      lambda text: [s.text for s in nlp(text).sents])
    except ImportError:
        print("spaCy is not installed (pip install -r bench/requirements.txt); skipped")
    splitters = {}
    for name, (version, split) in found.items():
        splitters[name] = (version, split)
        splitters[name + " + CJK rule"] = (version, lambda text, split=split: sentences.split_with(text, split))
    return splitters


def load_sample():
    with open(SAMPLE, encoding="utf-8") as f:
        paragraphs = json.load(f)["paragraphs"]
    for para in paragraphs:
        para["text"] = ("" if para["category"] == "chinese" else " ").join(para["sentences"])
    return paragraphs


def spans(parts, text):
    """(start, end) of each part in `text` with all whitespace removed; None if the parts do not cover `text`."""
    out, pos = [], 0
    for part in parts:
        size = len("".join(part.split()))
        if size:
            out.append((pos, pos + size))
            pos += size
    return out if "".join("".join(parts).split()) == "".join(text.split()) else None


def agreement(split, paragraphs):
    """{category: {"precision", "recall", "f1", "paragraphs_exact"}} and the same over all."""
    tallies = {}
    for para in paragraphs:
        gold = set(spans(para["sentences"], para["text"]))
        predicted = spans([s for s in split(para["text"]) if s.strip()], para["text"])
        predicted = set(predicted) if predicted is not None else set()  # text lost or changed: nothing counts
        for key in (para["category"], "all"):
            t = tallies.setdefault(key, {"gold": 0, "predicted": 0, "correct": 0, "paragraphs": 0, "exact": 0})
            t["gold"] += len(gold)
            t["predicted"] += len(predicted)
            t["correct"] += len(gold & predicted)
            t["paragraphs"] += 1
            t["exact"] += gold == predicted
    scores = {}
    for key, t in tallies.items():
        precision, recall = t["correct"] / max(t["predicted"], 1), t["correct"] / max(t["gold"], 1)
        scores[key] = {"precision": round(precision, 4), "recall": round(recall, 4),
                       "f1": round(2 * precision * recall / max(precision + recall, 1e-9), 4),
                       "paragraphs_exact": f"{t['exact']}/{t['paragraphs']}", "gold_sentences": t["gold"]}
    return scores


def speed_text(sample):
    """Paragraphs (whitespace-normalised) of about --speed_mb MB, and where they come from."""
    limit, paragraphs, size = FLAGS.speed_mb * 1e6, [], 0
    if os.path.isdir(GUTENBERG):
        for name in sorted(os.listdir(GUTENBERG)):
            if not name.endswith(".txt"):
                continue
            with open(os.path.join(GUTENBERG, name), encoding="latin-1") as f:
                for block in re.split(r"\n\s*\n", f.read()):
                    para = " ".join(block.split())
                    if para and size < limit:
                        paragraphs.append(para)
                        size += len(para.encode("utf-8"))
        where = f"Project Gutenberg books (NLTK selection), first {size / 1e6:.2f} MB of paragraphs"
    while size < limit:
        for para in sample:
            paragraphs.append(para["text"])
            size += len(para["text"].encode("utf-8"))
        where = f"the sample repeated, {size / 1e6:.2f} MB"
    return paragraphs, size, where


def split_rate(split, paragraphs, size):
    best = None
    count = 0
    for _ in range(FLAGS.rounds):
        start = time.perf_counter()
        count = sum(len(split(p)) for p in paragraphs)
        seconds = time.perf_counter() - start
        best = seconds if best is None else min(best, seconds)
    return {"sentences": count, "seconds": round(best, 3), "sentences_per_s": round(count / best),
            "mb_per_s": round(size / 1e6 / best, 3)}


def pipeline_once(workers):
    """One run of `prepare_corpus` (the script's defaults, 4 shards) on the books with `workers` processes, in a
    fresh process (so workers fork, as in the script); the time is until all is written (the moves into place, and
    TensorFlow's import they bring, not counted)."""
    from albert_tf.data import corpus  # pylint: disable=import-outside-toplevel

    files = sorted(os.path.join(GUTENBERG, n) for n in os.listdir(GUTENBERG) if n.endswith(".txt"))
    seen = []
    with tempfile.TemporaryDirectory() as tmp:
        stats = corpus.prepare_corpus(files, os.path.join(tmp, "c"), num_shards=4, num_workers=workers,
                                      cleaning=corpus.CleaningOptions(min_document_chars=50),
                                      progress=lambda s: seen.append(s.elapsed_seconds), progress_every=10 ** 9)
    print(json.dumps({"seconds": seen[-1], "input_mb": stats.bytes_total / 1e6, "files": stats.files_total,
                      "documents_read": stats.documents_read, "sentences_written": stats.sentences_written}))


def pipeline_rates():
    """{workers: MB/s of input through `prepare_corpus` ...}, best of --rounds fresh processes each."""
    if not os.path.isdir(GUTENBERG):
        return None
    out = {}
    for workers in [int(w) for w in FLAGS.workers]:
        runs = []
        for _ in range(FLAGS.rounds):
            args = common.module_command("bench.bench_pretraining_data", "sentence_split",
                                         f"--pipeline_once={workers}")
            done = subprocess.run(args, capture_output=True, text=True, check=True, env=common.child_env())
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        best = min(runs, key=lambda r: r["seconds"])
        out[str(workers)] = {"input_mb": round(best["input_mb"], 2), "files": best["files"],
                             "documents_read": best["documents_read"],
                             "sentences_written": best["sentences_written"], "seconds": round(best["seconds"], 3),
                             "mb_per_s": round(best["input_mb"] / best["seconds"], 2)}
    return out


def sentence_split_main(argv):
    del argv
    if FLAGS.pipeline_once:
        pipeline_once(FLAGS.pipeline_once)
        return
    sample = load_sample()
    paragraphs, size, where = speed_text(sample)
    results = {"sample": {key: value["gold_sentences"]
                          for key, value in agreement(lambda t: [t], sample).items()},
               "speed_text": where, "rounds": FLAGS.rounds, "splitters": {}}
    print(f"sample: {results['sample']}; speed on {where}")
    print(f"{'splitter':28s} {'sent/s':>9s} {'MB/s':>7s}  F1 prose / wikipedia / chinese / all   exact paragraphs")
    for name, (version, split) in libraries().items():
        scores = agreement(split, sample)
        speed = split_rate(split, paragraphs, size)
        results["splitters"][name] = {"version": version, "speed": speed, "agreement": scores}
        f1 = " / ".join(f"{scores[k]['f1']:.3f}" for k in ("prose", "wikipedia", "chinese", "all"))
        print(f"{name:28s} {speed['sentences_per_s']:9,d} {speed['mb_per_s']:7.2f}  {f1}   "
              f"{scores['all']['paragraphs_exact']}")
    results["prepare_corpus"] = pipeline_rates()
    for workers, r in (results["prepare_corpus"] or {}).items():
        print(f"prepare_corpus, --num_workers={workers}: {r['mb_per_s']:.2f} MB/s ({r['input_mb']} MB, {r['files']} "
              f"books, {r['documents_read']} documents, {r['sentences_written']} sentences in {r['seconds']} s)")
    common.write_result(results, FLAGS.output or os.path.join(common.RESULTS_DIR, "sentence_split.json"))



if __name__ == "__main__":
    common.run_subcommands({"original": original_main, "beam": beam_main,
                            "sentence_split": common.absl_subcommand(define_sentence_split_flags,
                                                                     sentence_split_main)}, "original")
