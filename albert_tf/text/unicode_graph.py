"""The original's text rules as TensorFlow string ops, agreeing with Python's `str` and `unicodedata`.

`preprocess_text_graph` is `tokenization.preprocess_text` and `basic_tokenize_graph` is BERT's
`BasicTokenizer.tokenize`, for a [batch] string tensor, so that tokenization can run inside a graph (the
Keras layer in `albert_tf.text.preprocessor`, exported SavedModels, `tf.data` pipelines).

How exact agreement with the Python tokenizer is obtained:

* Every character class (whitespace, controls, punctuation, CJK, combining marks, non-spacing marks, digits) is
  enumerated from the very predicates the Python code uses, under Python's own Unicode database, and written
  into the regular expressions as explicit code point ranges.
* Lowercasing uses ICU (`tf.strings.lower(..., encoding="utf-8")`, full mappings such as "İ" -> "i̇"), run on the
  NUL-free stretches of the text (the op stops at a NUL), patched for the letters Python's Unicode 14 lowercases
  but TensorFlow's older ICU does not (e.g. U+2C2F), and with capital sigma resolved beforehand to "ς"/"σ" by
  Python's final-sigma rule with Python's case-ignorable/cased properties (ICU's older tables would decide
  differently next to recent combining marks).
* NFD/NFKD use tensorflow-text's ICU, which knows characters assigned after Python's Unicode 14 (e.g. U+1CCD6,
  which ICU decomposes to "A"); those are cut out and kept unnormalised, as Python (which sees unassigned
  characters) leaves them.
* The tables are computed when the layer is first used (about a second) and baked into the graph.
The tests check every code point of the Basic Multilingual Plane (but the large uniform ideograph and hangul
blocks), and the supplementary characters with special handling, in a context with case, sigma, digits and commas.
"""

import functools
import unicodedata

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.text import wordpiece

_MAX_CODE_POINT = 0x10FFFF

# The graph-building code below has no tensor-dependent Python control flow; keeping AutoGraph out of it makes
# tracing (and so exporting) several times faster.
graph_code = tf.autograph.experimental.do_not_convert


# ------------------------------------------------------------------------------------------------------------------
# Character classes, enumerated from the Python predicates.

def _all_chars():
    return (chr(cp) for cp in range(_MAX_CODE_POINT + 1) if not 0xD800 <= cp <= 0xDFFF)


def _is_combining(char):
    return unicodedata.combining(char) != 0


def _is_non_spacing_mark(char):
    return unicodedata.category(char) == "Mn"


def _is_cjk(char):
    return wordpiece.is_chinese_char(ord(char))


_PREDICATES = {
    "python_space": str.isspace,  # what str.split()/str.strip() treat as whitespace (BERT's `is_whitespace` too)
    "python_digit": str.isdigit,  # `piece[-2].isdigit()` in the digit-comma rule
    "combining": _is_combining,  # `unicodedata.combining(c)` in preprocess_text
    "bert_removed": wordpiece.is_removed_in_cleanup,
    "bert_punct": wordpiece.is_punctuation,
    "cjk": _is_cjk,
    "non_spacing_mark": _is_non_spacing_mark,
}


def _to_ranges(cps):
    """Sorted code points -> list of [first, last] runs of consecutive code points."""
    ranges = []
    for cp in cps:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return ranges


def _ranges_class(cps):
    """An RE2 character class matching exactly the sorted code points `cps`."""
    parts = [f"\\x{{{lo:x}}}" if lo == hi else f"\\x{{{lo:x}}}-\\x{{{hi:x}}}" for lo, hi in _to_ranges(cps)]
    return "[" + "".join(parts) + "]"


@functools.lru_cache(maxsize=None)
def code_points(name):
    """Sorted tuple of the code points for which the named predicate (see `_PREDICATES`) holds."""
    predicate = _PREDICATES[name]
    return tuple(ord(c) for c in _all_chars() if predicate(c))


@functools.lru_cache(maxsize=None)
def char_class(name):
    """An RE2 character class (`[...]`) matching exactly `code_points(name)`."""
    return _ranges_class(code_points(name))


@functools.lru_cache(maxsize=None)
def _lowercase_patches():
    """(char, lowercase) for letters that `str.lower` changes but TensorFlow's ICU leaves unchanged."""
    candidates = [c for c in _all_chars() if c != "\x00" and c.lower() != c]
    with tf.init_scope():
        lowered = tf.strings.lower(tf.constant([c.encode("utf-8") for c in candidates]), encoding="utf-8").numpy()
    return tuple((c, c.lower()) for c, low in zip(candidates, lowered) if low.decode("utf-8") == c)


@functools.lru_cache(maxsize=None)
def _sigma_context_ranges():
    """Python's case-ignorable and (not case-ignorable) cased code points, as sorted (starts, ends) range lists.

    `str.lower` maps capital sigma to final sigma after a cased letter (skipping case-ignorable characters) unless
    a cased letter follows (again skipping case-ignorable ones). Python exposes neither property, so both are read
    off `str.lower` itself: c is case-ignorable iff "A" c "Σ" gets a final sigma but "1" c "Σ" does not; a c that
    is not case-ignorable is cased iff "1" c "Σ" gets a final sigma.
    """
    ignorable, cased = [], []
    for char in _all_chars():
        if unicodedata.category(char) in ("Cn", "Co"):
            continue  # unassigned and private-use characters are neither
        after_letter = ("A" + char + "\u03a3").lower()[-1] == "\u03c2"
        after_digit = ("1" + char + "\u03a3").lower()[-1] == "\u03c2"
        if after_letter and not after_digit:
            ignorable.append(ord(char))
        elif after_digit:
            cased.append(ord(char))

    def starts_and_ends(cps):
        ranges = _to_ranges(cps)
        return [r[0] for r in ranges], [r[1] for r in ranges]

    return starts_and_ends(ignorable), starts_and_ends(cased)


@functools.lru_cache(maxsize=None)
def normalization_exceptions(form):
    """Code points that tensorflow-text's ICU changes under `form` ("NFD"/"NFKD") but Python leaves unchanged.

    These are characters assigned after the Unicode version of Python's `unicodedata` (e.g. U+1CCD6, an outlined
    letter from Unicode 16 that ICU decomposes to "A"); Python treats them as unassigned starters.
    """
    candidates = [c for c in _all_chars() if unicodedata.normalize(form, c) == c]
    with tf.init_scope():
        normalized = tf_text.normalize_utf8(tf.constant([c.encode("utf-8") for c in candidates]), form).numpy()
    return tuple(ord(c) for c, n in zip(candidates, normalized) if n.decode("utf-8") != c)


def build_tables(form, lower):
    """Computes (about a second, once per process) every table the ops below bake into a graph for the
    normalization `form` and, with `lower`, for lowercasing, so that tracing is not slowed by them."""
    for name in _PREDICATES:
        char_class(name)
    normalization_exceptions(form)
    if lower:
        _lowercase_patches()
        _sigma_context_ranges()


@graph_code
def normalize_utf8(text, form):
    """`unicodedata.normalize(form, text)` in the graph for a [batch] string tensor.

    ICU does the work; the few characters it knows but Python does not (`normalization_exceptions`) are cut out
    and kept as they are. Python sees them as unassigned starters, so no reordering of combining marks crosses
    them and normalising the stretches between them separately gives Python's result.
    """
    exceptions = normalization_exceptions(form)
    if not exceptions:
        return tf_text.normalize_utf8(text, form)
    protected = _ranges_class(exceptions)

    def normalize_pieces(nul_free):
        pieces = tf_text.regex_split(nul_free, protected, protected)  # (this op would stop at a NUL)
        flat = pieces.flat_values
        flat = tf.where(tf.strings.regex_full_match(flat, protected), flat, tf_text.normalize_utf8(flat, form))
        return tf.strings.reduce_join(pieces.with_flat_values(flat), axis=-1)

    def split_and_normalize():
        return map_nul_free_parts(normalize_pieces, text)

    has_exception = tf.reduce_any(tf.strings.regex_full_match(text, "(?s).*" + protected + ".*"))
    return tf.cond(has_exception, split_and_normalize, lambda: tf_text.normalize_utf8(text, form))


@graph_code
def _in_ranges(values, ranges):
    starts, ends = ranges
    i = tf.searchsorted(tf.constant(starts, tf.int32), values, side="right") - 1
    return (i >= 0) & (values <= tf.gather(tf.constant(ends, tf.int32), tf.maximum(i, 0)))


@graph_code
def _resolve_capital_sigma(text):
    """Replaces each "Σ" by "ς" or "σ" as `str.lower` would, with Python's Unicode properties.

    ICU would otherwise decide with its own (older) notion of case-ignorable characters.
    """
    ignorable_ranges, cased_ranges = _sigma_context_ranges()
    chars = tf.strings.unicode_decode(text, "UTF-8")
    flat = chars.flat_values
    row_ids = chars.value_rowids()
    row_start = tf.gather(chars.row_starts(), row_ids)
    row_limit = tf.gather(chars.row_limits(), row_ids)
    anchor = ~_in_ranges(flat, ignorable_ranges)  # the characters the context scan stops at
    cased = anchor & _in_ranges(flat, cased_ranges)
    anchor_positions = tf.where(anchor)[:, 0]
    num_anchors = tf.size(anchor_positions, out_type=tf.int64)
    anchors_upto = tf.cumsum(tf.cast(anchor, tf.int64))  # anchors at or before each position
    anchors_before = anchors_upto - tf.cast(anchor, tf.int64)
    prev = tf.gather(anchor_positions, tf.maximum(anchors_before - 1, 0))
    prev_cased = (anchors_before > 0) & (prev >= row_start) & tf.gather(cased, prev)
    has_next = anchors_upto < num_anchors
    nxt = tf.gather(anchor_positions, tf.minimum(anchors_upto, tf.maximum(num_anchors - 1, 0)))
    next_cased = has_next & (nxt < row_limit) & tf.gather(cased, tf.where(has_next, nxt, 0))
    is_sigma = tf.equal(flat, 0x3A3)
    final = prev_cased & ~next_cased
    flat = tf.where(is_sigma, tf.where(final, 0x3C2, 0x3C3), flat)
    return tf.strings.unicode_encode(chars.with_flat_values(flat), "UTF-8")


# ------------------------------------------------------------------------------------------------------------------
# String ops shared by both modes.

@graph_code
def drop_invalid_utf8(text):
    """Removes bytes that are not valid UTF-8, as `convert_to_unicode` does with `errors="ignore"`."""
    return tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="ignore")


@graph_code
def map_nul_free_parts(fn, text):
    """Applies `fn` (1-D string tensor -> same shape) to the NUL-free stretches of each string in a [batch] tensor.

    Some string ops (ICU lowercasing, `regex_split`) treat NUL as the end of the string; NUL is an ordinary
    character to Python. The NULs are put back as string data (a string attribute such as `reduce_join`'s
    separator would be cut at a NUL too).
    """
    parts = tf.strings.split(text, sep="\x00")
    mapped = fn(parts.flat_values)
    lengths = parts.row_lengths()
    is_last = tf.ragged.range(lengths) == tf.expand_dims(lengths - 1, -1)
    mapped = tf.strings.join([mapped, tf.where(is_last.flat_values, "", "\x00")])
    return tf.strings.reduce_join(parts.with_flat_values(mapped), axis=-1)


@graph_code
def lower_utf8(text):
    """`str.lower` in the graph (full Unicode case mapping, final sigma included); NUL characters are kept."""
    has_sigma = tf.reduce_any(tf.strings.regex_full_match(text, "(?s).*\u03a3.*"))
    text = tf.cond(has_sigma, lambda: _resolve_capital_sigma(text), lambda: tf.identity(text))
    text = map_nul_free_parts(lambda parts: tf.strings.lower(parts, encoding="utf-8"), text)
    for char, low in _lowercase_patches():
        text = tf.strings.regex_replace(text, f"\\x{{{ord(char):x}}}", low)
    return text


@graph_code
def preprocess_text_graph(text, lower=False, map_latex_quotes=False):
    """In-graph `tokenization.preprocess_text(text, lower=lower, map_latex_quotes=...)` for a [batch] string
    tensor."""
    text = drop_invalid_utf8(text)
    text = tf.strings.regex_replace(text, char_class("python_space") + "+", " ")
    text = tf.strings.regex_replace(text, "^ | $", "")
    if map_latex_quotes:
        text = tf.strings.regex_replace(text, "``|''", '"')
    text = normalize_utf8(text, "NFKD")
    text = tf.strings.regex_replace(text, char_class("combining") + "+", "")
    if lower:
        text = lower_utf8(text)
    return text


@graph_code
def basic_tokenize_graph(text, do_lower_case=True):
    """In-graph `wordpiece.BasicTokenizer(do_lower_case).tokenize` for a [batch] string tensor -> ragged words."""
    text = drop_invalid_utf8(text)
    text = tf.strings.regex_replace(text, char_class("bert_removed"), "")
    text = tf.strings.regex_replace(text, "(" + char_class("cjk") + ")", " \\1 ")
    if do_lower_case:
        text = lower_utf8(text)
        text = normalize_utf8(text, "NFD")
        text = tf.strings.regex_replace(text, char_class("non_spacing_mark"), "")
    text = tf.strings.regex_replace(text, "(" + char_class("bert_punct") + ")", " \\1 ")
    text = tf.strings.regex_replace(text, char_class("python_space") + "+", " ")  # BERT's whitespace is Python's
    return tf.strings.split(text)
