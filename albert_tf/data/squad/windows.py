"""Cutting each question and its context into the original's windows (`convert_examples_to_features`, as the
original's `squad_utils`):

* the context's pieces are aligned to its characters (`alignment.align_context`), so each piece has a first and a
  last raw character;
* `[CLS] question [SEP] context-window [SEP]`, the question cut to its first `max_query_length` pieces, windows of at
  most `max_seq_length - len(question) - 3` context pieces, each starting `doc_stride` pieces after the previous one;
* `p_mask` 1 on positions that cannot hold an answer (question, [SEP], padding), 0 on [CLS] and the context;
* each context piece is flagged in the window where it has the most context on its shorter side ("max context");
* training windows that do not contain the whole answer, and impossible (v2.0) questions, point at [CLS]
  (start = end = 0, `is_impossible` = 1), as the original does for both versions.
"""

import collections
import dataclasses
import logging

from albert_tf.data.squad.alignment import AlignmentError, align_context
from albert_tf.errors import UsageError

UNIQUE_ID_START = 1000000000
ALIGNMENT_CACHE_SIZE = 4096  # contexts whose alignment is kept (training examples are shuffled)


@dataclasses.dataclass
class InputFeatures:
    """One window of one example, with the original's fields.

    `token_is_max_context` maps a position in the window to whether the window is the piece's max-context window;
    `tok_start_to_orig_index`/`tok_end_to_orig_index` give each context piece of the window its raw characters;
    `doc_offset` is the position of the window's first context piece (len(question) + 2); `paragraph_len` is the
    number of real tokens (the original's name). `start_position`/`end_position`/`is_impossible` are set for training.
    """

    unique_id: int
    example_index: int
    doc_span_index: int
    tok_start_to_orig_index: list
    tok_end_to_orig_index: list
    token_is_max_context: dict
    input_ids: list
    input_mask: list
    segment_ids: list
    p_mask: list
    paragraph_len: int
    doc_offset: int
    start_position: int = None
    end_position: int = None
    is_impossible: bool = False


@dataclasses.dataclass
class ConversionStats:
    """What `convert_examples_to_features` did.

    Attributes:
      examples, features: counts in and out; positive / negative: training windows with and without the answer.
      truncated_questions: ids of questions longer than max_query_length pieces (cut to their first pieces).
      alignment_failures: ids whose context could not be aligned to its pieces (training: skipped; prediction: the
        question gets no window and is answered "").
      wide_alignments: ids whose context needed the full-width programme (the original would drop them).
    """

    examples: int = 0
    features: int = 0
    positive: int = 0
    negative: int = 0
    truncated_questions: list = dataclasses.field(default_factory=list)
    alignment_failures: list = dataclasses.field(default_factory=list)
    wide_alignments: list = dataclasses.field(default_factory=list)


def check_lengths(max_seq_length, max_query_length, doc_stride=1):
    """Raises ValueError unless the settings leave room for context pieces (as the original's flag check)."""
    if max_seq_length <= max_query_length + 3:
        raise UsageError(f"max_seq_length ({max_seq_length}) must be greater than max_query_length "
                         f"({max_query_length}) + 3: [CLS] question [SEP] context [SEP] would leave no room for the "
                         "context")
    if doc_stride < 1:
        raise UsageError(f"doc_stride must be at least 1, got {doc_stride}")


def doc_spans_for(num_tokens, max_tokens_for_doc, doc_stride):
    """(start, length) of each window over `num_tokens` context pieces, as the original's sliding windows."""
    spans, start = [], 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens_for_doc)
        spans.append((start, length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    return spans


def max_context_owners(doc_spans, num_tokens):
    """For each context piece, the index of the window where it has the max context (`is_max_context` for all
    pieces at once: the first window with the highest score wins)."""
    best_score = [None] * num_tokens
    owner = [None] * num_tokens
    for index, (start, length) in enumerate(doc_spans):
        end = start + length - 1
        bonus = 0.01 * length
        for position in range(start, end + 1):
            score = min(position - start, end - position) + bonus
            if best_score[position] is None or score > best_score[position]:
                best_score[position], owner[position] = score, index
    return owner


def is_max_context(doc_spans, span_index, position):
    """Whether window `span_index` gives piece `position` its largest min(left, right) context (+ 0.01 x length)."""
    best_score, best_index = None, None
    for index, (start, length) in enumerate(doc_spans):
        end = start + length - 1
        if position < start or position > end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return span_index == best_index


def require_sentencepiece(tokenizer):
    """Raises `UsageError` unless `tokenizer` is a SentencePiece one (the answers are found by aligning its pieces)."""
    if getattr(tokenizer, "sp_model", None) is None:
        raise UsageError("SQuAD features need a SentencePiece tokenizer (spm_model_file): the answer spans are found "
                         "by aligning SentencePiece pieces to the context characters. WordPiece vocabularies "
                         "(vocab_file only) are not supported for SQuAD, as in the original release.")


def convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training,
                                 output_fn=None, stats=None, log_every=1000, alignment_cache=None):
    """Builds the windows of each example (see this module's docstring).

    Args:
      examples: `SquadExample`s (read with `is_training` for training).
      tokenizer: a SentencePiece `tokenization.FullTokenizer`; its `do_lower_case` is used.
      max_seq_length, doc_stride, max_query_length: the original's flags.
      is_training: set `start_position`/`end_position`/`is_impossible` on the windows.
      output_fn: called with each `InputFeatures`; if None, the features are returned as a list.
      stats: an optional `ConversionStats` filled in place.
      log_every: a progress line every this many examples (0: none).
      alignment_cache: an optional dict {context: `ContextAlignment`} to share alignments between calls (by
        default the last `ALIGNMENT_CACHE_SIZE` contexts are kept during the call).
    Returns:
      the list of features when `output_fn` is None, else the number of features.
    """
    require_sentencepiece(tokenizer)
    check_lengths(max_seq_length, max_query_length, doc_stride)
    stats = stats if stats is not None else ConversionStats()
    collected = [] if output_fn is None else None
    emit = collected.append if output_fn is None else output_fn
    do_lower_case = tokenizer.do_lower_case
    cls_id, sep_id = tokenizer.token_id("[CLS]"), tokenizer.token_id("[SEP]")
    alignments, char_cache = collections.OrderedDict(), {}
    if alignment_cache is not None:
        alignments = alignment_cache
    unique_id = UNIQUE_ID_START
    for example_index, example in enumerate(examples):
        if log_every and example_index % log_every == 0:
            logging.info("Converting %d/%d (windows: %d with the answer, %d without)", example_index, len(examples),
                         stats.positive, stats.negative)
        stats.examples += 1
        query_ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(example.question_text))
        if len(query_ids) > max_query_length:
            stats.truncated_questions.append(example.qas_id)
            query_ids = query_ids[:max_query_length]

        alignment = alignments.get(example.paragraph_text)
        if alignment is None:
            try:
                alignment = align_context(example.paragraph_text, tokenizer.tokenize(example.paragraph_text),
                                          do_lower_case, char_cache)
            except AlignmentError as err:
                alignment = err
            alignments[example.paragraph_text] = alignment
            if alignment_cache is None and len(alignments) > ALIGNMENT_CACHE_SIZE:
                alignments.popitem(last=False)
        elif alignment_cache is None:
            alignments.move_to_end(example.paragraph_text)
        if isinstance(alignment, AlignmentError):
            stats.alignment_failures.append(example.qas_id)
            logging.warning("Question %s: %s; %s", example.qas_id, alignment,
                            "skipped for training" if is_training else "it is answered \"\"")
            continue
        if alignment.band_width is None:
            stats.alignment_failures.append(example.qas_id)
            logging.warning("Question %s: only %d of %d context characters align to the pieces", example.qas_id,
                            alignment.matched, len(example.paragraph_text))
            if is_training:
                continue
        elif alignment.full_width:
            stats.wide_alignments.append(example.qas_id)

        answer = None  # the answer's first and last piece, for a training question that has one
        if is_training and not example.is_impossible:
            answer = alignment.token_span(example.start_position, example.end_position)

        if alignment.piece_ids is None:
            alignment.piece_ids = tokenizer.convert_tokens_to_ids(alignment.pieces)
        doc_ids = alignment.piece_ids
        max_tokens_for_doc = max_seq_length - len(query_ids) - 3
        doc_spans = doc_spans_for(len(doc_ids), max_tokens_for_doc, doc_stride)
        owners = max_context_owners(doc_spans, len(doc_ids))
        doc_offset = len(query_ids) + 2
        for span_index, (span_start, span_length) in enumerate(doc_spans):
            input_ids = [cls_id] + query_ids + [sep_id] + doc_ids[span_start:span_start + span_length]
            p_mask = [0] + [1] * (len(query_ids) + 1) + [0] * span_length
            token_is_max_context = {doc_offset + k: owners[span_start + k] == span_index
                                    for k in range(span_length)}
            input_ids.append(sep_id)
            p_mask.append(1)
            segment_ids = [0] * doc_offset + [1] * (span_length + 1)
            paragraph_len = len(input_ids)
            input_mask = [1] * paragraph_len
            padding = max_seq_length - paragraph_len
            input_ids += [0] * padding
            input_mask += [0] * padding
            segment_ids += [0] * padding
            p_mask += [1] * padding

            start_position = end_position = None
            span_is_impossible = bool(example.is_impossible) if is_training else False
            if answer is not None:
                first, last = answer
                if span_start <= first and last <= span_start + span_length - 1:
                    start_position = first - span_start + doc_offset
                    end_position = last - span_start + doc_offset
                else:
                    span_is_impossible = True
            if is_training and span_is_impossible:
                start_position = end_position = 0

            emit(InputFeatures(
                unique_id=unique_id, example_index=example_index, doc_span_index=span_index,
                tok_start_to_orig_index=alignment.tok_start_to_orig_index[span_start:span_start + span_length],
                tok_end_to_orig_index=alignment.tok_end_to_orig_index[span_start:span_start + span_length],
                token_is_max_context=token_is_max_context, input_ids=input_ids, input_mask=input_mask,
                segment_ids=segment_ids, p_mask=p_mask, paragraph_len=paragraph_len, doc_offset=doc_offset,
                start_position=start_position, end_position=end_position, is_impossible=span_is_impossible))
            unique_id += 1
            stats.features += 1
            if span_is_impossible:
                stats.negative += 1
            else:
                stats.positive += 1
    if stats.truncated_questions:
        logging.warning("%d question(s) are longer than max_query_length=%d pieces and were cut to their first %d "
                        "pieces (e.g. %s); their contexts are kept whole", len(stats.truncated_questions),
                        max_query_length, max_query_length, ", ".join(stats.truncated_questions[:3]))
    if stats.alignment_failures:
        logging.warning("%d question(s) whose context could not be aligned: %s", len(stats.alignment_failures),
                        ", ".join(stats.alignment_failures[:10]))
    logging.info("%d examples -> %d windows (%d with the answer, %d without)", stats.examples, stats.features,
                 stats.positive, stats.negative)
    return collected if output_fn is None else stats.features
