"""Unlabelled text from the task data in `../shared/data`, to pretrain on beside the books
(`bench_pretrain_finetune.py --extra_text`).

Each source becomes a JSON Lines file of documents (`{"text": ...}`, paragraphs separated by a blank line) that the
library's `prepare_corpus` turns into the pretraining input format. Only passages are taken: never a label, a
question or an answer option, and of GLUE only the train split (its dev sets score the fine-tuning).

* race:  every article of RACE (the dev split, the only one in `../shared/data`), one document each.
* squad: the SQuAD v1.1 dev contexts, one document per Wikipedia article (its paragraphs in order).
* sst-2: SST-2's training sentences. Its train set is 67,349 phrases, most of them pieces of longer ones; only
         the phrases that no other phrase contains are kept (the whole sentences), in groups of `GROUP` as
         documents. They are unordered review snippets, so their sentence order teaches nothing: they are there
         for the masked LM (task-adaptive pretraining, Gururangan et al. 2020).
* mrpc:  MRPC's training sentences (both of each pair, each sentence once), in file order, in groups of `GROUP`.
"""

import glob
import json
import os
import zipfile

from albert_tf import fileio

SOURCES = ("race", "squad", "sst-2", "mrpc")
ORDERLESS = ("sst-2", "mrpc")  # their documents are groups of unrelated sentences: no sentence order to learn
GROUP = 10  # sentences per document for the GLUE sources


def race_documents(race_dir):
    """The articles of every RACE question file under `race_dir`, each a list of paragraphs."""
    paths = sorted(glob.glob(os.path.join(race_dir, "**", "*.txt"), recursive=True))
    if not paths:
        raise SystemExit(f"unlabelled_text: error: no RACE files (*.txt) under {race_dir}")
    for path in paths:
        with open(path, encoding="utf-8") as f:
            yield [p for p in json.load(f)["article"].split("\n") if p.strip()]


def squad_documents(squad_file):
    """The contexts of a SQuAD JSON file (or a zip holding one), one list of paragraphs per article."""
    if squad_file.endswith(".zip"):
        with zipfile.ZipFile(squad_file) as archive:
            names = [n for n in archive.namelist() if n.endswith(".json")]
            with archive.open(names[0]) as f:
                data = json.load(f)
    else:
        with open(squad_file, encoding="utf-8") as f:
            data = json.load(f)
    for article in data["data"]:
        yield [p["context"] for p in article["paragraphs"]]


def maximal_phrases(phrases):
    """The phrases (in first-seen order) that are not a word-aligned part of another phrase."""
    unique = list(dict.fromkeys(p.strip() for p in phrases if p.strip()))
    kept, blob, pending = set(), "", []
    for phrase in sorted(unique, key=len, reverse=True):
        needle = f" {phrase} "
        if needle in blob or any(needle in p for p in pending):
            continue
        kept.add(phrase)
        pending.append(needle)
        if len(pending) >= 256:
            blob += "\n".join(pending) + "\n"
            pending = []
    return [p for p in unique if p in kept]


def glue_sentences(glue_dir, task):
    """The training sentences of `task` (sst-2 or mrpc), each once, read by the library's GLUE processor."""
    from albert_tf.data import glue  # pylint: disable=import-outside-toplevel

    processor = glue.get_processor(task)
    examples = processor.get_train_examples(os.path.join(glue_dir, processor.task.directory))
    sentences = [s for e in examples for s in (e.text_a, e.text_b) if s is not None]
    if task == "sst-2":
        return maximal_phrases(sentences)
    return list(dict.fromkeys(s.strip() for s in sentences))


def grouped(sentences, size=GROUP):
    """Documents of `size` consecutive sentences, one paragraph each."""
    return [sentences[i:i + size] for i in range(0, len(sentences), size)]


def documents(source, race_dir, squad_file, glue_dir):
    """The documents (lists of paragraphs) of one of `SOURCES`."""
    if source == "race":
        return list(race_documents(race_dir))
    if source == "squad":
        return list(squad_documents(squad_file))
    if source in ("sst-2", "mrpc"):
        return grouped(glue_sentences(glue_dir, source))
    raise SystemExit(f"unlabelled_text: error: --extra_text {source}: must be one of {', '.join(SOURCES)}")


def write_jsonl(path, docs):
    """Writes `docs` as JSON Lines (atomically); returns the number of documents."""
    lines = [json.dumps({"text": "\n\n".join(d)}, ensure_ascii=False) for d in docs]
    fileio.write_text(path, "\n".join(lines) + "\n")
    return len(lines)
