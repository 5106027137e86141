"""Builds `data/corpus/`: public-domain book excerpts in the pretraining input format.

The input format of `create_pretraining_data.py` (as the original's) is one sentence per line with a blank line
between documents. This tool converts NLTK's Project Gutenberg selection (`../shared/data/corpus/gutenberg/`, public
domain in the US; see `../shared/data/PROVENANCE.md`) into that format:

* paragraphs are blocks of non-blank lines; their hard line breaks are joined with spaces;
* headings (``CHAPTER I``, ``Chapter 1``, ``I. A DISCUSSION ...``, ``VOLUME I``, bracketed title lines) are dropped
  and end the current document, so each chapter starts a new one;
* within a chapter, every `--paragraphs_per_document` paragraphs make a document, so a book gives many documents
  (sentence-order prediction needs several sentences per document, random-document B needs many documents);
* paragraphs are split into sentences with a small rule-based splitter (after . ! ? and any closing quotes or
  brackets, before an upper-case letter or an opening quote; not after common abbreviations like "Mr."), which
  is what `data/corpus/` was built with; `--sentence_splitter=blingfire` uses `prepare_corpus.py`'s splitter
  (`albert_tf.data.corpus.sentences`) instead;
* each book is cut after the first document that brings its output to `--bytes_per_book` bytes.

Paragraphs are normalised, documents formatted and files written (atomically) by the library behind
`prepare_corpus.py` (`albert_tf.data.corpus`, `albert_tf.fileio`); what is Gutenberg-specific stays here: the
Latin-1 fallback, headings, chapters and the cut per book. General corpora need no tool: `prepare_corpus.py`
(docs/corpus.md) converts text and JSON Lines files. The output is deterministic (no randomness, sorted inputs). Each book becomes `gutenberg-<name>.txt`; the default
selection (six prose books, about 80 kB each) gives about 490 kB in 164 documents. With `--bytes_per_book 0` whole
books are converted (the benchmark uses that on a temporary directory).

Usage:
  python tools/make_shipped_corpus.py [--source ../shared/data/corpus/gutenberg] [--output data/corpus]
"""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from albert_tf import fileio  # noqa: E402  pylint: disable=wrong-import-position
from albert_tf.data.corpus import cleaning, sentences, writer  # noqa: E402  pylint: disable=wrong-import-position

DEFAULT_BOOKS = (
    "austen-emma",
    "austen-persuasion",
    "chesterton-ball",
    "chesterton-brown",
    "chesterton-thursday",
    "melville-moby_dick",
)
# Where the narrative begins, for books with front matter (Moby Dick's etymology and extracts).
START_MARKERS = {"melville-moby_dick": re.compile(r"^CHAPTER 1\b")}

ABBREVIATIONS = frozenset(
    "mr mrs ms dr st sr jr mt messrs mme mlle rev col capt gen lieut sgt prof esq vol ch no viz etc vs i.e e.g".split())

_HEADING = re.compile(
    r"^(\[.*\]|(CHAPTER|Chapter|BOOK|Book|VOLUME|Volume|PART|Part)\b.*|[IVXLC]+\.?(\s.*)?|[0-9]+\.?|[^a-z]+)$")
# A sentence ends at . ! or ? (possibly several), then optional closing quotes/brackets, then whitespace, then a
# capital letter, a digit or an opening quote/bracket.
_SENTENCE_END = re.compile(r"([.!?]+[\"')\]]*)\s+(?=[\"'(\[]?[A-Z0-9])")


def read_text(path):
    """The file's text with "\\n" line ends; UTF-8, or Latin-1 where it is not valid UTF-8."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def paragraphs(text):
    """Blocks of non-blank lines, each joined into one line with single spaces (`cleaning.normalize`)."""
    out, block = [], []
    for line in text.split("\n"):
        if line.strip():
            block.append(line)
        elif block:
            out.append(cleaning.normalize("\n".join(block)))
            block = []
    if block:
        out.append(cleaning.normalize("\n".join(block)))
    return out


def is_heading(paragraph):
    """Short paragraphs that are chapter/part titles, numbers, or written in capitals."""
    return len(paragraph) <= 80 and bool(_HEADING.match(paragraph))


def split_sentences(paragraph):
    """Sentences of one paragraph (rule-based; see the module docstring)."""
    sentences, start = [], 0
    for match in _SENTENCE_END.finditer(paragraph):
        end = match.end(1)
        words = paragraph[start:match.start(1) + 1].split()
        last = words[-1].lower().rstrip(".!?").lstrip("\"'([") if words else ""
        if last in ABBREVIATIONS or (len(last) == 1 and last.isalpha() and paragraph[match.start(1)] == "."):
            continue  # "Mr. Knightley", "G. K. Chesterton"
        sentences.append(paragraph[start:end].strip())
        start = match.end()
    tail = paragraph[start:].strip()
    if tail:
        sentences.append(tail)
    return [s for s in sentences if s]


def book_documents(text, paragraphs_per_document, start_marker=None, splitter=split_sentences):
    """Documents (lists of sentences) of one book."""
    paras = paragraphs(text)
    if start_marker is not None:
        for i, para in enumerate(paras):
            if start_marker.match(para):
                paras = paras[i:]
                break
    documents, current, count = [], [], 0
    for para in paras:
        if is_heading(para):
            if current:
                documents.append(current)
            current, count = [], 0
            continue
        current.extend(splitter(para))
        count += 1
        if count >= paragraphs_per_document:
            documents.append(current)
            current, count = [], 0
    if current:
        documents.append(current)
    return documents


SPLITTERS = {"rules": split_sentences, "blingfire": sentences.split_sentences}


def convert_book(path, paragraphs_per_document=8, bytes_per_book=80_000, start_marker=None, splitter="rules"):
    """The book at `path` in the input format (str), cut after `bytes_per_book` bytes (0: whole book)."""
    chunks, size = [], 0
    for document in book_documents(read_text(path), paragraphs_per_document, start_marker, SPLITTERS[splitter]):
        chunk = writer.format_document(document)
        chunks.append(chunk)
        size += len(chunk.encode("utf-8")) + 1
        if bytes_per_book and size >= bytes_per_book:
            break
    return "\n".join(chunks)


def prepare(source, output, books=DEFAULT_BOOKS, paragraphs_per_document=8, bytes_per_book=80_000,
            splitter="rules"):
    """Writes `gutenberg-<book>.txt` for each book into `output` (atomically); returns the paths written."""
    written = []
    for book in sorted(books):
        text = convert_book(os.path.join(source, book + ".txt"), paragraphs_per_document, bytes_per_book,
                            START_MARKERS.get(book), splitter)
        path = os.path.join(output, f"gutenberg-{book}.txt")
        fileio.write_text(path, text)
        written.append(path)
    return written


def main(argv=None):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=os.path.join(root, "..", "shared", "data", "corpus", "gutenberg"))
    parser.add_argument("--output", default=os.path.join(root, "data", "corpus"))
    parser.add_argument("--books", default=",".join(DEFAULT_BOOKS), help="comma-separated book names")
    parser.add_argument("--paragraphs_per_document", type=int, default=8)
    parser.add_argument("--bytes_per_book", type=int, default=80_000, help="0 converts whole books")
    parser.add_argument("--sentence_splitter", choices=sorted(SPLITTERS), default="rules",
                        help="rules: the rule-based splitter data/corpus/ was built with; blingfire: prepare_corpus.py's")
    args = parser.parse_args(argv)
    paths = prepare(args.source, args.output, [b for b in args.books.split(",") if b], args.paragraphs_per_document,
                    args.bytes_per_book, args.sentence_splitter)
    for path in paths:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        docs = [d for d in text.split("\n\n") if d.strip()]
        print(f"{path}: {len(text.encode('utf-8'))} bytes, {len(docs)} documents, "
              f"{sum(len(d.splitlines()) for d in docs)} sentences")
    return 0


if __name__ == "__main__":
    sys.exit(main())
