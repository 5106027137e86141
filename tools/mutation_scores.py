"""The mutation score of each module and core package, from the stored reports of tools/mutate.py (docs/testing.md).

    python tools/mutation_scores.py > bench/results/mutation/scores.md

For each module: its base report is its latest complete run over the whole module (or over a line range), else its
latest run at all (a run stopped part-way scores the mutants it reached). Every later report of the module (its
survivors run again after new tests, a later full run) then gives each mutant it ran its newest outcome, matched by
id when the module's source is the same, else by operator, source text and column (the nearest line), since lines
move as a module is edited. A mutant counts as killed when its newest outcome is killed or timeout. Catches seen
only by hand are not counted: only stored runs are.
"""

import argparse
import collections
import glob
import json
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORTS = os.path.join(REPO, "bench", "results", "mutation")
# The core packages of the goal (docs/testing.md), by path prefix.
PACKAGES = ("albert_tf/text/", "albert_tf/data/", "albert_tf/fileio.py", "albert_tf/checkpoints/", "albert_tf/train/",
            "albert_tf/serving/")
KILLED = ("killed", "timeout")


def _match(base, mutant, same_source):
    """The id in `base` ({id: mutant}) of a later report's `mutant`: the same id when the module's source is the
    same, else the base mutant making the same change (operator, source text, column) nearest its line."""
    if same_source:
        return mutant["id"] if mutant["id"] in base else None
    change = (mutant["operator"], mutant["original"], mutant["replacement"], mutant["col"])
    candidates = [m for m in base.values() if (m["operator"], m["original"], m["replacement"], m["col"]) == change]
    if not candidates:
        return None
    return min(candidates, key=lambda m: abs(m["line"] - mutant["line"]))["id"]


def _is_full(report):
    return not report.get("only")


def module_score(reports):
    """{module, base (file name), commit, lines, stopped, mutants, killed, later}: one module's score from its
    reports (dicts with a `file` key added)."""
    reports = sorted(reports, key=lambda r: r["date"])
    full = [r for r in reports if _is_full(r)]
    complete = [r for r in full if r["complete"]]
    base = (complete or full or reports)[-1]
    mutants = {m["id"]: m for m in base["mutants"]}
    outcome = {i: m["status"] for i, m in mutants.items()}
    later = [r for r in reports if r["date"] > base["date"]]
    for report in later:
        same_source = report["source_sha256"] == base["source_sha256"]
        for mutant in report["mutants"]:
            found = _match(mutants, mutant, same_source)
            if found is not None:
                outcome[found] = mutant["status"]
    return {"module": base["module"], "base": base["file"], "commit": base["commit"][:7], "lines": base.get("lines"),
            "stopped": None if base["complete"] else (len(base["mutants"]), base["mutants_selected"]),
            "mutants": len(outcome), "killed": sum(s in KILLED for s in outcome.values()),
            "later": [r["file"] for r in later]}


def read_reports(folder=REPORTS):
    reports = collections.defaultdict(list)
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
        report["file"] = os.path.basename(path)
        reports[report["module"]].append(report)
    return reports


def package_of(module):
    return next((p for p in PACKAGES if module.startswith(p)), None)


def _percent(killed, mutants):
    return f"{100 * killed / mutants:.0f}%" if mutants else "-"


def markdown(scores, modules_in_packages):
    """The tables: per module, then per core package (modules with no stored report named)."""
    lines = ["| module | base report (commit) | later reports | mutants | killed | score |",
             "|---|---|---|---|---|---|"]
    for s in sorted(scores, key=lambda s: s["module"]):
        where = f" lines {s['lines']}" if s["lines"] else ""
        stopped = f", stopped at {s['stopped'][0]} of {s['stopped'][1]}" if s["stopped"] else ""
        lines.append(f"| `{s['module']}`{where} | {s['base']} ({s['commit']}{stopped}) | {len(s['later'])} | "
                     f"{s['mutants']} | {s['killed']} | {_percent(s['killed'], s['mutants'])} |")
    lines += ["", "| package | modules with a report | mutants run | killed | score | modules with no report |",
              "|---|---|---|---|---|---|"]
    by_package = collections.defaultdict(list)
    for s in scores:
        by_package[package_of(s["module"])].append(s)
    for package in PACKAGES:
        done = by_package.get(package, [])
        names = {s["module"] for s in done}
        missing = sorted(m for m in modules_in_packages.get(package, ()) if m not in names)
        mutants, killed = sum(s["mutants"] for s in done), sum(s["killed"] for s in done)
        shown = ", ".join(m[len(package):] for m in missing) or "none"
        lines.append(f"| `{package}` | {len(done)} of {len(done) + len(missing)} | {mutants} | {killed} | "
                     f"{_percent(killed, mutants)} | {shown} |")
    return "\n".join(lines)


def core_modules(repo=REPO):
    """{package: [module paths]} of the core packages' modules (less the `__init__.py` files, which re-export)."""
    found = collections.defaultdict(list)
    for path in sorted(glob.glob(os.path.join(repo, "albert_tf", "**", "*.py"), recursive=True)):
        module = os.path.relpath(path, repo)
        package = package_of(module)
        if package and not module.endswith("__init__.py"):
            found[package].append(module)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--reports", default=REPORTS, help="the folder of the JSON reports")
    args = parser.parse_args()
    scores = [module_score(reports) for reports in read_reports(args.reports).values()]
    print("# command: python tools/mutation_scores.py   (from the reports in bench/results/mutation/)\n")
    print(markdown(scores, core_modules()))


if __name__ == "__main__":
    main()
