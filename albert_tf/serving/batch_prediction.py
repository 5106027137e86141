"""Run an exported SavedModel on a text file, for users who hold only the export (`predict.py` is the CLI).

Two kinds of export answer text:
  * a model with string-input signatures (the classifier's `text` / `text_pair`, SQuAD's `text` export with
    `question` / `context`): each example's text(s) go straight in;
  * a preprocessing export (`export_model.py --export_type=preprocessing`) paired with an encoder export: the
    preprocessing model turns the text(s) into ids and the encoder gives `pooled_output` (one embedding per example;
    `sequence_output` on request).

The input file holds one example per line, or two tab-separated columns for text pairs (`text_columns` picks columns
out of a wider TSV, e.g. GLUE files; `skip_header` drops a header row). Examples run in batches; progress is logged;
each result is written as one JSON object per line: `index`, the text(s), and the model's outputs as lists.

`albert_tf.serving.rest.ServingSession` answers TF Serving REST bodies against an export, for checking a request
before deploying.

Only `tensorflow` and `tensorflow_text` (for the text signatures' ops) are needed to run an export.
"""

import contextlib
import io
import json
import logging
import os
import sys
import time

import numpy as np
import tensorflow as tf

from albert_tf import fileio
from albert_tf.errors import AlbertError
from albert_tf.serving.loading import load_saved_model, require_saved_model
from albert_tf.serving.savedmodel import refusal

with contextlib.suppress(ImportError):  # registers the ops of the in-graph tokenizer; models on ids need only TF
    import tensorflow_text  # noqa: F401  pylint: disable=unused-import


class PredictError(AlbertError):
    """The export or the input file cannot be used as asked; the message says why."""


class InputRefused(PredictError):
    """The export's own checks refused an input (a sequence longer than the model takes, an id outside the
    vocabulary); the message is the check's."""


# ------------------------------------------------------------------------------------------------------------------
# Reading examples.

def decode_text(data, name):
    """`data` (bytes) as UTF-8 text (a byte-order mark dropped); a byte that is not UTF-8 is a PredictError naming
    `name` (the file) and the line and column of the byte (a line ends at "\\n", "\\r\\n" or "\\r")."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        # Line ends are ASCII, never part of a UTF-8 sequence: the text before the bad byte decodes, and its
        # lines are the lines before the bad byte's (the last one unfinished, unless it ends at a line end).
        done = io.StringIO(data[:err.start].decode("utf-8"), newline="").readlines() or [""]
        if done[-1].endswith(("\n", "\r")):
            done.append("")
        number, column = len(done), len(done[-1]) + 1
        raise PredictError(f"{name}:{number}: not UTF-8 text (byte 0x{data[err.start]:02x} at column {column}: "
                           f"{err.reason})") from None


def read_text(path):
    """The text of a UTF-8 file (see `decode_text`)."""
    with open(path, "rb") as f:
        return decode_text(f.read(), path)


def _decoded_lines(path):
    """The lines of a UTF-8 text file, without their line ends (see `decode_text`)."""
    return [line.rstrip("\r\n") for line in io.StringIO(read_text(path), newline="")]


def read_numbered_examples(path, text_columns=None, skip_header=False, delimiter="\t"):
    """(examples, line numbers) of a text file: see `read_examples`; `line numbers[i]` is the line of
    `examples[i]` in the file (from 1)."""
    if not os.path.isfile(path):
        raise PredictError(f"input file not found: {path}")
    examples, numbers, widths = [], [], set()
    for number, line in enumerate(_decoded_lines(path), start=1):
        if skip_header and number == 1:
            continue
        if not line.strip():
            continue
        columns = line.split(delimiter)
        if text_columns is not None:
            if max(text_columns) >= len(columns):
                raise PredictError(f"{path}:{number}: has {len(columns)} column(s), column "
                                   f"{max(text_columns)} was asked for")
            columns = [columns[i] for i in text_columns]
        elif len(columns) > 2:
            raise PredictError(f"{path}:{number}: has {len(columns)} tab-separated columns; give one text per "
                               "line, two for pairs, or choose the columns (--text_columns)")
        widths.add(len(columns))
        examples.append(tuple(columns))
        numbers.append(number)
    if len(widths) > 1:
        raise PredictError(f"{path}: lines have different numbers of columns ({sorted(widths)}); give one text per "
                           "line, or two tab-separated texts per line for pairs")
    if not examples:
        raise PredictError(f"{path}: no examples")
    if len(examples[0]) not in (1, 2):
        raise PredictError(f"{path}: {len(examples[0])} text columns; 1 (texts) or 2 (pairs) are supported")
    return examples, numbers


def read_examples(path, text_columns=None, skip_header=False, delimiter="\t"):
    """Examples of a UTF-8 text file as a list of tuples of one or two strings.

    Without `text_columns`, every non-empty line must have the same number of columns, one (single texts) or two
    (pairs); with it (e.g. `[0]` or `[3, 4]`), those columns are taken from each line. Empty lines are skipped. A
    line that is not UTF-8 is refused, naming the file and line.
    """
    return read_numbered_examples(path, text_columns, skip_header, delimiter)[0]


# ------------------------------------------------------------------------------------------------------------------
# Finding the signatures.

_PAIR_ORDERS = (("text_a", "text_b"), ("question", "context"), ("sentence1", "sentence2"))
_PREFERRED = {1: ("text", "serving_default"), 2: ("text_pair", "encode_pair", "serving_default")}


def _inputs(fn):
    return fn.structured_input_signature[1]


def _ordered_names(name, fn, pair_inputs=None):
    """The input names of the signature `name` in the order of the file's text columns. A SavedModel keeps no order
    of a signature's inputs, so a pair is read in a known order (`_PAIR_ORDERS`) or the one `pair_inputs` gives."""
    names = set(_inputs(fn))
    if len(names) == 1:
        return list(names)
    if pair_inputs:
        if set(pair_inputs) != names:
            raise PredictError(f"--pair_inputs {','.join(pair_inputs)}: the signature {name} takes "
                               f"{', '.join(sorted(names))}")
        return list(pair_inputs)
    for order in _PAIR_ORDERS:
        if set(order) == names:
            return list(order)
    raise PredictError(f"the signature {name} takes {', '.join(sorted(names))}, in no order known here (a SavedModel "
                       "keeps none); name the input of the first text column first with --pair_inputs, e.g. "
                       f"--pair_inputs={','.join(sorted(names))}")


def string_signature(loaded, num_texts, pair_inputs=None):
    """(name, function, ordered input names) of `loaded`'s signature taking `num_texts` string tensors [batch];
    `pair_inputs`: a pair signature's input names in the order of the texts (see `_ordered_names`)."""
    candidates = {}
    for name, fn in loaded.signatures.items():
        specs = _inputs(fn)
        if len(specs) == num_texts and all(s.dtype == tf.string and s.shape.rank == 1 for s in specs.values()):
            candidates[name] = fn
    if not candidates:
        described = "; ".join(f"{name}({', '.join(f'{k}: {s.dtype.name}' for k, s in sorted(_inputs(fn).items()))})"
                              for name, fn in sorted(loaded.signatures.items()))
        kind = "one text per example" if num_texts == 1 else "text pairs"
        raise PredictError(f"the export has no signature taking {kind} as {num_texts} string tensor(s); it has: "
                           f"{described}")
    name = next((n for n in _PREFERRED[num_texts] if n in candidates), sorted(candidates)[0])
    return name, candidates[name], _ordered_names(name, candidates[name], pair_inputs)


def to_json(value):
    if isinstance(value, np.ndarray):
        if value.dtype.kind in ("S", "O"):
            return [to_json(v) for v in value.tolist()] if value.ndim else to_json(value.item())
        return value.tolist()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list):
        return [to_json(v) for v in value]
    if isinstance(value, (np.generic,)):
        return value.item()
    return value


class Predictor:
    """Runs an export on batches of texts: `predict(texts_a, texts_b=None)` -> {output: array [batch, ...]}.

    Args:
      export_dir: a SavedModel with string-input signatures, or a preprocessing export (with `encoder_dir`).
      encoder_dir: an encoder export to run on the preprocessing export's ids.
      outputs: output names to keep (default: all of a text model; `pooled_output` of an encoder).
      pair_inputs: a pair signature's two input names in the order of the texts, where they are none of the known
        pairs (text_a/text_b, question/context, sentence1/sentence2).
    """

    def __init__(self, export_dir, encoder_dir=None, outputs=None, pair_inputs=None):
        for path in (export_dir, encoder_dir):  # both named before either is loaded
            if path:
                require_saved_model(path, PredictError)
        self.model = load_saved_model(export_dir, PredictError)
        self.encoder = load_saved_model(encoder_dir, PredictError) if encoder_dir else None
        self.outputs = list(outputs) if outputs else None
        self.pair_inputs = list(pair_inputs) if pair_inputs else None
        if self.encoder is not None:
            if "serving_default" not in self.encoder.signatures:
                raise PredictError(f"{encoder_dir} has no serving_default signature")
            specs = _inputs(self.encoder.signatures["serving_default"])
            if set(specs) != {"input_ids", "input_mask", "segment_ids"}:
                raise PredictError(f"{encoder_dir}'s serving_default takes {', '.join(sorted(specs))}, not the ids "
                                   "input_ids, input_mask, segment_ids of an encoder export")
            if self.outputs is None:
                self.outputs = ["pooled_output"]

    def signature_for(self, num_texts):
        return string_signature(self.model, num_texts, self.pair_inputs)

    def predict(self, texts_a, texts_b=None):
        num_texts = 1 if texts_b is None else 2
        _, fn, names = self.signature_for(num_texts)
        columns = [texts_a] if texts_b is None else [texts_a, texts_b]
        inputs = {name: tf.constant([t.encode("utf-8") if isinstance(t, str) else t for t in column], tf.string)
                  for name, column in zip(names, columns)}
        try:
            result = fn(**inputs)
            if self.encoder is not None:
                ids = {k: result[k] for k in ("input_ids", "input_mask", "segment_ids")}
                result = self.encoder.signatures["serving_default"](**ids)
        except tf.errors.InvalidArgumentError as err:  # the export's own checks: length, vocabulary
            raise InputRefused(refusal(err)) from None
        keep = self.outputs or sorted(result)
        unknown = [k for k in keep if k not in result]
        if unknown:
            raise PredictError(f"unknown output(s) {', '.join(unknown)}; the model gives {', '.join(sorted(result))}")
        return {k: result[k].numpy() for k in keep}


def _refused_example(predictor, batch, line_numbers, input_file, where, refused):
    """The `PredictError` naming the file and line of the example of `batch` that the export refused (`refused`,
    its InputRefused): each example is run alone to find it. When even an empty text is refused, the export
    refuses every input (e.g. a preprocessing export whose rows are longer than the encoder takes), and the
    error says so instead of blaming a line."""
    def run(example):
        predictor.predict([example[0]], [example[1]] if len(example) == 2 else None)

    for example, number in zip(batch, line_numbers):
        try:
            run(example)
        except InputRefused as err:
            try:
                run(("",) * len(example))
            except InputRefused:
                return PredictError(f"{where} refuses every input, even an empty text: {err}")
            return PredictError(f"{input_file}:{number}: {err}")
    return PredictError(f"{input_file}:{line_numbers[0]}-{line_numbers[-1]}: {refused}")


def predict_file(export_dir, input_file, output_file, encoder_dir=None, batch_size=32, text_columns=None,
                 skip_header=False, outputs=None, log_every_seconds=5.0, progress=None, pair_inputs=None):
    """Runs the export on every example of `input_file` and writes JSON lines to `output_file` ("-" = stdout).

    Returns {"examples", "seconds", "examples_per_second", "signature", "output_file"}. `progress(done, total)`
    is called after each batch (default: a log line at most every `log_every_seconds`). `pair_inputs`: see
    `Predictor`.
    """
    if batch_size < 1:
        raise PredictError(f"batch_size must be at least 1, got {batch_size}")
    examples, line_numbers = read_numbered_examples(input_file, text_columns=text_columns, skip_header=skip_header)
    predictor = Predictor(export_dir, encoder_dir=encoder_dir, outputs=outputs, pair_inputs=pair_inputs)
    num_texts = len(examples[0])
    signature, _, names = predictor.signature_for(num_texts)
    text_keys = ["text"] if num_texts == 1 else names
    total = len(examples)
    logging.info("Predicting %d examples with signature %r of %s%s, batch size %d", total, signature, export_dir,
                 f" and the encoder {encoder_dir}" if encoder_dir else "", batch_size)
    start = last_log = time.time()

    def default_progress(done, count):
        nonlocal last_log
        now = time.time()
        if done == count or now - last_log >= log_every_seconds:
            last_log = now
            rate = done / max(now - start, 1e-9)
            logging.info("predicted %d/%d examples (%.0f%%, %.1f examples/s)", done, count, 100.0 * done / count,
                         rate)

    progress = progress or default_progress
    with contextlib.ExitStack() as stack:
        out = sys.stdout if output_file == "-" else stack.enter_context(
            fileio.atomic_write(output_file, what=f"--output_file {output_file}"))
        for begin in range(0, total, batch_size):
            batch = examples[begin:begin + batch_size]
            texts_a = [e[0] for e in batch]
            texts_b = [e[1] for e in batch] if num_texts == 2 else None
            try:
                result = predictor.predict(texts_a, texts_b)
            except InputRefused as err:
                where = f"{export_dir}" + (f" with the encoder {encoder_dir}" if encoder_dir else "")
                raise _refused_example(predictor, batch, line_numbers[begin:begin + batch_size], input_file, where,
                                       err) from None
            for i, example in enumerate(batch):
                record = {"index": begin + i}
                record.update(zip(text_keys, example))
                for name, value in result.items():
                    record[name] = to_json(value[i])
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
            progress(min(begin + batch_size, total), total)
        out.flush()
    seconds = time.time() - start
    return {"examples": total, "seconds": seconds, "examples_per_second": total / max(seconds, 1e-9),
            "signature": signature, "output_file": output_file}
