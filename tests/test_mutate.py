"""tools/mutate.py's pure parts: the mutants it makes of a source (each operator, one change each, every one
compiling, none in docstrings, annotations, f-strings or log calls), and the restore of the mutated file (after
an error, and from a backup an interrupted run left). Running pytest on mutants is what docs/testing.md's stored
runs show."""

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.helpers import REPO

_spec = importlib.util.spec_from_file_location("mutate", os.path.join(REPO, "tools", "mutate.py"))
mutate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mutate)

SOURCE = '''"""Docstring with 1 < 2 and not x."""
import logging

logger = logging.getLogger(__name__)


def f(a: int = 3, b=None) -> bool:
    """Its docstring: return a < 1."""
    total = a + 1
    total -= 2
    if a < b and not b:
        logger.info("%d of %d", a, b)
        return max(a, b)
    label = f"{a + 1}"
    while a:
        a = a // 2
    return a >= 0 or b is None if b else True
'''


def _mutants(**kwargs):
    return mutate.generate_mutants(SOURCE, **kwargs)


def test_each_operator_makes_the_changes_it_documents():
    made = {(m.operator, m.original, m.replacement) for m in _mutants()}
    expected = {
        ("compare", "a < b", "(a >= b)"), ("boundary", "a < b", "(a <= b)"),
        ("compare", "a >= 0", "(a < 0)"), ("boundary", "a >= 0", "(a > 0)"),
        ("compare", "b is None", "(b is not None)"),
        ("integer", "1", "(2)"), ("integer", "1", "(0)"), ("integer", "2", "(3)"), ("integer", "2", "(1)"),
        ("integer", "0", "(1)"), ("integer", "0", "(-1)"), ("integer", "3", "(4)"), ("integer", "3", "(2)"),
        ("boolean", "True", "(False)"),
        ("boolop", "a < b and not b", "((a < b) or (not b))"),
        ("boolop", "a >= 0 or b is None", "((a >= 0) and (b is None))"),
        ("not", "not b", "(b)"),
        ("negate", "a", "(not (a))"), ("negate", "b", "(not (b))"),
        ("negate", "a < b and not b", "(not (a < b and not b))"),
        ("arith", "a + 1", "((a) - (1))"), ("arith", "total -= 2", "total += 2"), ("arith", "a // 2", "((a) * (2))"),
        ("return", "return max(a, b)", "return None"),
        ("return", "return a >= 0 or b is None if b else True", "return None"),
        ("args", "a, b", "b, a"),
        ("statement", "total = a + 1", "pass"), ("statement", "total -= 2", "pass"),
        ("statement", "logger = logging.getLogger(__name__)", "pass"), ("statement", 'label = f"{a + 1}"', "pass"),
        ("statement", "a = a // 2", "pass"), ("statement", 'logger.info("%d of %d", a, b)', "pass"),
    }
    assert made == expected, (made - expected, expected - made)
    assert {m.operator for m in _mutants()} == set(mutate.OPERATORS)


def test_mutants_change_one_place_compile_and_are_distinct():
    mutants = _mutants()
    assert [m.id for m in mutants] == list(range(len(mutants)))
    assert len({m.apply(SOURCE) for m in mutants}) == len(mutants)
    lines = SOURCE.splitlines()
    for m in mutants:
        mutated = m.apply(SOURCE)
        compile(mutated, "<mutant>", "exec")
        assert ast.dump(ast.parse(mutated)) != ast.dump(ast.parse(SOURCE))
        assert SOURCE[m.start:m.end] == m.original and m.original in lines[m.line - 1] + "\n".join(lines[m.line:])
        # Everything outside the changed span is the original's, byte for byte.
        assert mutated[:m.start] == SOURCE[:m.start] and mutated[m.start + len(m.replacement):] == SOURCE[m.end:]
    # Docstrings, annotations, the f-string and the log call (but for its removal) are left alone.
    assert not [m for m in mutants if m.line in (1, 8) or m.original in ("int", "bool", "a + 1}")]
    assert not [m for m in mutants if m.line == 12 and m.operator != "statement"]
    assert _mutants(operators=("integer",)) and {m.operator for m in _mutants(operators=("integer",))} == {"integer"}


def test_columns_count_characters_after_non_ascii_text():
    source = 's = "。！？"; n = len(s) > 2\n'
    (boundary,) = [m for m in mutate.generate_mutants(source, ("boundary",))]
    assert boundary.apply(source) == 's = "。！？"; n = (len(s) >= 2)\n'
    # A form feed in a string is no line break for Python: later lines keep their offsets.
    source = 'a = "\x0c"\nb = 1 < 2\n'
    (compare,) = mutate.generate_mutants(source, ("compare",))
    assert compare.line == 2 and compare.apply(source) == 'a = "\x0c"\nb = (1 >= 2)\n'


def test_the_mutated_file_is_restored_after_an_error_and_from_a_leftover_backup(tmp_path):
    path = str(tmp_path / "module.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write("ORIGINAL = 1\n")
    with pytest.raises(ZeroDivisionError):
        with mutate.mutated_file(path, "ORIGINAL = 2\n"):
            assert open(path, encoding="utf-8").read() == "ORIGINAL = 2\n"
            raise ZeroDivisionError
    assert open(path, encoding="utf-8").read() == "ORIGINAL = 1\n"
    assert os.listdir(tmp_path) == ["module.py"]
    # An interrupted run leaves the mutant in place and the original in the backup: put back at the start.
    with open(path + mutate.BACKUP_SUFFIX, "w", encoding="utf-8") as f:
        f.write("ORIGINAL = 1\n")
    with open(path, "w", encoding="utf-8") as f:
        f.write("ORIGINAL = 3\n")
    with mutate.mutated_file(path, "ORIGINAL = 4\n"):
        assert open(path + mutate.BACKUP_SUFFIX, encoding="utf-8").read() == "ORIGINAL = 1\n"
    assert open(path, encoding="utf-8").read() == "ORIGINAL = 1\n" and os.listdir(tmp_path) == ["module.py"]
    assert not mutate.restore_leftover(path)


def test_the_work_folder_is_a_copy_with_the_data_linked(tmp_path):
    repo = tmp_path / "repo"
    (repo / "albert_tf").mkdir(parents=True)
    (repo / "albert_tf" / "m.py").write_text("X = 1\n")
    (repo / "albert_tf" / "__pycache__").mkdir()
    (repo / "data").mkdir()
    (repo / ".git").mkdir()
    (repo / "run.py").write_text("")
    work = mutate.make_workdir(str(tmp_path / "work"), repo=str(repo))
    assert sorted(os.listdir(work)) == ["albert_tf", "data", "mutate_plugin.py", "run.py"]
    assert os.listdir(os.path.join(work, "albert_tf")) == ["m.py"]
    assert os.path.islink(os.path.join(work, "data")) and not os.path.islink(os.path.join(work, "albert_tf"))
    with open(os.path.join(work, "albert_tf", "m.py"), "w") as f:
        f.write("X = 2\n")
    assert (repo / "albert_tf" / "m.py").read_text() == "X = 1\n"  # the copy is written, never the tree
    mutate.make_workdir(work, repo=str(repo))  # a kept folder is refreshed from the tree
    assert open(os.path.join(work, "albert_tf", "m.py")).read() == "X = 1\n"


def test_a_stored_report_is_never_written_over(tmp_path, capsys):
    report = tmp_path / "m.json"
    report.write_text("{}")
    with pytest.raises(SystemExit):
        mutate.main(["albert_tf/data/natural_order.py", "tests/data/test_natural_order.py", "--only", "0",
                     "--report", str(report)])
    assert "m.json exists already; name another with --report" in capsys.readouterr().err
    assert report.read_text() == "{}"


def test_an_empty_only_is_refused_not_taken_for_all(tmp_path, capsys):
    """`--only $(mutation_scores.py --survivor-ids M)` with no survivor left must not run every mutant."""
    with pytest.raises(SystemExit):
        mutate.main(["albert_tf/data/natural_order.py", "tests/data/test_natural_order.py", "--only", "",
                     "--report", str(tmp_path / "m.json")])
    assert "--only: no mutant ids given" in capsys.readouterr().err
    assert not (tmp_path / "m.json").exists()


class _Stopped(Exception):
    """A run killed part-way (a real stop is SIGTERM or ^C; any exception leaves the report as far as it got)."""


def test_a_stopped_run_goes_on_with_the_mutants_it_had_not_run(tmp_path, monkeypatch, capsys):
    """`--resume` runs only the mutants a stopped report lacks, keeps the ones it holds, and refuses a report of
    other settings, a finished one or none."""
    module, tests = "albert_tf/data/natural_order.py", ["tests/data/test_natural_order.py"]
    with open(os.path.join(REPO, module), encoding="utf-8") as f:
        source = f.read()
    everyone = mutate.generate_mutants(source)
    ran, stop_after = [], [3]

    def fake_run_tests(workdir, selected, timeout, log=None, **env):  # pylint: disable=unused-argument
        if "MUTATE_COVER_OUT" in env:
            with open(env["MUTATE_COVER_OUT"], "w", encoding="utf-8") as f:
                json.dump({"lines": {}, "seconds": {}}, f)
            return "passed", 1.0
        if len(ran) == stop_after[0]:
            raise _Stopped
        with open(os.path.join(workdir, module), encoding="utf-8") as f:
            mutated = f.read()
        ran.append(next(m.id for m in everyone if m.apply(source) == mutated))
        return ("failed" if len(ran) % 2 else "passed"), 0.5

    monkeypatch.setattr(mutate, "run_tests", fake_run_tests)
    monkeypatch.setattr(mutate, "check_imports", lambda workdir: None)
    report = tmp_path / "m.json"
    args = [module, *tests, "--report", str(report)]
    with pytest.raises(_Stopped):
        mutate.main(args)
    stopped = json.loads(report.read_text())
    assert [m["id"] for m in stopped["mutants"]] == ran == [0, 1, 2] and not stopped["complete"]

    for other, named in ((["--operators", "compare"], "operators"), (["--only", "0,1,5"], "only"),
                         (["--", "-k", "x"], "tests")):
        with pytest.raises(SystemExit):
            mutate.main([*args, "--resume", *other])
        assert f"is a run with {named} " in capsys.readouterr().err
    assert json.loads(report.read_text()) == stopped

    stop_after[0] = len(everyone) + 1
    mutate.main([*args, "--resume"])
    finished = json.loads(report.read_text())
    assert ran == [m.id for m in everyone] and finished["complete"]
    assert finished["mutants"][:3] == stopped["mutants"] and [m["id"] for m in finished["mutants"]] == ran
    assert finished["date"] == stopped["date"] and len(finished["resumed"]) == 1
    assert finished["summary"]["all"]["mutants"] == len(everyone)

    with pytest.raises(SystemExit):
        mutate.main([*args, "--resume"])
    assert "is a finished run" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        mutate.main([module, *tests, "--report", str(tmp_path / "none.json"), "--resume"])
    assert "no report" in capsys.readouterr().err and not (tmp_path / "none.json").exists()


def test_the_summary_counts_timeouts_as_killed():
    results = [{"operator": "compare", "status": "killed"}, {"operator": "compare", "status": "survived"},
               {"operator": "return", "status": "timeout"}]
    summary = mutate.summarize(results)
    assert summary["all"] == {"mutants": 3, "killed": 2, "timeout": 1, "survived": 1, "score": 0.6667}
    assert summary["compare"]["score"] == 0.5 and summary["return"]["score"] == 1.0


def _run_plugin(folder, **env):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MUTATE_")}, "PYTHONPATH": str(folder), **env}
    return subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-p", "mutate_plugin",
                           "test_m.py"], cwd=folder, env=env, capture_output=True, text=True, check=True).stdout


def test_the_plugin_records_each_tests_lines_and_runs_the_given_tests_first(tmp_path):
    shutil.copy2(mutate.PLUGIN, tmp_path)
    (tmp_path / "m.py").write_text("def f(x):\n    if x:\n        return 1\n    return 2\n")
    (tmp_path / "test_m.py").write_text("import m\n\n\ndef test_a():\n    assert m.f(0) == 2\n\n\n"
                                        "def test_b():\n    assert m.f(1) == 1\n\n\ndef test_c():\n    pass\n")
    cover = tmp_path / "cover.json"
    _run_plugin(tmp_path, MUTATE_TARGET=str(tmp_path / "m.py"), MUTATE_COVER_OUT=str(cover))
    coverage = json.loads(cover.read_text())
    assert coverage["lines"]["test_m.py::test_a"] == [1, 2, 4]
    assert coverage["lines"]["test_m.py::test_b"] == [1, 2, 3]
    assert "test_m.py::test_c" not in coverage["lines"] and 1 in coverage["lines"][""]  # the def, at import
    assert set(coverage["seconds"]) == {"test_m.py::test_a", "test_m.py::test_b", "test_m.py::test_c"}
    line3 = mutate.Mutant(0, "return", 3, 8, 0, 0, "return 1", "return None")
    assert mutate.tests_running(line3, coverage) == ["test_m.py::test_b"]
    line2 = mutate.Mutant(1, "negate", 2, 7, 0, 0, "x", "not x")
    assert set(mutate.tests_running(line2, coverage)) == {"test_m.py::test_a", "test_m.py::test_b"}

    first = tmp_path / "first.json"
    first.write_text(json.dumps(["test_m.py::test_c", "test_m.py::test_b"]))
    out = _run_plugin(tmp_path, MUTATE_FIRST=str(first))
    order = [line.split(" ")[0] for line in out.splitlines() if " PASSED" in line]
    assert order == ["test_m.py::test_c", "test_m.py::test_b", "test_m.py::test_a"]


_scores_spec = importlib.util.spec_from_file_location("mutation_scores", os.path.join(REPO, "tools",
                                                                                     "mutation_scores.py"))
scores = importlib.util.module_from_spec(_scores_spec)
_scores_spec.loader.exec_module(scores)


def _mutant(mutant_id, line, status, original="a < 1", col=4):
    return {"id": mutant_id, "line": line, "col": col, "operator": "compare", "original": original,
            "replacement": "a >= 1", "status": status}


def _report(name, date, mutants, sha="s1", only=None, complete=True, selected=None, module="albert_tf/train/x.py"):
    return {"file": name, "module": module, "date": date, "commit": "c" * 40, "source_sha256": sha, "only": only,
            "lines": None, "complete": complete, "mutants": mutants, "mutants_selected": selected or len(mutants)}


def test_scores_take_each_mutants_newest_outcome_matched_across_edits():
    base = _report("x.json", "2026-12-04T10:00", [_mutant(0, 5, "killed"), _mutant(1, 9, "survived"),
                                                  _mutant(2, 20, "survived"), _mutant(3, 30, "survived", "f(a,\n b)"),
                                                  _mutant(4, 40, "survived", "g")])
    rerun = _report("x.rerun.json", "2026-12-04T11:00", [_mutant(1, 9, "killed")], only="1")
    # the module edited: two lines up; the same change twice, matched by the nearest line; a call re-wrapped
    edited = _report("x.edited.json", "2026-12-04T12:00",
                     [_mutant(0, 18, "killed"), _mutant(1, 28, "killed", "f(a, b)"), _mutant(2, 38, "survived", "g")],
                     sha="s2", only="2,3,4")
    earlier = _report("x.old.json", "2026-12-04T09:00", [_mutant(4, 40, "killed", "g")])  # before the base: not read
    score = scores.module_score([rerun, base, edited, earlier])
    assert (score["base"], score["mutants"], score["killed"], score["stopped"]) == ("x.json", 5, 4, None)
    assert score["later"] == ["x.rerun.json", "x.edited.json"]


def test_the_same_change_twice_on_a_line_is_told_apart_by_its_column():
    base = _report("x.json", "2026-12-04T10:00", [_mutant(0, 5, "survived", col=4), _mutant(1, 5, "survived", col=30)])
    # the module edited: the line indented by four, moved down one
    edited = _report("x.e.json", "2026-12-04T11:00", [_mutant(7, 6, "killed", col=34)], sha="s2", only="7")
    assert [m["id"] for m in scores.module_score([base, edited])["unjudged"]] == [0]


def test_a_later_run_is_matched_by_the_occurrence_of_its_change_before_the_nearest_line():
    """Eight lines added above the first of two identical changes: by line the re-run's first would be taken for
    the base's second; by occurrence (the first such change of the module) it is the first."""
    base = _report("x.json", "2026-12-04T10:00", [_mutant(0, 130, "survived"), _mutant(1, 139, "survived")])
    rerun = _report("x.r.json", "2026-12-04T11:00", [{**_mutant(5, 138, "killed"), "occurrence": 0}], sha="s2",
                    only="5")
    assert [m["id"] for m in scores.module_score([base, rerun])["unjudged"]] == [1]
    source = "a = x < 1\nb = y\nc = x < 1\n"
    found = [m for m in mutate.generate_mutants(source) if m.original == "x < 1" and m.operator == "compare"]
    assert [mutate.occurrences(found)[m.id] for m in found] == [0, 1]


def _rows(source, status, commit, only=None):
    made = mutate.generate_mutants(source)
    rows = [{"id": m.id, "line": m.line, "col": m.col, "operator": m.operator, "original": m.original,
             "replacement": m.replacement, "status": status} for m in made if only is None or m.line in only]
    return {"module": "m.py", "commit": commit, "source_sha256": commit, "only": only and ",".join(
        str(r["id"]) for r in rows), "lines": None, "complete": True, "mutants": rows, "mutants_selected": len(rows)}


def test_a_later_run_is_matched_on_a_line_of_the_same_text_and_rewritten_code_leaves_the_counts():
    """A line removed above two identical changes: the re-run's kill on the line `b = g(True)` is credited to the
    base's mutant on that line, not to the first `True` of the module (line `a`, gone at HEAD, which leaves the
    counts whether killed or not)."""
    base_source, later_source = "a = f(True)\nb = g(True)\nc = h(True)\n", "b = g(True)\nc = h(True)\n"
    sources = {"b" * 40: base_source, "d" * 40: later_source, "HEAD": later_source}
    base = {**_rows(base_source, "survived", "b" * 40), "file": "m.json", "date": "2026-12-04T10:00"}
    rerun = {**_rows(later_source, "killed", "d" * 40, only={1}), "file": "m.r.json", "date": "2026-12-04T11:00"}
    assert [m["operator"] for m in rerun["mutants"]] == ["statement", "boolean"]
    score = scores.module_score([base, rerun], source_of=lambda commit, module: sources[commit])
    assert (score["mutants"], score["killed"], score["gone"]) == (4, 2, 2)
    assert [m["line"] for m in score["unjudged"]] == [3, 3]
    unknown = scores.module_score([base, rerun], source_of=lambda commit, module: None)  # no git: as before
    assert (unknown["mutants"], unknown["gone"]) == (6, 0)


def test_survivor_ids_are_the_unjudged_survivors_numbered_as_the_tool_numbers_the_module_at_head():
    """Line `a` removed since the base run and line `b`'s mutants killed by a re-run: what is left to run again is
    line `c`'s two mutants, ids 2 and 3 of the module at HEAD, then only 2 once its boolean mutant is judged."""
    base_source, later_source = "a = f(True)\nb = g(True)\nc = h(True)\n", "b = g(True)\nc = h(True)\n"
    sources = {"b" * 40: base_source, "d" * 40: later_source, "HEAD": later_source}
    base = {**_rows(base_source, "survived", "b" * 40), "file": "m.json", "date": "2026-12-04T10:00"}
    rerun = {**_rows(later_source, "killed", "d" * 40, only={1}), "file": "m.r.json", "date": "2026-12-04T11:00"}
    at_head = {m.id: (m.line, m.operator) for m in mutate.generate_mutants(later_source)}
    assert (at_head[2], at_head[3]) == ((2, "statement"), (2, "boolean"))
    ids = scores.survivor_ids([base, rerun], source_of=lambda commit, module: sources[commit])
    assert ids == [2, 3]
    judged = [{"line": 3, "col": 6, "operator": "boolean", "original": "True", "replacement": "(False)", "why": "x"}]
    assert scores.survivor_ids([base, rerun], judged, source_of=lambda commit, module: sources[commit]) == [2]
    with pytest.raises(ValueError, match="m.py: its source"):
        scores.survivor_ids([base, rerun], source_of=lambda commit, module: None)


def test_the_tool_and_the_scores_count_occurrences_alike():
    """The scores count the occurrences of an older report themselves: the same rule as the tool's records."""
    with open(os.path.join(REPO, "albert_tf", "data", "glue", "datasets.py"), encoding="utf-8") as f:
        found = mutate.generate_mutants(f.read())
    rows = [{"id": m.id, "line": m.line, "col": m.col, "operator": m.operator, "original": m.original,
             "replacement": m.replacement} for m in found]
    assert scores.base_occurrences(_report("x.json", "2026-12-04T10:00", rows)) == mutate.occurrences(found)
    assert max(mutate.occurrences(found).values()) > 0  # some change made more than once


def test_a_stopped_run_is_the_base_only_without_a_complete_one_and_scores_what_it_ran():
    complete = _report("x.json", "2026-12-04T10:00", [_mutant(0, 5, "killed"), _mutant(1, 9, "survived")])
    stopped = _report("x.after.json", "2026-12-04T11:00", [_mutant(1, 9, "killed")], complete=False, selected=2)
    assert scores.module_score([complete, stopped])["killed"] == 2  # the later run's outcome counts
    alone = scores.module_score([stopped])
    assert (alone["mutants"], alone["killed"], alone["stopped"]) == (1, 1, (1, 2))


def _judged(line, original="a < 1", col=4):
    return {"line": line, "col": col, "operator": "compare", "original": original, "replacement": "a >= 1",
            "why": "symmetric"}


def test_judged_equivalents_match_survivors_only_and_the_rest_are_stale():
    base = _report("x.json", "2026-12-04T10:00", [_mutant(0, 5, "killed"), _mutant(1, 9, "survived"),
                                                  _mutant(2, 20, "survived"), _mutant(3, 30, "survived", "b")])
    # line 11: the survivor at line 9 (nearest); line 6: only the killed mutant 0 makes it (a survivor at 20 does
    # too, but is claimed by the third entry); "c": no mutant makes that change
    judged = [_judged(11), _judged(21), _judged(6), _judged(30, "c")]
    score = scores.module_score([base], judged)
    assert (score["mutants"], score["killed"], score["equivalent"]) == (4, 1, 2)
    assert [m["id"] for m in score["unjudged"]] == [3]
    assert [(e["line"], e["original"]) for e in score["stale"]] == [(6, "a < 1"), (30, "c")]


def test_the_package_table_sums_its_modules_and_names_those_with_no_report():
    module = {"module": "albert_tf/train/x.py", "base": "x.json", "commit": "c" * 7, "lines": None, "stopped": None,
              "mutants": 4, "killed": 2, "equivalent": 1, "unjudged": [_mutant(7, 12, "survived")], "later": [],
              "stale": [{**_judged(3), "line": 3}], "gone": 5}
    text = scores.markdown([module], {"albert_tf/train/": ["albert_tf/train/x.py", "albert_tf/train/y.py"]})
    assert "| `albert_tf/train/x.py` | x.json (ccccccc) | 0 | 4 | 2 | 1 | 50% | 67% | 5 |" in text
    assert "| `albert_tf/train/` | 1 of 2 | 4 | 2 | 1 | 50% | 67% | y.py |" in text
    assert "| `albert_tf/serving/` | 0 of 0 | 0 | 0 | 0 | - | - | none |" in text
    unjudged, stale = text.split("Survivors neither killed")[1].split("that match no survivor")
    assert "- `albert_tf/train/x.py` line 12 compare `a < 1` -> `a >= 1`" in unjudged
    assert "- `albert_tf/train/x.py` line 3 compare `a < 1` -> `a >= 1`" in stale


def test_the_core_modules_leave_out_aliases_of_imports_only():
    modules = scores.core_modules()
    assert "albert_tf/fileio.py" in modules["albert_tf/fileio.py"]
    assert "albert_tf/data/natural_order.py" in modules["albert_tf/data/"]
    everything = [m for found in modules.values() for m in found]
    assert "albert_tf/data/pretraining_data.py" not in everything  # a re-export alias: nothing to mutate
    assert not [m for m in everything if m.endswith("__init__.py")]


def test_the_stored_judgements_each_name_a_survivor_with_a_reason():
    """tools/mutation_equivalents.json against the stored reports: every entry has a reason and matches a
    surviving mutant (a judgement left after its mutant was killed, or after the code changed, fails here)."""
    judged = scores.read_equivalents()
    reports = scores.read_reports()
    assert judged and set(judged) <= set(reports)
    for module, entries in judged.items():
        assert all(e["why"].strip() for e in entries), module
        assert scores.module_score(reports[module], entries)["stale"] == [], module
