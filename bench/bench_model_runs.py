r"""The tables of `bench_model.py` runs (docs/benchmarks.md), printed from the medians those runs wrote.

    python bench/bench_model_runs.py                                  # bench/figures/bench_model.json
    python bench/bench_model_runs.py --runs_json=bench/results/bench_model.json   # the latest run alone

Flags:
  --runs_json   a JSON file {"command": ..., "runs": [<what bench_model.py wrote>, ...]}, or one file that
                bench_model.py wrote (one run).

Prints two Markdown tables, one row per run and configuration: the training step (seconds, fraction of the
float32 matmul peak at the model's shapes, against keras-hub in the same precision where the run has it, and
the bfloat16 sides against their float32 step) and batch-1 inference (milliseconds and multiple of the matmul-only time). Nothing is
measured here: every figure is one `bench_model.py` printed and stored.
"""

import json
import os

import common  # first: the environment and sys.path every bench script needs

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("runs_json", os.path.join(common.REPO, "bench", "figures", "bench_model.json"),
                    "The stored bench_model.py runs.")

TRAIN_SIDES = ("albert_tf", "albert_tf-full", "albert_tf-bf16", "keras-hub", "keras-hub-bf16")
INFER_COLUMNS = (("albert_tf", "graph"), ("albert_tf", "xla"), ("albert_tf", "savedmodel"), ("keras-hub", "graph"),
                 ("keras-hub", "xla"), ("albert_tf-bf16", "graph"), ("albert_tf-bf16", "savedmodel"),
                 ("keras-hub-bf16", "graph"))


def _batch_sizes(figures):
    return sorted({int(key.rsplit("/b", 1)[1]) for key in figures if key.startswith("train/")})


def _cell(value, fmt):
    return "–" if value is None else format(value, fmt)


def training_table(runs):
    """Markdown lines: one row per run, batch size and side that has a training figure."""
    lines = ["| run | batch | side | graph s/step | of peak | × keras-hub | XLA s/step | of peak | × keras-hub "
             "| × float32 (graph) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for number, run in enumerate(runs, 1):
        figures = run["figures"]
        for batch in _batch_sizes(figures):
            for side in TRAIN_SIDES:
                graph, xla = (figures.get(f"train/{side}/{mode}/b{batch}") for mode in ("graph", "xla"))
                if graph is None and xla is None:
                    continue
                baseline = "keras-hub-bf16" if side.endswith("-bf16") else "keras-hub"
                cells = []
                for mode, figure in (("graph", graph), ("xla", xla)):
                    figure = figure or {}
                    compared = not side.startswith("keras-hub") and f"train/{baseline}/{mode}/b{batch}" in figures
                    cells += [_cell(figure.get("seconds"), ".3f"), _cell(figure.get("fraction_of_peak"), ".3f"),
                              _cell(figure.get("keras_hub_ratio") if compared else None, ".3f")]
                ratio = (graph or {}).get("float32_ratio") if side.endswith("-bf16") else None
                lines.append(f"| {number} | {batch} | {side} | " + " | ".join(cells) + f" | {_cell(ratio, '.3f')} |")
    return lines


def _infer_peak_ms(run):
    if run.get("infer_peak_seconds"):
        return 1000 * run["infer_peak_seconds"]
    for key, figure in run["figures"].items():
        if key.startswith("infer/") and figure.get("of_peak_time"):
            return 1000 * figure["seconds"] / figure["of_peak_time"]
    return None


def inference_table(runs):
    """Markdown lines: one row per run with batch-1 figures, each cell `ms (x matmul-only time)`."""
    heads = [f"{side} {mode}" for side, mode in INFER_COLUMNS]
    lines = ["| run | matmuls alone ms | chained ms | " + " | ".join(heads) + " |",
             "| --- | --- | --- | " + " | ".join("---" for _ in heads) + " |"]
    for number, run in enumerate(runs, 1):
        figures = run["figures"]
        if not any(key.startswith("infer/") for key in figures):
            continue
        peak = _infer_peak_ms(run)
        chain = run.get("infer_chain_seconds")
        cells = [_cell(peak, ".1f"), "–" if chain is None else f"{1000 * chain:.1f} ({1000 * chain / peak:.3f}×)"]
        for side, mode in INFER_COLUMNS:
            figure = figures.get(f"infer/{side}/{mode}/b1")
            if figure is None or figure.get("seconds") is None:
                cells.append("–")
            else:
                cells.append(f"{1000 * figure['seconds']:.1f} ({1000 * figure['seconds'] / peak:.3f}×)")
        lines.append(f"| {number} | " + " | ".join(cells) + " |")
    return lines


def main(argv):
    del argv
    with open(FLAGS.runs_json, encoding="utf-8") as f:
        stored = json.load(f)
    runs = stored.get("runs", [stored])
    print("\n".join(training_table(runs)))
    print()
    print("\n".join(inference_table(runs)))


if __name__ == "__main__":
    app.run(main)
