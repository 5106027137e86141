"""SQuAD post-processing, as the original: model outputs of every window back to answer texts.

For v1.1 (`accumulate_predictions_v1` / `write_predictions_v1`) the top `n_best_size` start and end positions of
each window are paired; spans that start outside the context, end before they start, are longer than
`max_answer_length` or start where the window does not have the max context are dropped; scores accumulated over
repeated evaluations of the same window are averaged; the candidates of all windows are ranked together by start +
end score and de-duplicated by text. For v2.0 (`..._v2`) the candidates are the model's beam (`start_n_top` starts x
`end_n_top` ends); the null score of a question is the lowest answerability logit over its windows, and the question
is answered "" when that score exceeds the threshold.

Windows are the `InputFeatures` of `albert_tf.data.squad` (any object with its fields works).
"""

import collections
import json
import math

import numpy as np

from albert_tf import fileio

RawResult = collections.namedtuple("RawResult", ["unique_id", "start_log_prob", "end_log_prob"])
RawResultV2 = collections.namedtuple(
    "RawResultV2", ["unique_id", "start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index",
                    "cls_logits"])
_Prelim = collections.namedtuple("_Prelim", ["feature_index", "start_index", "end_index", "start_log_prob",
                                             "end_log_prob"])


def _best_indexes(scores, n_best_size):
    order = sorted(range(len(scores)), key=lambda i: scores[i], reverse=True)
    return order[:n_best_size]


def softmax(scores):
    """Softmax of a list of floats (empty for an empty list)."""
    if not scores:
        return []
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


def _group(examples, features, results):
    by_example = collections.defaultdict(list)
    for feature in features:
        by_example[feature.example_index].append(feature)
    by_id = {result.unique_id: result for result in results}
    return by_example, by_id


def _valid_span(feature, start_index, end_index, max_answer_length):
    num_context = len(feature.tok_start_to_orig_index)
    if start_index - feature.doc_offset < 0 or start_index - feature.doc_offset >= num_context:
        return False
    if end_index - feature.doc_offset >= num_context:
        return False
    if not feature.token_is_max_context.get(start_index, False):
        return False
    if end_index < start_index or end_index - start_index + 1 > max_answer_length:
        return False
    return True


def accumulate_predictions_v1(result_dict, examples, features, results, n_best_size, max_answer_length):
    """Adds the valid spans of one evaluation's v1.1 results to `result_dict`
    ({example_index: {unique_id: {(start, end) in context pieces: [(start score, end score), ...]}}})."""
    by_example, by_id = _group(examples, features, results)
    for example_index in range(len(examples)):
        per_example = result_dict.setdefault(example_index, {})
        for feature in by_example[example_index]:
            spans = per_example.setdefault(feature.unique_id, {})
            result = by_id.get(feature.unique_id)
            if result is None:
                continue
            for start_index in _best_indexes(result.start_log_prob, n_best_size):
                for end_index in _best_indexes(result.end_log_prob, n_best_size):
                    if not _valid_span(feature, start_index, end_index, max_answer_length):
                        continue
                    key = (start_index - feature.doc_offset, end_index - feature.doc_offset)
                    spans.setdefault(key, []).append((float(result.start_log_prob[start_index]),
                                                      float(result.end_log_prob[end_index])))


def accumulate_predictions_v2(result_dict, cls_dict, examples, features, results, n_best_size, max_answer_length,
                              start_n_top, end_n_top):
    """As `accumulate_predictions_v1` for the v2.0 beam; appends each example's null score (its lowest
    answerability logit over windows) to `cls_dict[example_index]`. (`n_best_size` is unused, as in the
    original.)"""
    del n_best_size
    by_example, by_id = _group(examples, features, results)
    for example_index in range(len(examples)):
        per_example = result_dict.setdefault(example_index, {})
        null_score = None
        for feature in by_example[example_index]:
            spans = per_example.setdefault(feature.unique_id, {})
            result = by_id.get(feature.unique_id)
            if result is None:
                continue
            cls_logit = float(result.cls_logits)
            null_score = cls_logit if null_score is None else min(null_score, cls_logit)
            for i in range(start_n_top):
                start_index = int(result.start_top_index[i])
                for j in range(end_n_top):
                    end_index = int(result.end_top_index[i * end_n_top + j])
                    if not _valid_span(feature, start_index, end_index, max_answer_length):
                        continue
                    key = (start_index - feature.doc_offset, end_index - feature.doc_offset)
                    spans.setdefault(key, []).append((float(result.start_top_log_probs[i]),
                                                      float(result.end_top_log_probs[i * end_n_top + j])))
        # The original starts from 1e6 ("large and positive"): a question without windows gets that score.
        cls_dict.setdefault(example_index, []).append(1e6 if null_score is None else null_score)


def _nbest(example, features, per_example, n_best_size):
    prelim = []
    for feature_index, feature in enumerate(features):
        for (start, end), scores in per_example.get(feature.unique_id, {}).items():
            prelim.append(_Prelim(feature_index, start, end, sum(s for s, _ in scores) / len(scores),
                                  sum(e for _, e in scores) / len(scores)))
    prelim.sort(key=lambda p: p.start_log_prob + p.end_log_prob, reverse=True)
    seen, nbest = set(), []
    for pred in prelim:
        if len(nbest) >= n_best_size:
            break
        feature = features[pred.feature_index]
        first = feature.tok_start_to_orig_index[pred.start_index]
        last = feature.tok_end_to_orig_index[pred.end_index]
        text = example.paragraph_text[first:last + 1].strip()
        if text in seen:
            continue
        seen.add(text)
        nbest.append({"text": text, "start_log_prob": pred.start_log_prob, "end_log_prob": pred.end_log_prob,
                      "char_start": first, "char_end": last})
    return nbest


def _nbest_json(nbest):
    probs = softmax([e["start_log_prob"] + e["end_log_prob"] for e in nbest])
    return [collections.OrderedDict([("text", e["text"]), ("probability", p),
                                     ("start_log_prob", e["start_log_prob"]), ("end_log_prob", e["end_log_prob"])])
            for e, p in zip(nbest, probs)]


def write_json_atomic(path, value):
    """Writes `value` as JSON indented by 4 (keys in insertion order, the original's files), atomically."""
    return fileio.write_text(path, json.dumps(value, indent=4) + "\n")


def write_predictions_v1(result_dict, examples, features, n_best_size, output_prediction_file=None,
                         output_nbest_file=None):
    """Best answer and n-best list of each example from `result_dict` (see `accumulate_predictions_v1`).

    Writes `predictions.json` ({id: text}) and `nbest_predictions.json` ({id: [{text, probability,
    start_log_prob, end_log_prob}]}) when paths are given. A question without a valid span is answered "empty",
    as the original. Returns (predictions, nbest_json).
    """
    by_example = collections.defaultdict(list)
    for feature in features:
        by_example[feature.example_index].append(feature)
    predictions, all_nbest = collections.OrderedDict(), collections.OrderedDict()
    for example_index, example in enumerate(examples):
        nbest = _nbest(example, by_example[example_index], result_dict.get(example_index, {}), n_best_size)
        if not nbest:
            nbest = [{"text": "empty", "start_log_prob": 0.0, "end_log_prob": 0.0}]
        entries = _nbest_json(nbest)
        predictions[example.qas_id] = entries[0]["text"]
        all_nbest[example.qas_id] = entries
    _write_json_files((output_prediction_file, predictions), (output_nbest_file, all_nbest))
    return predictions, all_nbest


def _write_json_files(*outputs):
    """Writes each `(path, object)` as JSON, atomically, where a path is given."""
    for path, value in outputs:
        if path:
            write_json_atomic(path, value)


def write_predictions_v2(result_dict, cls_dict, examples, features, n_best_size, null_score_diff_threshold=None,
                         output_prediction_file=None, output_nbest_file=None, output_null_log_odds_file=None):
    """Best non-null answers, null scores and n-best lists of each example (see `accumulate_predictions_v2`).

    The null score of an example is the mean of its `cls_dict` entries. With `null_score_diff_threshold`, a
    question whose null score is above the threshold is answered "" (the official evaluation's rule; the original
    also nulled a score equal to the threshold). Writes `predictions.json`, `nbest_predictions.json` and
    `null_odds.json` ({id: null score}) when paths are given. Returns (predictions, null_odds, best_non_null, nbest).
    """
    by_example = collections.defaultdict(list)
    for feature in features:
        by_example[feature.example_index].append(feature)
    predictions, null_odds = collections.OrderedDict(), collections.OrderedDict()
    best_non_null, all_nbest = collections.OrderedDict(), collections.OrderedDict()
    for example_index, example in enumerate(examples):
        nbest = _nbest(example, by_example[example_index], result_dict.get(example_index, {}), n_best_size)
        if not nbest:
            nbest = [{"text": "", "start_log_prob": -1e6, "end_log_prob": -1e6}]
        entries = _nbest_json(nbest)
        scores = cls_dict.get(example_index) or [1e6]
        score = sum(scores) / len(scores)
        null_odds[example.qas_id] = score
        best_non_null[example.qas_id] = entries[0]["text"]
        if null_score_diff_threshold is not None and score > null_score_diff_threshold:
            predictions[example.qas_id] = ""
        else:
            predictions[example.qas_id] = entries[0]["text"]
        all_nbest[example.qas_id] = entries
    _write_json_files((output_prediction_file, predictions), (output_nbest_file, all_nbest),
                      (output_null_log_odds_file, null_odds))
    return predictions, null_odds, best_non_null, all_nbest


def raw_results_v1(unique_ids, start_logits, end_logits):
    """`RawResult`s from arrays of model outputs, one row per window (`unique_ids` in the same order)."""
    return [RawResult(int(u), np.asarray(s, np.float64).tolist(), np.asarray(e, np.float64).tolist())
            for u, s, e in zip(unique_ids, start_logits, end_logits)]


def raw_results_v2(unique_ids, outputs):
    """`RawResultV2`s from the dict of arrays the v2.0 model returns at inference, one row per window."""
    return [RawResultV2(int(u), outputs["start_top_log_probs"][i].tolist(), outputs["start_top_index"][i].tolist(),
                        outputs["end_top_log_probs"][i].tolist(), outputs["end_top_index"][i].tolist(),
                        float(outputs["cls_logits"][i]))
            for i, u in enumerate(unique_ids)]
