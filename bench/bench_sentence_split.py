r"""Sentence splitters for `prepare_corpus.py`: sentences/s and agreement with hand-checked splits, per library.

    pip install -r bench/requirements.txt   # pysbd and spaCy, compared with Bling Fire (requirements.txt)
    python bench/bench_sentence_split.py [--speed_mb=0.5] [--rounds=3]

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

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import common  # first: the environment and sys.path every bench script needs

from absl import app, flags

from albert_tf.data.corpus import sentences

FLAGS = flags.FLAGS
flags.DEFINE_float("speed_mb", 0.5, "MB of book text each splitter is timed on.")
flags.DEFINE_integer("rounds", 3, "Timed passes per splitter (the best is kept).")
flags.DEFINE_list("workers", ["1", "2"], "--num_workers values the whole pipeline is timed with.")
flags.DEFINE_integer("pipeline_once", 0, "(internal) time one pipeline run with this many workers, print JSON.")
flags.DEFINE_string("output", None, "Results JSON (default bench/results/sentence_split.json).")

HERE = common.REPO
SAMPLE = os.path.join(HERE, "bench", "data", "sentence_split_sample.json")
BOOKS = os.path.join(HERE, "..", "shared", "data", "corpus", "gutenberg")


def libraries():
    """{name: (version, text -> sentences)} of the splitters that are installed."""
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
    if os.path.isdir(BOOKS):
        for name in sorted(os.listdir(BOOKS)):
            if not name.endswith(".txt"):
                continue
            with open(os.path.join(BOOKS, name), encoding="latin-1") as f:
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


def rate(split, paragraphs, size):
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

    files = sorted(os.path.join(BOOKS, n) for n in os.listdir(BOOKS) if n.endswith(".txt"))
    seen = []
    with tempfile.TemporaryDirectory() as tmp:
        stats = corpus.prepare_corpus(files, os.path.join(tmp, "c"), num_shards=4, num_workers=workers,
                                      cleaning=corpus.CleaningOptions(min_document_chars=50),
                                      progress=lambda s: seen.append(s.elapsed_seconds), progress_every=10 ** 9)
    print(json.dumps({"seconds": seen[-1], "input_mb": stats.bytes_total / 1e6, "files": stats.files_total,
                      "documents_read": stats.documents_read, "sentences_written": stats.sentences_written}))


def pipeline_rates():
    """{workers: MB/s of input through `prepare_corpus` ...}, best of --rounds fresh processes each."""
    if not os.path.isdir(BOOKS):
        return None
    out = {}
    for workers in [int(w) for w in FLAGS.workers]:
        runs = []
        for _ in range(FLAGS.rounds):
            done = subprocess.run([sys.executable, os.path.abspath(__file__), f"--pipeline_once={workers}"],
                                  capture_output=True, text=True, check=True)
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        best = min(runs, key=lambda r: r["seconds"])
        out[str(workers)] = {"input_mb": round(best["input_mb"], 2), "files": best["files"],
                             "documents_read": best["documents_read"],
                             "sentences_written": best["sentences_written"], "seconds": round(best["seconds"], 3),
                             "mb_per_s": round(best["input_mb"] / best["seconds"], 2)}
    return out


def main(argv):
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
        speed = rate(split, paragraphs, size)
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
    app.run(main)
