"""The low-resource comparison's plan and records (`bench_pretrain_finetune.py --train_sizes`): which labelled
examples a size fine-tunes on, how many seeds and steps it gets, and the results file that a stopped run resumes.

A subset depends on the task, its size and `--subset_seed`, never on the arm, so the pretrained and the
from-scratch arm fine-tune on the same examples. Subsets are stratified (each label keeps its share of the
training set) and nested: for one seed, the examples of a smaller size are among those of every larger one, so
a curve over sizes adds labels rather than drawing new ones.
"""

import json
import math
import os
import random

ERROR = "bench_pretrain_finetune: error: "
ALL = "all"
FEW_LABELS_BELOW = 1000  # sizes below this get SEEDS_FEW seeds, the others SEEDS_MANY
SEEDS_FEW = 5
SEEDS_MANY = 3


def size_key(n):
    """A size as it is named in flags, paths and the results: its number, or "all"."""
    return ALL if n is None else str(n)


def parse_sizes(values, flag):
    """The sizes of a list flag (numbers or "all"; None stands for all), or one line naming the flag."""
    sizes = []
    for value in values:
        value = value.strip().lower()
        try:
            n = None if value == ALL else int(value)
        except ValueError:
            raise SystemExit(f"{ERROR}--{flag} {value!r}: a size is a positive number or {ALL}") from None
        if n is not None and n <= 0:
            raise SystemExit(f"{ERROR}--{flag} {value!r}: a size is a positive number or {ALL}")
        if n in sizes:
            raise SystemExit(f"{ERROR}--{flag} lists {size_key(n)} twice")
        sizes.append(n)
    if not sizes:
        raise SystemExit(f"{ERROR}--{flag} is empty")
    return sorted(sizes, key=lambda n: math.inf if n is None else n)


def check_sizes(sizes, available, task, flag):
    """Refuses, in one line, a size larger than the `available` training examples of `task`."""
    too_large = [n for n in sizes if n is not None and n > available]
    if too_large:
        raise SystemExit(f"{ERROR}--{flag} {','.join(map(str, too_large))}: {task} has {available:,} training "
                         f"examples")


def subset_indices(labels, n, seed):
    """Ascending indices of a seeded, stratified sample of `n` of the examples whose labels are `labels` (all of
    them for n None). Each label gets its share of `n`, rounded by largest remainder; its examples are shuffled
    once per (seed, label) and taken from the front, so for one seed a smaller sample lies within a larger one."""
    if n is None:
        return list(range(len(labels)))
    if n > len(labels):
        raise ValueError(f"{n} examples asked of {len(labels)}")
    groups = {}
    for i, label in enumerate(labels):
        groups.setdefault(str(label), []).append(i)
    exact = {label: n * len(members) / len(labels) for label, members in groups.items()}
    quota = {label: math.floor(share) for label, share in exact.items()}
    by_remainder = sorted(groups, key=lambda label: (quota[label] - exact[label], label))
    for label in by_remainder[:n - sum(quota.values())]:
        quota[label] += 1
    chosen = []
    for label in sorted(groups):
        members = list(groups[label])
        random.Random(f"label-subset-{seed}-{label}").shuffle(members)
        chosen += members[:quota[label]]
    return sorted(chosen)


def write_subset(glue_dir, task, n, seed, out_dir):
    """A GLUE data folder under `out_dir` for `run_classifier --data_dir`: the train file holds the original rows of
    `subset_indices(..., n, seed)` under the header, in file order; the other splits link to `glue_dir`'s, so every
    run is evaluated on the whole dev set. Returns (the folder, the number of training examples). Rewriting it
    gives the same bytes, so each arm may call it."""
    from albert_tf.data import glue  # pylint: disable=import-outside-toplevel

    processor = glue.get_processor(task)
    source = os.path.join(glue_dir, processor.task.directory)
    train_name = processor.task.files[0]
    examples = processor.get_train_examples(source)
    keep = subset_indices([e.label for e in examples], n, seed)
    with open(os.path.join(source, train_name), encoding="utf-8", newline="") as f:
        lines = f.read().splitlines()
    header = lines[:1] if processor.task.layouts["train"].header else []
    folder = os.path.join(out_dir, f"{task}-n{size_key(n)}-seed{seed}")
    target = os.path.join(folder, processor.task.directory)
    os.makedirs(target, exist_ok=True)
    path = os.path.join(target, train_name)
    with open(path + ".tmp", "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(header + [lines[examples[i].line - 1] for i in keep]) + "\n")
    os.replace(path + ".tmp", path)
    written = processor.get_train_examples(target)
    if [(e.text_a, e.text_b, e.label) for e in written] != [(examples[i].text_a, examples[i].text_b,
                                                              examples[i].label) for i in keep]:
        raise SystemExit(f"{ERROR}{path} does not read back as the {len(keep)} chosen examples")
    for name in os.listdir(source):
        link = os.path.join(target, name)
        if name != train_name and not os.path.lexists(link):
            os.symlink(os.path.abspath(os.path.join(source, name)), link)
    return folder, len(keep)


def seeds_for_size(n, seeds):
    """The fine-tuning seeds of size `n`: the first SEEDS_FEW of `seeds` below FEW_LABELS_BELOW labels, the
    first SEEDS_MANY otherwise (all labels included); the first of them sweeps the learning rates."""
    count = SEEDS_FEW if n is not None and n < FEW_LABELS_BELOW else SEEDS_MANY
    if len(seeds) < count:
        raise SystemExit(f"{ERROR}--seeds lists {len(seeds)} seeds; {size_key(n)} labels need {count}")
    return list(seeds[:count])


def steps_for_size(n, full, epochs, min_steps):
    """Fine-tuning settings at `n` labels, from the task's settings on all of them (`full`: steps, batch_size,
    warmup_steps, eval_every): `epochs` passes over the n examples, at least `min_steps` and at most the full
    run's steps; warm-up the same fraction, and as many evaluations, the last at the final step."""
    steps = full["steps"]
    if n is not None:
        steps = min(steps, max(min_steps, math.ceil(epochs * n / full["batch_size"])))
    evaluations = max(1, full["steps"] // full["eval_every"])
    unit = 10 if steps >= 10 * evaluations else 1  # round intervals, so that a training loop runs many steps
    every = math.ceil(steps / evaluations / unit) * unit
    steps = every * evaluations
    return {"steps": steps, "batch_size": full["batch_size"], "eval_every": every,
            "warmup_steps": round(steps * full["warmup_steps"] / full["steps"])}


def choose_rate(grid, sweep, score="dev_accuracy"):
    """The rate of `grid` with the best final dev accuracy (the records' `score`) in `sweep` ({rate name: record}),
    leaving out rates whose run ended predicting one class (`constant_final`) unless every rate did. Returns (rate,
    one-class rates)."""
    one_class = [lr for lr in grid if sweep[f"{lr:g}"]["constant_final"]]
    eligible = [lr for lr in grid if lr not in one_class] or grid
    return max(eligible, key=lambda lr: sweep[f"{lr:g}"][score]), one_class


def next_rate(rate, up):
    """The neighbour of `rate` on the 1-3-10 ladder of learning rates (1e-4, 3e-4, 1e-3, ...), above or below."""
    exponent = math.floor(math.log10(rate) + 1e-9)
    ladder = [m * 10.0 ** e for e in (exponent - 1, exponent, exponent + 1) for m in (1, 3)]
    return min((r for r in ladder if r > rate * 1.01), default=rate * 10) if up else max(
        (r for r in ladder if r < rate / 1.01), default=rate / 10)


def widened_grid(grid, chosen):
    """The sweep `grid` with one more rate beyond each edge that an arm's chosen rate sits on (its best may lie
    outside), or None when every chosen rate is inside. `chosen` maps arm -> rate; every arm is then swept at the
    new rate too, so the arms stay tuned alike."""
    grid = sorted(grid)
    wider = list(grid)
    if any(rate == grid[-1] for rate in chosen.values()):
        wider.append(float(f"{next_rate(grid[-1], True):.3g}"))
    if any(rate == grid[0] for rate in chosen.values()):
        wider.insert(0, float(f"{next_rate(grid[0], False):.3g}"))
    return wider if wider != grid else None


def sweep_rates(grid, arms, run, widen, log=print):
    """The learning-rate sweep of a size: `run(arm, rate)` (a record with dev_accuracy, constant_final) for every
    arm at every rate of `grid`, each arm's rate chosen (`choose_rate`), and while a chosen rate is on the grid's
    edge, every arm run at the next rate beyond it too (`widened_grid`), at most `widen` times. Returns (the grid
    swept, {arm: {rate name: record}}, {arm: chosen rate}, {arm: its one-class rates})."""
    grid = sorted(grid)
    sweep, chosen, one_class = {arm: {} for arm in arms}, {}, {}
    for widening in range(widen + 1):
        for rate in grid:
            for arm in arms:
                if f"{rate:g}" not in sweep[arm]:
                    sweep[arm][f"{rate:g}"] = run(arm, rate)
        for arm in arms:
            chosen[arm], one_class[arm] = choose_rate(grid, sweep[arm])
        wider = widened_grid(grid, chosen)
        if wider is None or widening == widen:
            break
        log(f"  a chosen rate is at the sweep's edge: every arm swept at "
            f"{', '.join(f'{rate:g}' for rate in wider if rate not in grid)} too")
        grid = wider
    return grid, sweep, chosen, one_class


class ResultStore:
    """The results JSON of a low-resource run, rewritten atomically (a temporary file renamed into place, so a
    killed run leaves the previous file) after every fine-tuning run. A new run with the same `settings` resumes
    from it: the runs it holds are read back, not run again; one with other settings is refused."""

    def __init__(self, path, settings):
        self.path = os.path.abspath(path)
        self.data = {"settings": settings, "runs": {}}
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as f:
                old = json.load(f)
            if old.get("settings") != settings:
                diff = sorted(k for k in set(old.get("settings") or {}) | set(settings)
                              if (old.get("settings") or {}).get(k) != settings.get(k))
                raise SystemExit(f"{ERROR}{self.path} holds a run with other settings ({', '.join(diff)} differ); "
                                 "write the results elsewhere")
            self.data = old

    @staticmethod
    def run_key(task, n, arm, lr, seed, factor=1):
        return "/".join([task, size_key(n), arm + (f"_x{factor}" if factor != 1 else ""), f"lr{lr:g}",
                         f"seed{seed}"])

    def get(self, key):
        """A stored run's record, or None."""
        return self.data["runs"].get(key)

    def put(self, key, record):
        """Stores a run's record and rewrites the file."""
        self.data["runs"][key] = record
        self.write()

    def write(self):
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        tmp = f"{self.path}.tmp-{os.getpid()}"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(self.data, f, indent=1, sort_keys=True)
                f.write("\n")
            os.replace(tmp, self.path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)


ARM_SETTINGS = ("albert_config", "spm_model_file", "max_seq_length", "subset_seed", "subset_epochs",
                "subset_min_steps")  # with each task's task_settings: all that an arm's run depends on but its key


def borrowed_runs(path, settings, tasks, arm, flag, root):
    """The runs of `arm` stored in another low-resource run's results at `path`, to be read back rather than run
    again: refused in one line naming `flag` when that run's subsets, steps, model or vocabulary differ from
    `settings` (then its runs are not this run's). Each record notes where it came from (`read_from`, relative to
    `root`)."""
    try:
        with open(path, encoding="utf-8") as f:
            other = json.load(f)
    except (OSError, ValueError) as err:
        raise SystemExit(f"{ERROR}{flag} {path}: {err}") from None
    theirs = other.get("settings") or {}
    differ = [k for k in ARM_SETTINGS if theirs.get(k) != settings[k]]
    differ += [f"task_settings.{t}" for t in tasks
               if (theirs.get("task_settings") or {}).get(t) != settings["task_settings"][t]]
    if differ:
        raise SystemExit(f"{ERROR}{flag} {path}: its {arm} runs were made with other settings "
                         f"({', '.join(differ)} differ)")
    source = os.path.relpath(os.path.abspath(path), root)
    return {key: dict(run, read_from=source) for key, run in (other.get("runs") or {}).items()
            if key.split("/")[2].split("_x")[0] == arm}
