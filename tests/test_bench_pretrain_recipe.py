"""The logic of `python -m bench.bench_pretrain_recipe` that decides what a multi-day search runs: the grid, the budget in
tokens, successive halving's cut, resuming from the state file (a finished rung is never redone, a changed search
is refused) and the learning-rate schedule planned over the whole search whatever step a rung stops at. The label
subsets of the next step are bench/support/label_subsets.py's (tests/test_bench_pretrain_finetune.py)."""

import json
import math

import pytest

from bench import bench_pretrain_recipe as recipe  # it defines its flags only when run

SETTINGS = {"rung_steps": [2, 6, 18], "eta": 3}


def test_the_grid_varies_what_the_issue_asks_and_starts_with_todays_data():
    cands = recipe.grid()
    names = [c["name"] for c in cands]
    assert len(set(names)) == len(names) == 16
    for optimizer in ("lamb", "adamw"):
        rates = {c["learning_rate"] for c in cands if c["optimizer"] == optimizer}
        assert len(rates) >= 4
        assert len({c["warmup"] for c in cands if c["optimizer"] == optimizer}) >= 2
    assert {c["vocab"] for c in cands} == {"30k", "16k", "8k"}
    assert {c["seq"] for c in cands} == {64, 128}
    assert {c["masking"] for c in cands} == {"stored", "online"}
    first = cands[0]
    assert (first["vocab"], first["seq"], first["masking"]) == ("30k", 128, "stored")
    assert recipe.vocab_name("16000") == "16k" and recipe.vocab_name(500) == "500"


def test_every_candidate_of_a_rung_processes_the_same_tokens():
    assert recipe.steps_at(160, 128) == 160
    assert recipe.steps_at(160, 64) == 320
    for seq in (64, 128):
        assert recipe.steps_at(480, seq) * recipe.BATCH * seq == 480 * recipe.UNIT_TOKENS
    with pytest.raises(ValueError):
        recipe.steps_at(1, 256 * 3)
    assert recipe.max_predictions(128) == 19 and recipe.max_predictions(64) == 10


def test_successive_halving_keeps_the_best_third_and_never_a_failed_candidate():
    scores = {"a": 3.0, "b": 1.0, "c": 2.0, "d": float("nan"), "e": None, "f": 1.5, "g": 0.5}
    assert recipe.keep_count(7, 3) == 3 and recipe.keep_count(1, 3) == 1 and recipe.keep_count(0, 3) == 0
    assert recipe.select(scores, 3) == ["g", "b", "f"]
    assert recipe.select({"x": 1.0, "w": 1.0}, 3) == ["w"]  # ties by name
    assert recipe.select({"x": float("inf"), "y": None}, 3) == []


def _fake_search(state_path, cands, scores, stop_after=None):
    """Runs the search loop as main() does, with a fake trainer whose score is `scores[name]`; returns the
    (rung, name) pairs it trained. `stop_after`: "killed" after that many trainings (the state is on disk)."""
    state = recipe.load_state(state_path, SETTINGS, cands)
    trained = []
    while True:
        work = recipe.next_run(state, SETTINGS["eta"])
        recipe.save_state(state_path, state)
        if work is None or (stop_after is not None and len(trained) == stop_after):
            return trained
        index, name = work
        trained.append(work)
        state["rungs"][index]["results"][name] = {"score": scores[name]}
        recipe.save_state(state_path, state)


def test_a_killed_search_resumes_where_it_stopped_and_redoes_no_finished_rung(tmp_path):
    cands = [recipe.candidate("lamb", lr) for lr in (1e-3, 2e-3, 5e-3, 1e-2, 2e-2)]
    names = [c["name"] for c in cands]
    scores = dict(zip(names, [5.0, 4.0, 1.0, 2.0, 3.0]))
    path = str(tmp_path / "state.json")
    first = _fake_search(path, cands, scores, stop_after=6)  # all of rung 1, one of rung 2
    assert first[:5] == [(0, n) for n in names] and first[5] == (1, names[2])
    rest = _fake_search(path, cands, scores)
    assert rest == [(1, names[3]), (2, names[2])]
    with open(path, encoding="utf-8") as f:
        state = json.load(f)
    assert [r["survivors"] for r in state["rungs"]] == [[names[2], names[3]], [names[2]], [names[2]]]
    assert [r["unit_steps"] for r in state["rungs"]] == SETTINGS["rung_steps"]
    assert _fake_search(path, cands, scores) == []  # over: nothing is run again
    with pytest.raises(SystemExit, match="eta"):
        recipe.load_state(path, {**SETTINGS, "eta": 2}, cands)


def test_a_failed_candidate_is_pruned_and_retried_only_when_asked(tmp_path):
    cands = [recipe.candidate("adamw", lr) for lr in (1e-3, 2e-3)]
    state = recipe.new_state(SETTINGS, cands)
    state["rungs"][0]["results"] = {cands[0]["name"]: {"score": None, "error": "exit status 1"},
                                    cands[1]["name"]: {"score": 2.0}}
    assert recipe.next_run(json.loads(json.dumps(state)), 3, retry_failed=True) == (0, cands[0]["name"])
    assert recipe.next_run(state, 3) == (1, cands[1]["name"])
    assert state["rungs"][0]["survivors"] == [cands[1]["name"]]


def test_a_rung_stops_early_on_the_schedule_of_the_whole_search():
    from albert_tf.train import optimization, runner

    original = runner.optimization.create_optimizer
    with recipe.decay_horizon(100):
        optimizer = runner.optimization.create_optimizer("lamb", 1e-2, 10, 5)
    assert runner.optimization.create_optimizer is original is optimization.create_optimizer
    schedule = optimizer.learning_rate if callable(optimizer.learning_rate) else optimizer._learning_rate
    rate = float(schedule(10))  # the rung's last step: 90 % of the way from the peak, not 0
    assert math.isclose(rate, 1e-2 * 0.9, rel_tol=1e-5)
    assert math.isclose(float(original("lamb", 1e-2, 10, 5)._learning_rate(10)), 0.0, abs_tol=1e-9)
