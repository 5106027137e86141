"""The mutation score of each module and core package, from the stored reports of tools/mutate.py (docs/testing.md).

    python tools/mutation_scores.py > bench/results/mutation/scores.md

For each module: its base report is its latest complete run over the whole module (or over a line range), else its
latest run at all (a run stopped part-way scores the mutants it reached). Every later report of the module (its
survivors run again after new tests, a later full run) then gives each mutant it ran its newest outcome, matched by
id when the module's source is the same, else by operator and source text on a line of the same text: the k-th
mutant making that change on such a line in the module at each report's commit (read with git, its mutants made
again by tools/mutate.py), so lines added or removed elsewhere move nothing; where that line's text changed too,
the same occurrence of the change in the module (the k-th, as tools/mutate.py records it), or for older reports the
nearest line, then column. A base mutant whose change on a line of that text exists no more in the module at HEAD
(the code removed or rewritten since the base run) is "gone since": left out of the counts, killed or not, so the
score is that of the code as it is. A mutant counts as killed when its newest outcome is killed or timeout. Catches seen
only by hand are not counted: only stored runs are.

A surviving mutant that a maintainer has judged equivalent (no input can tell it from the module: a symmetric
call's arguments swapped, a default always overridden) is listed with the reason in tools/mutation_equivalents.json,
matched the same way (operator, text, nearest line and column). The score less those judged is the goal's (95%); a
judgement that matches no survivor any more (the mutant was killed, or the code changed) is listed as stale.
With --unjudged, the survivors not judged are printed as entries for that file, `why` left empty; with
--survivor-ids MODULE, their ids in the module at HEAD (or --at COMMIT), for tools/mutate.py's --only.
"""

import argparse
import ast
import collections
import functools
import glob
import importlib.util
import json
import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORTS = os.path.join(REPO, "bench", "results", "mutation")
EQUIVALENTS = os.path.join(REPO, "tools", "mutation_equivalents.json")
# The core packages of the goal (docs/testing.md), by path prefix.
PACKAGES = ("albert_tf/text/", "albert_tf/data/", "albert_tf/fileio.py", "albert_tf/checkpoints/", "albert_tf/train/",
            "albert_tf/serving/")
KILLED = ("killed", "timeout")


def _change_key(mutant):
    """What a mutant changes: operator and the source text before and after, its whitespace collapsed (a statement
    re-wrapped over other lines, or indented into a block, is the same change)."""
    return mutant["operator"], " ".join(mutant["original"].split()), " ".join(mutant["replacement"].split())


def base_occurrences(report):
    """{id: k} of a report's mutants, each the k-th making its change in the module (as tools/mutate.py records
    it), or None where that cannot be known: an older report without the field that is not a complete run over the
    whole module."""
    mutants = report["mutants"]
    if all("occurrence" in m for m in mutants):
        return {m["id"]: m["occurrence"] for m in mutants}
    if report.get("lines") or report.get("only") or not report["complete"]:
        return None
    seen, found = collections.Counter(), {}
    for m in sorted(mutants, key=lambda m: (m["line"], m["col"])):
        found[m["id"]] = seen[_change_key(m)]
        seen[_change_key(m)] += 1
    return found


@functools.cache
def _mutate():
    """tools/mutate.py, which makes the mutants (its ids and order are the reports')."""
    spec = importlib.util.spec_from_file_location("mutate", os.path.join(REPO, "tools", "mutate.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def source_at(commit, module):
    """The text of `module` at `commit` (None where git cannot show it)."""
    shown = subprocess.run(["git", "-C", REPO, "show", f"{commit}:{module}"], capture_output=True, text=True,
                           check=False)
    return shown.stdout if shown.returncode == 0 else None


def line_keys(commit, module, source_of=source_at):
    """{(line, col, operator, original, replacement): (change, text of its line, k)} of every change tools/mutate.py
    can make to the module at `commit`, k counting those making that change on a line of that text, in source
    order; None where the source cannot be read."""
    source = source_of(commit, module)
    if source is None:
        return None
    lines = source.splitlines()
    seen, keys = collections.Counter(), {}
    for _, _, operator, line, col, original, replacement in _mutate().changes(source):
        where = (line, col, operator, original, replacement)
        if where not in keys:
            key = (_change_key({"operator": operator, "original": original, "replacement": replacement}),
                   lines[line - 1].strip())
            keys[where] = key + (seen[key],)
            seen[key] += 1
    return keys


def _keys_of(report, source_of):
    """{id: line key} of a report's mutants (None where its source cannot be read or does not make them)."""
    keys = line_keys(report["commit"], report["module"], source_of)
    if keys is None:
        return None
    found = {m["id"]: keys.get((m["line"], m["col"], m["operator"], m["original"], m["replacement"]))
             for m in report["mutants"]}
    return None if None in found.values() else found


def _match(base, mutant, same_source, occurrence=None):
    """The id in `base` ({id: mutant}) of a later report's `mutant`: the same id when the module's source is the
    same, else the base mutant making the same change (`_change_key`): the same occurrence of it when both are
    known (`occurrence`: the base's, from `base_occurrences`), else the one nearest its line, then column."""
    if same_source:
        return mutant["id"] if mutant["id"] in base else None
    change = _change_key(mutant)
    candidates = [m for m in base.values() if _change_key(m) == change]
    if not candidates:
        return None
    if occurrence is not None and "occurrence" in mutant:
        same = [m for m in candidates if occurrence.get(m["id"]) == mutant["occurrence"]]
        if same:
            return same[0]["id"]
    return min(candidates, key=lambda m: (abs(m["line"] - mutant["line"]), abs(m["col"] - mutant["col"])))["id"]


def _is_full(report):
    return not report.get("only")


def module_score(reports, judged=(), source_of=source_at):
    """{module, base (file name), commit, lines, stopped, mutants, killed, equivalent, gone, unjudged, stale, later}:
    one module's score from its reports (dicts with a `file` key added); `judged` are its entries of the equivalents
    file. `unjudged` are the survivors no entry names, `stale` the entries naming no survivor. `source_of(commit,
    module)` gives a module's text at a report's commit and at "HEAD" (git's, by default): the base's mutants whose
    change on a line of that text no longer exists at HEAD (the code removed or rewritten since) are `gone`, left
    out of the counts whether they were killed or not."""
    reports = sorted(reports, key=lambda r: r["date"])
    full = [r for r in reports if _is_full(r)]
    complete = [r for r in full if r["complete"]]
    base = (complete or full or reports)[-1]
    mutants = {m["id"]: m for m in base["mutants"]}
    occurrence = base_occurrences(base)
    outcome = {i: m["status"] for i, m in mutants.items()}
    later = [r for r in reports if r["date"] > base["date"]]
    base_keys = _keys_of(base, source_of)
    by_line_key = {key: i for i, key in (base_keys or {}).items()}
    for report in later:
        same_source = report["source_sha256"] == base["source_sha256"]
        keys = _keys_of(report, source_of) if by_line_key and not same_source else None
        for mutant in report["mutants"]:
            found = by_line_key.get(keys[mutant["id"]]) if keys else None
            if found is None:
                found = _match(mutants, mutant, same_source, occurrence)
            if found is not None:
                outcome[found] = mutant["status"]
    current = line_keys("HEAD", base["module"], source_of)
    present = set() if current is None else set(current.values())
    gone = set() if current is None or base_keys is None else {i for i in outcome if base_keys[i] not in present}
    outcome = {i: status for i, status in outcome.items() if i not in gone}
    survivors = {i: mutants[i] for i, status in outcome.items() if status not in KILLED}
    equivalent, stale = set(), []
    for entry in judged:
        found = _match({i: m for i, m in survivors.items() if i not in equivalent}, entry, False, occurrence)
        if found is None:
            stale.append(entry)
        else:
            equivalent.add(found)
    return {"module": base["module"], "base": base["file"], "commit": base["commit"][:7], "lines": base.get("lines"),
            "stopped": None if base["complete"] else (len(base["mutants"]), base["mutants_selected"]),
            "mutants": len(outcome), "killed": len(outcome) - len(survivors), "equivalent": len(equivalent),
            "gone": len(gone),
            "unjudged": [{**m, "occurrence": occurrence[i]} if occurrence else m
                         for i, m in sorted(survivors.items()) if i not in equivalent], "stale": stale,
            "later": [r["file"] for r in later]}


def survivor_ids(reports, judged=(), commit="HEAD", source_of=source_at):
    """The ids, as tools/mutate.py numbers the module's mutants at `commit`, of its survivors neither killed nor
    judged (`module_score`'s `unjudged`), each found by its change on a line of the same text: what `mutate.py
    --commit <commit> --only <ids>` runs again once tests for them are written. A survivor whose change the module
    at `commit` no longer makes (the code rewritten since) has no id and is left out."""
    score = module_score(reports, judged, source_of)
    base = next(r for r in reports if r["file"] == score["base"])
    base_keys = _keys_of(base, source_of)
    source = source_of(commit, base["module"])
    if base_keys is None or source is None:
        raise ValueError(f"{base['module']}: its source at {base['commit'][:7]} or {commit} cannot be read with git")
    made = {(m.line, m.col, m.operator, m.original, m.replacement): m.id for m in _mutate().generate_mutants(source)}
    id_of = {key: made.get(where) for where, key in line_keys(commit, base["module"], source_of).items()}
    return sorted(i for i in (id_of.get(base_keys[m["id"]]) for m in score["unjudged"]) if i is not None)


def read_reports(folder=REPORTS):
    reports = collections.defaultdict(list)
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
        report["file"] = os.path.basename(path)
        reports[report["module"]].append(report)
    return reports


def read_equivalents(path=EQUIVALENTS):
    """{module: [entries]} of the judged-equivalent survivors; none when the file is absent."""
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def package_of(module):
    return next((p for p in PACKAGES if module.startswith(p)), None)


def _percent(killed, mutants):
    return f"{100 * killed / mutants:.0f}%" if mutants else "-"


def _change(entry):
    original, replacement = (" ".join(entry[k].split()) for k in ("original", "replacement"))
    return f"line {entry['line']} {entry['operator']} `{original[:60]}` -> `{replacement[:40]}`"


def markdown(scores, modules_in_packages):
    """The tables: per module, then per core package (modules with no stored report named)."""
    lines = ["| module | base report (commit) | later reports | mutants | killed | judged equivalent | score | "
             "score less equivalents | gone since |", "|---|---|---|---|---|---|---|---|---|"]
    for s in sorted(scores, key=lambda s: s["module"]):
        where = f" lines {s['lines']}" if s["lines"] else ""
        stopped = f", stopped at {s['stopped'][0]} of {s['stopped'][1]}" if s["stopped"] else ""
        lines.append(f"| `{s['module']}`{where} | {s['base']} ({s['commit']}{stopped}) | {len(s['later'])} | "
                     f"{s['mutants']} | {s['killed']} | {s['equivalent']} | {_percent(s['killed'], s['mutants'])} | "
                     f"{_percent(s['killed'], s['mutants'] - s['equivalent'])} | {s['gone']} |")
    lines += ["", "| package | modules with a report | mutants run | killed | judged equivalent | score | "
              "score less equivalents | modules with no report |", "|---|---|---|---|---|---|---|---|"]
    by_package = collections.defaultdict(list)
    for s in scores:
        by_package[package_of(s["module"])].append(s)
    for package in PACKAGES:
        done = by_package.get(package, [])
        names = {s["module"] for s in done}
        missing = sorted(m for m in modules_in_packages.get(package, ()) if m not in names)
        mutants, killed = sum(s["mutants"] for s in done), sum(s["killed"] for s in done)
        equivalent = sum(s["equivalent"] for s in done)
        shown = ", ".join(m[len(package):] for m in missing) or "none"
        lines.append(f"| `{package}` | {len(done)} of {len(done) + len(missing)} | {mutants} | {killed} | "
                     f"{equivalent} | {_percent(killed, mutants)} | {_percent(killed, mutants - equivalent)} | "
                     f"{shown} |")
    unjudged = [(s["module"], m) for s in sorted(scores, key=lambda s: s["module"]) for m in s["unjudged"]]
    if unjudged:
        lines += ["", "Survivors neither killed nor judged equivalent (each wants a test, or a judgement):", ""]
        lines += [f"- `{module}` {_change(mutant)}" for module, mutant in unjudged]
    stale = [(s["module"], e) for s in sorted(scores, key=lambda s: s["module"]) for e in s["stale"]]
    if stale:
        lines += ["", "Judgements in tools/mutation_equivalents.json that match no survivor (stale):", ""]
        lines += [f"- `{module}` {_change(entry)}" for module, entry in stale]
    return "\n".join(lines)


def _only_imports(source):
    """Whether a module is only a docstring and imports (an alias re-exporting another): nothing to mutate."""
    body = ast.parse(source).body
    return all(isinstance(node, (ast.Import, ast.ImportFrom)) or
               (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)) for node in body)


def core_modules(repo=REPO):
    """{package: [module paths]} of the core packages' modules (not the `__init__.py` files, which re-export, nor
    an alias module of imports only)."""
    found = collections.defaultdict(list)
    for path in sorted(glob.glob(os.path.join(repo, "albert_tf", "**", "*.py"), recursive=True)):
        module = os.path.relpath(path, repo)
        package = package_of(module)
        if package and not module.endswith("__init__.py"):
            with open(path, encoding="utf-8") as f:
                if not _only_imports(f.read()):
                    found[package].append(module)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--reports", default=REPORTS, help="the folder of the JSON reports")
    parser.add_argument("--equivalents", default=EQUIVALENTS, help="the judged-equivalent survivors (JSON)")
    parser.add_argument("--unjudged", action="store_true",
                        help="print the survivors not judged, as entries for the equivalents file, and stop")
    parser.add_argument("--survivor-ids", metavar="MODULE",
                        help="print the ids at --at of MODULE's survivors not judged, for mutate.py --only, and stop")
    parser.add_argument("--at", default="HEAD", help="the commit whose mutant ids --survivor-ids gives")
    args = parser.parse_args()
    judged = read_equivalents(args.equivalents)
    if args.survivor_ids:
        reports = read_reports(args.reports).get(args.survivor_ids)
        if not reports:
            parser.error(f"--survivor-ids: no report in {args.reports} is of {args.survivor_ids}")
        print(",".join(map(str, survivor_ids(reports, judged.get(args.survivor_ids, ()), args.at))))
        return
    scores = [module_score(reports, judged.get(module, ())) for module, reports in read_reports(args.reports).items()]
    if args.unjudged:
        keys = ("line", "col", "occurrence", "operator", "original", "replacement")
        print(json.dumps({s["module"]: [{**{k: m[k] for k in keys if k in m}, "why": ""} for m in s["unjudged"]]
                          for s in sorted(scores, key=lambda s: s["module"]) if s["unjudged"]}, indent=1))
        return
    print("# command: python tools/mutation_scores.py   (from the reports in bench/results/mutation/)\n")
    print(markdown(scores, core_modules()))


if __name__ == "__main__":
    main()
