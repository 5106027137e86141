"""The official SQuAD metrics, v1.1 and v2.0, with the official definitions.

Answers are compared after normalisation: lowercase, drop ASCII punctuation (`string.punctuation`), drop the
words "a", "an" and "the", and fold whitespace. Exact match (EM) is 1 when the normalised prediction equals a
normalised gold answer; F1 is the harmonic mean of precision and recall of the normalised words (bag of words, with
multiplicity). Each question takes its best score over its gold answers, and the totals are percentages.

v1.1 (`evaluate_v1`): `{"exact_match", "f1"}` over every question of the dataset; a question without a prediction
scores 0 (and is reported on stderr).

v2.0 (`evaluate_v2`): gold answers that normalise to "" are ignored and a question without one has the single gold
answer "" (no answer), so an empty prediction scores 1 on it and any other 0. With no-answer scores ("null odds",
higher = more likely unanswerable), predictions whose score exceeds `na_prob_thresh` count as "". The result has
`exact`, `f1`, `total`, the same over answerable (`HasAns_*`) and unanswerable (`NoAns_*`) questions when there are
any, and, given no-answer scores, the best threshold search: `best_exact`/`best_f1` and their thresholds (the
scores obtained by answering exactly the questions whose no-answer score is at most the threshold, with the
predictions' texts). Questions without a prediction are left out of v2.0 totals, as the official script does.
"""

import collections
import re
import string
import sys

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text):
    """The official normalisation (see module docstring)."""
    text = text.lower()
    text = "".join(c for c in text if c not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def answer_tokens(text):
    """Words of the normalised answer ([] for an empty answer)."""
    return normalize_answer(text).split() if text else []


def exact_match(prediction, gold):
    """1 if the normalised texts are equal, else 0."""
    return int(normalize_answer(prediction) == normalize_answer(gold))


def f1_v1(prediction, gold):
    """v1.1 token F1: 0 when no word is shared (including when either side is empty)."""
    pred, ref = answer_tokens(prediction), answer_tokens(gold)
    shared = sum((collections.Counter(pred) & collections.Counter(ref)).values())
    if shared == 0:
        return 0.0
    precision, recall = shared / len(pred), shared / len(ref)
    return 2 * precision * recall / (precision + recall)


def f1_v2(prediction, gold):
    """v2.0 token F1: as v1.1, except that when either side has no words the score is 1 if both have none."""
    pred, ref = answer_tokens(prediction), answer_tokens(gold)
    if not pred or not ref:
        return float(pred == ref)
    return f1_v1(prediction, gold)


def best_over_golds(metric, prediction, golds):
    """The best score of `prediction` against any of `golds`."""
    return max(metric(prediction, gold) for gold in golds)


def _questions(dataset):
    """(id, gold texts) of every question of the `data` list of a SQuAD file (or the file's dict)."""
    articles = dataset["data"] if isinstance(dataset, dict) else dataset
    for article in articles:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                yield str(qa["id"]), [answer["text"] for answer in qa.get("answers", [])]


def evaluate_v1(dataset, predictions):
    """Official SQuAD v1.1 scores of `predictions` ({id: text}) on `dataset` (the file's dict or its `data`)."""
    total = em = f1 = 0
    for qid, golds in _questions(dataset):
        total += 1
        if qid not in predictions:
            print(f"Unanswered question {qid} will receive score 0.", file=sys.stderr)
            continue
        if not golds:
            continue
        em += best_over_golds(exact_match, predictions[qid], golds)
        f1 += best_over_golds(f1_v1, predictions[qid], golds)
    total = max(total, 1)
    return {"exact_match": 100.0 * em / total, "f1": 100.0 * f1 / total}


def has_answer_map(dataset):
    """{id: whether the question has a gold answer}."""
    return {qid: bool(golds) for qid, golds in _questions(dataset)}


def raw_scores_v2(dataset, predictions):
    """Per-question ({id: EM}, {id: F1}) of the v2.0 metric, for the questions that have a prediction."""
    exact, f1 = {}, {}
    for qid, golds in _questions(dataset):
        golds = [g for g in golds if normalize_answer(g)] or [""]
        if qid not in predictions:
            print(f"Missing prediction for {qid}", file=sys.stderr)
            continue
        exact[qid] = best_over_golds(exact_match, predictions[qid], golds)
        f1[qid] = best_over_golds(f1_v2, predictions[qid], golds)
    return exact, f1


def apply_no_answer_threshold(scores, na_probs, has_answer, threshold):
    """Scores after answering "" wherever the no-answer score exceeds `threshold`."""
    return {qid: (float(not has_answer[qid]) if na_probs[qid] > threshold else score)
            for qid, score in scores.items()}


def summarize(exact, f1, qids=None):
    """{exact, f1, total} as percentages over `qids` (default: all questions scored)."""
    qids = list(exact) if not qids else list(qids)
    total = len(qids)
    if not total:
        return collections.OrderedDict([("exact", 0.0), ("f1", 0.0), ("total", 0)])
    return collections.OrderedDict([("exact", 100.0 * sum(exact[q] for q in qids) / total),
                                    ("f1", 100.0 * sum(f1[q] for q in qids) / total), ("total", total)])


def best_threshold(predictions, scores, na_probs, has_answer):
    """The official threshold search: (best score in %, threshold).

    Starting from "answer nothing" (every unanswerable question right), questions are switched to their predicted
    answer in increasing order of no-answer score; switching an answerable question adds its score, switching an
    unanswerable one with a non-empty prediction costs 1. The best running total and the no-answer score where it
    is reached are returned (0.0 if answering nothing is best).
    """
    running = best = sum(1 for qid in has_answer if not has_answer[qid])
    threshold = 0.0
    for qid in sorted(na_probs, key=lambda q: na_probs[q]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            running += scores[qid]
        elif predictions[qid]:
            running -= 1
        if running > best:
            best, threshold = running, na_probs[qid]
    return 100.0 * best / max(len(scores), 1), threshold


def realisable_threshold(predictions, scores, na_probs, has_answer):
    """The threshold to apply ("" when the no-answer score is above it) that gives the best total score:
    (best score in %, threshold).

    The same search as `best_threshold`, except that only thresholds that can be applied are considered: questions
    with equal no-answer scores are switched together, and when answering nothing is best the threshold is below
    every score (the official search reports 0.0 there, and its best may fall inside a group of equal scores).
    """
    qids = [qid for qid in sorted(na_probs, key=lambda q: na_probs[q]) if qid in scores]
    running = best = sum(1 for qid in has_answer if not has_answer[qid])
    threshold = (na_probs[qids[0]] - 1.0) if qids else 0.0
    for k, qid in enumerate(qids):
        if has_answer[qid]:
            running += scores[qid]
        elif predictions[qid]:
            running -= 1
        last_of_group = k + 1 == len(qids) or na_probs[qids[k + 1]] != na_probs[qid]
        if last_of_group and running > best:
            best, threshold = running, na_probs[qid]
    return 100.0 * best / max(len(scores), 1), threshold


def evaluate_v2(dataset, predictions, na_probs=None, na_prob_thresh=1.0):
    """Official SQuAD v2.0 scores (see module docstring).

    Args:
      dataset: the file's dict or its `data` list.
      predictions: {id: text}, "" for no answer.
      na_probs: optional {id: no-answer score}; without it every score is 0 and no threshold search is done.
      na_prob_thresh: answers whose no-answer score exceeds it count as "" (the official default, 1.0).
    """
    has_answer = has_answer_map(dataset)
    exact_raw, f1_raw = raw_scores_v2(dataset, predictions)
    probs = na_probs if na_probs is not None else {qid: 0.0 for qid in predictions}
    exact = apply_no_answer_threshold(exact_raw, probs, has_answer, na_prob_thresh)
    f1 = apply_no_answer_threshold(f1_raw, probs, has_answer, na_prob_thresh)
    result = summarize(exact, f1)
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [qid for qid, has in has_answer.items() if has == wanted and qid in exact]
        if qids:
            for key, value in summarize(exact, f1, qids).items():
                result[f"{prefix}_{key}"] = value
    if na_probs is not None:
        result["best_exact"], result["best_exact_thresh"] = best_threshold(predictions, exact_raw, na_probs,
                                                                           has_answer)
        result["best_f1"], result["best_f1_thresh"] = best_threshold(predictions, f1_raw, na_probs, has_answer)
    return result


def split_by_article(dataset, folds=2):
    """Question ids in `folds` groups, whole articles at a time (article k goes to group k % folds); with fewer
    articles than folds, questions are dealt out in turn instead."""
    articles = dataset["data"] if isinstance(dataset, dict) else dataset
    groups = [[] for _ in range(folds)]
    if len(articles) >= folds:
        for k, article in enumerate(articles):
            groups[k % folds].extend(qid for qid, _ in _questions([article]))
    else:
        for k, (qid, _) in enumerate(_questions(articles)):
            groups[k % folds].append(qid)
    return groups


def heldout_threshold_scores(dataset, best_non_null, na_probs, folds=2):
    """v2.0 scores with a threshold chosen on held-out questions.

    The questions are split by article into `folds` groups; each group is scored with the best-F1 threshold found on
    the other groups (`realisable_threshold` over the best non-null predictions), so no question's threshold was
    tuned on it. Returns the `evaluate_v2`-style summary over all questions plus `thresholds` (one per group).
    """
    has_answer = has_answer_map(dataset)
    exact_raw, f1_raw = raw_scores_v2(dataset, best_non_null)
    groups = split_by_article(dataset, folds)
    exact, f1, thresholds = {}, {}, []
    for k, group in enumerate(groups):
        others = {q for j, g in enumerate(groups) if j != k for q in g}
        if not others:
            others = set(group)
        tune_has = {q: has_answer[q] for q in others}
        tune_scores = {q: f1_raw[q] for q in others if q in f1_raw}
        tune_probs = {q: na_probs[q] for q in others if q in na_probs}
        _, threshold = realisable_threshold(best_non_null, tune_scores, tune_probs, tune_has)
        thresholds.append(threshold)
        for qid in group:
            if qid not in exact_raw:
                continue
            null = na_probs[qid] > threshold
            exact[qid] = float(not has_answer[qid]) if null else exact_raw[qid]
            f1[qid] = float(not has_answer[qid]) if null else f1_raw[qid]
    result = summarize(exact, f1)
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [qid for qid in exact if has_answer[qid] == wanted]
        if qids:
            for key, value in summarize(exact, f1, qids).items():
                result[f"{prefix}_{key}"] = value
    result["thresholds"] = thresholds
    return result
