"""The official SQuAD v1.1 / v2.0 metrics on hand-checked cases, and gold answers scoring 100 on real data."""

import json
import os
import zipfile

import pytest

from albert_tf.evaluation import squad as ev
from tests.helpers import REPO
from tests.helpers import SQUAD_V1 as SAMPLE_V1
from tests.helpers import SQUAD_V2 as SAMPLE_V2

SHARED_V1 = os.path.join(REPO, "..", "shared", "data", "squad", "dev-v1.1.json.zip")


def _dataset(*questions):
    """One article, one paragraph per question: (id, [gold texts]) pairs."""
    return {"data": [{"title": "t", "paragraphs": [
        {"context": "c", "qas": [{"id": qid, "question": "q?",
                                  "answers": [{"text": t, "answer_start": 0} for t in golds]}]}
        for qid, golds in questions]}]}


@pytest.mark.parametrize("text, expected", [
    ("The  Quick, brown FOX!", "quick brown fox"),
    ("an apple a day", "apple day"),
    ("Theatre of the Absurd", "theatre of absurd"),  # articles only as whole words
    ("U.S.-led", "usled"),  # ASCII punctuation is removed, not replaced by a space
    ("  «Ça va»  ", "«ça va»"),  # non-ASCII punctuation is kept
    ("", ""),
])
def test_normalize_answer(text, expected):
    assert ev.normalize_answer(text) == expected


def test_exact_match_and_f1_hand_checked():
    assert ev.exact_match("the Eiffel Tower.", "Eiffel tower") == 1
    assert ev.exact_match("Eiffel", "Eiffel tower") == 0
    # pred {cat, sat, on, mat}, gold {cat, on, mat}: P = 3/4, R = 1, F1 = 6/7.
    assert ev.f1_v1("the cat sat on the mat", "cat on mat") == pytest.approx(6 / 7)
    # Words count with multiplicity: pred x x y, gold x y y share one x and one y: P = R = 2/3.
    assert ev.f1_v1("x x y", "x y y") == pytest.approx(2 / 3)
    assert ev.f1_v1("abc", "xyz") == 0.0
    # v1.1: an empty side scores 0; v2.0: 1 when both sides are empty (after normalisation), else 0.
    assert ev.f1_v1("", "") == 0.0
    assert ev.f1_v2("", "") == 1.0
    assert ev.f1_v2("the", "") == 1.0
    assert ev.f1_v2("", "abc") == 0.0
    assert ev.f1_v2("abc", "") == 0.0
    assert ev.f1_v2("the cat sat on the mat", "cat on mat") == pytest.approx(6 / 7)


def test_evaluate_v1_max_over_golds_and_missing_prediction(capsys):
    dataset = _dataset(("q1", ["Denver Broncos", "Broncos"]), ("q2", ["Carolina Panthers"]), ("q3", ["Santa Clara"]))
    predictions = {"q1": "broncos", "q2": "Carolina Panthers defense"}
    result = ev.evaluate_v1(dataset, predictions)
    # q1: EM 1, F1 1 (second gold); q2: EM 0, F1 P=2/3 R=1 -> 0.8; q3: no prediction -> 0.
    assert result["exact_match"] == pytest.approx(100 / 3)
    assert result["f1"] == pytest.approx(100 * 1.8 / 3)
    assert "q3" in capsys.readouterr().err


def test_evaluate_v2_split_and_threshold_search():
    dataset = _dataset(("q1", ["Paris"]), ("q2", ["1990s"]), ("q3", []), ("q4", []))
    predictions = {"q1": "Paris", "q2": "", "q3": "", "q4": "Rome"}
    result = ev.evaluate_v2(dataset, predictions)
    assert (result["exact"], result["f1"], result["total"]) == (50.0, 50.0, 4)
    assert (result["HasAns_exact"], result["HasAns_total"]) == (50.0, 2)
    assert (result["NoAns_exact"], result["NoAns_total"]) == (50.0, 2)
    assert "best_f1" not in result

    # Best non-null answers and no-answer scores. Answering nothing scores 2 (q3, q4). In order of score: q1 (0.1)
    # +1 -> 3, q4 (0.3) -1 -> 2, q3 (0.8) -1 -> 1, q2 (0.9) +0 -> 1: the best is 3/4 at threshold 0.1.
    best_non_null = {"q1": "Paris", "q2": "1990", "q3": "London", "q4": "Rome"}
    na_probs = {"q1": 0.1, "q2": 0.9, "q3": 0.8, "q4": 0.3}
    result = ev.evaluate_v2(dataset, best_non_null, na_probs=na_probs, na_prob_thresh=1.0)
    assert (result["best_exact"], result["best_exact_thresh"]) == (75.0, 0.1)
    assert (result["best_f1"], result["best_f1_thresh"]) == (75.0, 0.1)
    assert ev.realisable_threshold(best_non_null, {q: float(q == "q1") for q in na_probs}, na_probs,
                                   ev.has_answer_map(dataset)) == (75.0, 0.1)
    # The official na_prob_thresh: scores above it count as "" (q2 and q3 here).
    result = ev.evaluate_v2(dataset, best_non_null, na_probs=na_probs, na_prob_thresh=0.5)
    assert result["exact"] == 50.0  # q1 right, q2 nulled (wrong), q3 nulled (right), q4 answered (wrong)


def test_threshold_search_ties_and_answer_nothing():
    dataset = _dataset(("q1", ["Paris"]), ("q3", []), ("q4", []))
    has_answer = ev.has_answer_map(dataset)
    preds = {"q1": "Paris", "q3": "London", "q4": "Rome"}
    scores = {"q1": 1.0, "q3": 0.0, "q4": 0.0}
    tied = {"q1": 0.1, "q4": 0.1, "q3": 0.8}
    # Answering nothing scores 2 (q3, q4). The official search switches q1 alone first (3/3 = 100% at 0.1), but
    # q1 and q4 share the score 0.1 and no threshold separates them: the realisable best is answering nothing.
    assert ev.best_threshold(preds, scores, tied, has_answer) == (100.0, 0.1)
    best, threshold = ev.realisable_threshold(preds, scores, tied, has_answer)
    assert best == pytest.approx(200 / 3) and threshold < 0.1  # answer nothing: below every score
    # Applying the realisable threshold gives its score.
    applied = {q: ("" if tied[q] > threshold else preds[q]) for q in preds}
    assert ev.evaluate_v2(dataset, applied)["exact"] == pytest.approx(best)
    # When answering nothing is best, the official search says 0.0 (whatever the scores).
    assert ev.best_threshold(preds, {"q1": 0.0, "q3": 0.0, "q4": 0.0}, {"q1": -3.0, "q3": -2.0, "q4": -1.0},
                             has_answer) == (pytest.approx(200 / 3), 0.0)


def test_heldout_threshold_is_tuned_on_the_other_article():
    dataset = {"data": [
        {"title": "A", "paragraphs": [{"context": "c", "qas": [
            {"id": "a1", "question": "q", "answers": [{"text": "Paris", "answer_start": 0}]},
            {"id": "a2", "question": "q", "answers": []}]}]},
        {"title": "B", "paragraphs": [{"context": "c", "qas": [
            {"id": "b1", "question": "q", "answers": [{"text": "Rome", "answer_start": 0}]},
            {"id": "b2", "question": "q", "answers": []}]}]}]}
    best_non_null = {"a1": "Paris", "a2": "x", "b1": "Rome", "b2": "y"}
    # On A alone the best threshold answers a1 (no-answer score 1) and nulls a2 (score 5): 1.0.
    # On B alone answering b1 (score 2) means answering b2 (score 0) wrongly: answering nothing is as good, so the
    # threshold goes below both scores (-1.0).
    na_probs = {"a1": 1.0, "a2": 5.0, "b1": 2.0, "b2": 0.0}
    result = ev.heldout_threshold_scores(dataset, best_non_null, na_probs)
    assert ev.split_by_article(dataset) == [["a1", "a2"], ["b1", "b2"]]
    # A is scored with B's threshold (answer nothing: -1.0, below B's scores), B with A's (1.0).
    assert result["thresholds"] == [-1.0, 1.0]
    # A with -1.0: all nulled -> a1 wrong, a2 right. B with 1.0: b1 (2.0) nulled -> wrong, b2 (0.0) answered "y"
    # -> wrong. Total 1/4.
    assert result["exact"] == 25.0 and result["total"] == 4
    assert (result["HasAns_exact"], result["NoAns_exact"]) == (0.0, 50.0)


def _gold_predictions(dataset, version_2):
    predictions = {}
    for article in dataset["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = [] if qa.get("is_impossible") else qa["answers"]
                predictions[qa["id"]] = answers[0]["text"] if answers else ""
    return predictions


def test_gold_answers_score_100_on_the_shipped_samples():
    with open(SAMPLE_V1, encoding="utf-8") as f:
        v1 = json.load(f)
    assert ev.evaluate_v1(v1, _gold_predictions(v1, False)) == {"exact_match": 100.0, "f1": pytest.approx(100.0)}
    with open(SAMPLE_V2, encoding="utf-8") as f:
        v2 = json.load(f)
    result = ev.evaluate_v2(v2, _gold_predictions(v2, True))
    assert (result["exact"], result["f1"], result["total"]) == (100.0, pytest.approx(100.0), 14)
    assert (result["HasAns_total"], result["NoAns_total"]) == (8, 6)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(SHARED_V1), reason="../shared/data/squad/dev-v1.1.json.zip is not present")
def test_gold_answers_score_100_on_the_full_v1_dev_set():
    with zipfile.ZipFile(SHARED_V1) as archive:
        dataset = json.loads(archive.read("dev-v1.1.json"))
    predictions = _gold_predictions(dataset, False)
    assert len(predictions) == 10570
    # Every one of the 34,726 gold answers, fed alone, has EM 1 on its question; F1 is 1 too except for the three
    # answers that are just "." (normalised to nothing, which the official v1.1 F1 scores 0 even against itself).
    degenerate = 0
    for article in dataset["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                golds = [a["text"] for a in qa["answers"]]
                for gold in golds:
                    assert ev.best_over_golds(ev.exact_match, gold, golds) == 1
                    if ev.best_over_golds(ev.f1_v1, gold, golds) != 1.0:
                        assert ev.normalize_answer(gold) == ""
                        degenerate += 1
    assert degenerate == 3
    assert ev.evaluate_v1(dataset, predictions) == {"exact_match": 100.0, "f1": pytest.approx(100.0)}
    # And as v2.0 (every question answerable): the same.
    result = ev.evaluate_v2(dataset, predictions)
    assert (result["exact"], result["f1"], result["HasAns_total"]) == (100.0, pytest.approx(100.0), 10570)
