"""Paragraphs into sentences: Bling Fire's sentence breaker, after a split at Chinese and Japanese sentence-final
punctuation (。！？ and the closing quotes or brackets after them).

Bling Fire was chosen by `python -m bench.bench_pretraining_data sentence_split` (docs/corpus.md, "Sentence
splitting"): it is a compiled finite-state machine that needs no model download, about as accurate as pysbd on the
hand-checked sample and about 100 times faster. Its native library is built for x86-64 only; elsewhere
`splitter("pysbd")` (pure Python, slow) does the same job.
"""

import re

from albert_tf.errors import UsageError

# A CJK sentence ends at ideographic or fullwidth final punctuation, with any closing quotes or brackets after it.
_CJK_END = re.compile(r"[。！？｡]+[」』”’）》〉】〕\"')\]]*")
# Bling Fire is only asked about pieces that hold a Latin sentence end.
_LATIN_END = re.compile(r"[.!?]")

SPLITTERS = ("blingfire", "pysbd")
_breakers = {}


def _bling_fire():
    if "blingfire" not in _breakers:
        try:
            import blingfire  # pylint: disable=import-outside-toplevel
        except (ImportError, OSError) as err:  # OSError: its native library does not load on this platform
            raise UsageError(f"the sentence splitter Bling Fire is not available ({err}); install it with "
                             "`pip install blingfire==0.1.8` (see requirements.txt), or use "
                             "--sentence_splitter=pysbd") from None
        _breakers["blingfire"] = blingfire.text_to_sentences
    return _breakers["blingfire"]


def _pysbd():
    if "pysbd" not in _breakers:
        try:
            import pysbd  # pylint: disable=import-outside-toplevel
        except ImportError as err:
            raise UsageError(f"--sentence_splitter=pysbd: pysbd is not installed ({err}); "
                             "`pip install pysbd==0.3.4`") from None
        _breakers["pysbd"] = pysbd.Segmenter(language="en", clean=False).segment
    return _breakers["pysbd"]


def cjk_pieces(text):
    """`text` cut after each CJK sentence end (see the module docstring); the pieces keep their characters."""
    pieces, start = [], 0
    for match in _CJK_END.finditer(text):
        if match.end() < len(text):
            pieces.append(text[start:match.end()])
            start = match.end()
    pieces.append(text[start:])
    return pieces


def split_with(paragraph, breaker):
    """The sentences of one paragraph: CJK pieces (`cjk_pieces`), those holding a Latin sentence end split by
    `breaker` (text -> list of sentences); stripped, none empty."""
    sentences = []
    for piece in cjk_pieces(paragraph) if _CJK_END.search(paragraph) else (paragraph,):
        if _LATIN_END.search(piece):
            sentences.extend(breaker(piece))
        else:
            sentences.append(piece)
    return [s for s in (s.strip() for s in sentences) if s]


def bling_fire_sentences(text):
    """Bling Fire's sentences of `text` (no CJK rule)."""
    return _bling_fire()(text).split("\n")


def split_sentences(paragraph):
    """The sentences of one paragraph (a string without line breaks), stripped, none empty."""
    return split_with(paragraph, bling_fire_sentences)


def splitter(name="blingfire"):
    """paragraph -> sentences with the named library behind the CJK rule (loaded now, so a missing one fails
    before any work)."""
    if name == "blingfire":
        _bling_fire()
        return split_sentences
    if name == "pysbd":
        breaker = _pysbd()
        return lambda paragraph: split_with(paragraph, breaker)
    raise UsageError(f"--sentence_splitter={name}: must be one of {', '.join(SPLITTERS)}")
