"""Benchmark: pretraining data creation, this project's pipeline against the original's single-process approach.

What is measured, for max_seq_length 128 and 512 with dupe_factor 1 (other flags at the original's defaults, seed
12345, SentencePiece `data/30k-clean.model`):

* `albert_tf.pretraining_data.create_pretraining_data` with 1 and with 2 worker processes;
* BASELINE: `OriginalAlgorithm` below, a faithful single-process pure-Python re-implementation of the original
  script's algorithm (read everything, tokenize line by line to piece strings, build instances with
  `random.Random` and numpy's global generator for n-gram lengths, shuffle all instances, build a
  `tf.train.Example` per instance and write it with `tf.io.TFRecordWriter`). It was written for this benchmark from
  the original's documented behaviour; it is not the original's code.

Each configuration runs in a fresh child process, which times `--repeats` runs (default 3) and reports the best, as
the machine may be shared. Reported:
* wall time and CPU time (user + system of the process and its workers) of the generation call, including loading
  the SentencePiece model on both sides and starting the workers on ours (TensorFlow import and interpreter start-up
  are excluded for both);
* instances per second and MB of input text per second (from the wall time);
* memory: `ru_maxrss` of the child and of its worker processes (`resource.getrusage(RUSAGE_SELF / RUSAGE_CHILDREN)`),
  the growth of the child's RSS over its size before the run, and the sampled peak PSS of the child plus workers.
The speed-up is baseline time / our time on the same corpus and flags, on wall time and on CPU time (the CPU figure
is the one to trust when other work competes for the cores).

Corpus: by default the six prose books of `tools/prepare_corpus.py` converted whole (about 3.8 MB) into a temporary
directory from `../shared/data/corpus/gutenberg`; `--corpus shipped` uses `data/corpus/` (0.5 MB).

Usage:
  python bench/bench_pretraining_data.py [--corpus full|shipped] [--lengths 128,512] [--skip_baseline]
"""

import argparse
import collections
import glob
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

SPM_MODEL = os.path.join(ROOT, "data", "30k-clean.model")
GUTENBERG = os.path.join(ROOT, "..", "shared", "data", "corpus", "gutenberg")


# ----------------------------------------------------------------------------------------------------------------
# BASELINE: the original algorithm, single process, pure Python (see the module docstring).


class OriginalAlgorithm:
    """The original `create_pretraining_data.py` algorithm, as a plain single-process reference.

    Same steps and the same per-token Python work as the original; its only purpose is to be timed against, and to
    give reference statistics (instance count, label balance, masked count) to compare the fast path with.
    """

    SPECIALS = frozenset(('[CLS]', '[SEP]'))
    PUNCT = frozenset('!"#$%&()*+,-./:;?@[\\]^_`{|}~')
    LETTERS_PUNCT = frozenset("abcdefghijklmnopqrstuvwxyz") | PUNCT

    def __init__(self, spm_model_file, max_seq_length, max_predictions_per_seq=20, masked_lm_prob=0.15,
                 short_seq_prob=0.1, ngram=3, dupe_factor=1, seed=12345):
        import numpy as np  # pylint: disable=import-outside-toplevel
        import sentencepiece  # pylint: disable=import-outside-toplevel

        self.np = np
        self.sp = sentencepiece.SentencePieceProcessor()
        self.sp.load(spm_model_file)
        self.vocab_words = [self.sp.id_to_piece(i) for i in range(self.sp.get_piece_size())]
        self.max_seq_length = max_seq_length
        self.max_predictions = max_predictions_per_seq
        self.masked_lm_prob = masked_lm_prob
        self.short_seq_prob = short_seq_prob
        self.dupe_factor = dupe_factor
        self.rng = random.Random(seed)
        self.ngrams = np.arange(1, ngram + 1, dtype=np.int64)
        weights = 1.0 / np.arange(1, ngram + 1)
        self.pvals = weights / weights.sum()

    def tokenize(self, line):
        from albert_tf.text import tokenization  # pylint: disable=import-outside-toplevel

        return tokenization.encode_pieces(self.sp, line)

    def read_documents(self, files):
        from albert_tf.text import tokenization  # pylint: disable=import-outside-toplevel

        documents = [[]]
        for path in files:
            with open(path, encoding="utf-8") as f:
                for raw in f:
                    line = tokenization.preprocess_text(raw, lower=True)
                    if not line:
                        documents.append([])
                    pieces = self.tokenize(line)
                    if pieces:
                        documents[-1].append(pieces)
        documents = [d for d in documents if d]
        self.rng.shuffle(documents)
        return documents

    def is_word_start(self, piece):
        if piece.startswith("\u2581") or piece.startswith("<") or piece in self.PUNCT:
            return True
        return not all(ch.lower() in self.LETTERS_PUNCT for ch in piece)

    def truncate(self, tokens_a, tokens_b, max_num_tokens):
        while len(tokens_a) + len(tokens_b) > max_num_tokens:
            longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
            if self.rng.random() < 0.5:
                del longer[0]
            else:
                longer.pop()

    def mask(self, tokens):
        rng, np = self.rng, self.np
        words, boundary = [], [0] * len(tokens)
        for i, tok in enumerate(tokens):
            if tok in self.SPECIALS:
                boundary[i] = 1
                continue
            start = self.is_word_start(tok)
            if words and not start:
                words[-1].append(i)
            else:
                words.append([i])
                boundary[i] = int(start)
        output = list(tokens)
        budget = min(self.max_predictions, max(1, int(round(len(tokens) * self.masked_lm_prob))))
        candidates = [[words[w:w + n] for n in self.ngrams] for w in range(len(words))]
        rng.shuffle(candidates)
        chosen, covered = [], set()
        for options in candidates:
            if len(chosen) >= budget:
                break
            n = np.random.choice(self.ngrams, p=self.pvals)  # unseeded, as in the original
            span = sum(options[n - 1], [])
            while len(chosen) + len(span) > budget and n > 1:
                n -= 1
                span = sum(options[n - 1], [])
            if len(chosen) + len(span) > budget or any(i in covered for i in span):
                continue
            for i in span:
                covered.add(i)
                if rng.random() < 0.8:
                    output[i] = "[MASK]"
                elif rng.random() >= 0.5:
                    output[i] = self.vocab_words[rng.randint(0, len(self.vocab_words) - 1)]
                chosen.append((i, tokens[i]))
        chosen.sort()
        return output, [i for i, _ in chosen], [t for _, t in chosen], boundary

    def document_instances(self, documents, index):
        rng = self.rng
        document = documents[index]
        max_num_tokens = self.max_seq_length - 3
        target = max_num_tokens
        if rng.random() < self.short_seq_prob:
            target = rng.randint(2, max_num_tokens)
        out, chunk, length, i = [], [], 0, 0
        while i < len(document):
            chunk.append(document[i])
            length += len(document[i])
            if i == len(document) - 1 or length >= target:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                tokens_a = [t for seg in chunk[:a_end] for t in seg]
                tokens_b = []
                if len(chunk) == 1:
                    label = 1
                    for _ in range(10):
                        other = rng.randint(0, len(documents) - 1)
                        if other != index:
                            break
                    other_doc = documents[other]
                    for seg in other_doc[rng.randint(0, len(other_doc) - 1):]:
                        tokens_b.extend(seg)
                        if len(tokens_b) >= target - len(tokens_a):
                            break
                    i -= len(chunk) - a_end
                elif rng.random() < 0.5:
                    label = 1
                    tokens_b = [t for seg in chunk[a_end:] for t in seg]
                    tokens_a, tokens_b = tokens_b, tokens_a
                else:
                    label = 0
                    tokens_b = [t for seg in chunk[a_end:] for t in seg]
                self.truncate(tokens_a, tokens_b, max_num_tokens)
                tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
                segments = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
                output, positions, labels, boundary = self.mask(tokens)
                out.append((output, segments, positions, labels, boundary, label))
                chunk, length = [], 0
            i += 1
        return out

    def run(self, files, output_file):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        documents = self.read_documents(files)
        instances = []
        for _ in range(self.dupe_factor):
            for index in range(len(documents)):
                instances.extend(self.document_instances(documents, index))
        self.rng.shuffle(instances)
        stats = collections.Counter()

        def int_feature(values):
            return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

        with tf.io.TFRecordWriter(output_file) as writer:
            for output, segments, positions, labels, boundary, label in instances:
                ids = [self.sp.piece_to_id(t) for t in output]
                pad = self.max_seq_length - len(ids)
                label_ids = [self.sp.piece_to_id(t) for t in labels]
                slots = self.max_predictions - len(positions)
                features = collections.OrderedDict()
                features["input_ids"] = int_feature(ids + [0] * pad)
                features["input_mask"] = int_feature([1] * len(ids) + [0] * pad)
                features["segment_ids"] = int_feature(segments + [0] * pad)
                features["token_boundary"] = int_feature(boundary + [0] * pad)
                features["masked_lm_positions"] = int_feature(positions + [0] * slots)
                features["masked_lm_ids"] = int_feature(label_ids + [0] * slots)
                features["masked_lm_weights"] = tf.train.Feature(
                    float_list=tf.train.FloatList(value=[1.0] * len(positions) + [0.0] * slots))
                features["next_sentence_labels"] = int_feature([label])
                example = tf.train.Example(features=tf.train.Features(feature=features))
                writer.write(example.SerializeToString())
                if random.randint(1, 100) >= 97:
                    writer.flush()
                stats["instances"] += 1
                stats["label1"] += label
                stats["masked"] += len(positions)
                stats["tokens"] += len(ids)
        return stats


# ----------------------------------------------------------------------------------------------------------------
# One measurement, in a child process


def _proc_kb(pid, field, name="status"):
    try:
        with open(f"/proc/{pid}/{name}") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    kids = [int(k) for k in f.read().split()]
                out.extend(kids)
                todo.extend(kids)
        except OSError:
            pass
    return out


class TreeMemorySampler:
    """Samples the proportional set size (PSS, shared pages split between sharers) of this process and its
    descendants every 50 ms; `peak_mb` is the largest total seen. Linux /proc only (0 elsewhere)."""

    def __init__(self):
        import threading  # pylint: disable=import-outside-toplevel

        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self):
        pids = [os.getpid()] + _descendants(os.getpid())
        total = sum(_proc_kb(p, "Pss:", "smaps_rollup") for p in pids)
        self.peak_kb = max(self.peak_kb, total)

    def _run(self):
        while not self._stop.wait(0.05):
            self._sample()

    def __enter__(self):
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample()

    @property
    def peak_mb(self):
        return self.peak_kb / 1024


def _cpu_seconds():
    """User + system CPU time of this process and of its finished (joined) child processes."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _child(spec):
    import tensorflow as tf  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import

    from albert_tf.data import pretraining_data  # pylint: disable=import-outside-toplevel

    files = sorted(glob.glob(os.path.join(spec["corpus"], "*.txt")))
    text_bytes = sum(os.path.getsize(f) for f in files)
    out = os.path.join(spec["out_dir"], f"{spec['name']}.tfrecord")
    rss_before_mb = _proc_kb("self", "VmRSS:") / 1024
    times = []
    with TreeMemorySampler() as memory:
        for _ in range(spec["repeats"]):
            if spec["impl"] == "baseline":
                start, cpu = time.perf_counter(), _cpu_seconds()  # model loading timed on both sides
                algo = OriginalAlgorithm(SPM_MODEL, spec["max_seq_length"], dupe_factor=1)
                counts = algo.run(files, out)
                times.append((time.perf_counter() - start, _cpu_seconds() - cpu))
                result = {"instances": counts["instances"], "label1": counts["label1"], "masked": counts["masked"],
                          "tokens": counts["tokens"]}
            else:
                config = pretraining_data.PretrainingConfig(max_seq_length=spec["max_seq_length"], dupe_factor=1)
                start, cpu = time.perf_counter(), _cpu_seconds()
                stats = pretraining_data.create_pretraining_data(files, [out], spm_model_file=SPM_MODEL,
                                                                 config=config, num_workers=spec["workers"])
                times.append((time.perf_counter() - start, _cpu_seconds() - cpu))
                result = {"instances": stats.instances, "label1": stats.sentence_order_positive,
                          "masked": stats.masked_positions, "tokens": stats.instance_tokens}
    elapsed = min(t for t, _ in times)
    cpu_seconds = min(c for _, c in times)
    os.remove(out)
    result.update(elapsed=elapsed, cpu=cpu_seconds, text_bytes=text_bytes, rss_before_mb=rss_before_mb,
                  tree_pss_mb=memory.peak_mb,
                  rss_self_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  rss_children_mb=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
    print("RESULT " + json.dumps(result))


def _measure(spec):
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--_child", json.dumps(spec)],
                          capture_output=True, text=True, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"benchmark child failed:\n{proc.stdout}\n{proc.stderr[-4000:]}")


def main():
    parser = argparse.ArgumentParser(description="Benchmark pretraining data creation.")
    parser.add_argument("--corpus", default="full", help="full (whole Gutenberg books) or shipped (data/corpus)")
    parser.add_argument("--lengths", default="128,512")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--skip_baseline", action="store_true")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per configuration; the best is reported")
    parser.add_argument("--_child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._child:  # pylint: disable=protected-access
        _child(json.loads(args._child))  # pylint: disable=protected-access
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        if args.corpus == "shipped":
            corpus = os.path.join(ROOT, "data", "corpus")
        else:
            sys.path.insert(0, os.path.join(ROOT, "tools"))
            import prepare_corpus  # pylint: disable=import-outside-toplevel

            corpus = os.path.join(tmp, "corpus")
            prepare_corpus.prepare(GUTENBERG, corpus, bytes_per_book=0)
        size = sum(os.path.getsize(f) for f in glob.glob(os.path.join(corpus, "*.txt")))
        print(f"corpus: {corpus} ({size / 1e6:.2f} MB); dupe_factor 1; cpus: {os.cpu_count()}")
        print("memory: 'rss+' = peak RSS of the measuring process minus its RSS before the run (after imports);"
              " 'maxrss' / 'child maxrss' = getrusage(RUSAGE_SELF / RUSAGE_CHILDREN).ru_maxrss (RUSAGE_CHILDREN "
              "includes a helper TensorFlow forks at import, ~470 MB); 'tree PSS' = sampled peak PSS of the process "
              "and its workers")
        header = (f"{'implementation':<28}{'seq':>5}{'instances':>10}{'time s':>8}{'CPU s':>7}{'inst/s':>8}{'MB/s':>7}"
                  f"{'rss+ MB':>9}{'maxrss':>8}{'child maxrss':>13}{'tree PSS':>10}{'label1':>8}{'masked':>8}")
        print(header)
        print("-" * len(header))
        for length in [int(x) for x in args.lengths.split(",")]:
            rows = []
            if not args.skip_baseline:
                rows.append(("BASELINE original algorithm", _measure(
                    {"impl": "baseline", "max_seq_length": length, "corpus": corpus, "out_dir": tmp,
                     "name": f"base{length}", "repeats": args.repeats})))
            for workers in [int(x) for x in args.workers.split(",")]:
                rows.append((f"albert_tf, {workers} worker(s)", _measure(
                    {"impl": "ours", "workers": workers, "max_seq_length": length, "corpus": corpus,
                     "out_dir": tmp, "name": f"ours{length}-{workers}", "repeats": args.repeats})))
            for name, r in rows:
                n = max(r["instances"], 1)
                print(f"{name:<28}{length:>5}{r['instances']:>10}{r['elapsed']:>8.2f}{r['cpu']:>7.2f}"
                      f"{r['instances'] / r['elapsed']:>8.0f}{r['text_bytes'] / r['elapsed'] / 1e6:>7.2f}"
                      f"{r['rss_self_mb'] - r['rss_before_mb']:>9.0f}{r['rss_self_mb']:>8.0f}"
                      f"{r['rss_children_mb']:>13.0f}{r['tree_pss_mb']:>10.0f}{r['label1'] / n:>8.3f}"
                      f"{r['masked'] / n:>8.2f}")
            if not args.skip_baseline:
                base = rows[0][1]["elapsed"]
                base_cpu = rows[0][1]["cpu"]
                print("speed-up vs baseline, wall time: " + ", ".join(
                    f"{name.split(', ')[1]} {base / r['elapsed']:.1f}x" for name, r in rows[1:])
                      + f"; CPU time: {base_cpu / rows[1][1]['cpu']:.1f}x")
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
