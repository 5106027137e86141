r"""Does sentence order come with more distinct documents? A data-scaling curve at equal steps.

The recipe search (bench_pretrain_recipe.py) lifted held-out masked-LM accuracy to 0.265, but held-out
sentence-order accuracy never left its chance band, while earlier runs ordered their own training passages with
0.81-0.86 accuracy: the model learns the order of passages it has seen, not a rule that carries to new text
(docs/pretraining_evidence.md). This script measures how that depends on the number of distinct training documents,
so that the curve shows what it would take:

    python -m bench.bench_sop_scaling --work_dir=/root/albert_sop_scaling   # resumable: rerun after a stop
    python -m bench.bench_sop_scaling --work_dir=/tmp/sop_smoke --corpus=shipped --extra_text= --fractions=0.5,1 \
      --unit_steps=8 --eval_every=4 --dupe_factor=2 --results_json=/tmp/sop_smoke/sop.json \
      --plot=/tmp/sop_smoke/sop.png                                        # every stage in minutes

1. The text: the recipe search's (`corpus()`: the books but `--eval_book`, plus the unlabelled task text).
   `--heldout_share` of its documents (drawn by a hash of `--split_seed`, the file and the document's index) are
   held out: held-out documents of the same sources, beside the held-out book (evaluated without those of SST-2
   and MRPC, whose documents are groups of unrelated sentences: no order to find).
2. Arms: for each of `--fractions`, the share of the other documents it trains on, nested (an arm's documents are
   all in every larger arm). Each arm's records are made with `--dupe_factor` / fraction copies, so every arm has
   about as many training instances (new segment pairs and masks in each copy), and only the number of distinct
   documents differs.
3. Every arm trains the recipe search's winner (LAMB 1e-2, warm-up 2.5 %, `30k-clean.model`, sequence 64, stored
   masks, batch 64) for the same `--unit_steps` (in steps of batch 64 at sequence 128, as the search counts them;
   5,760: 47.2 M tokens, the winner's budget), each in a child process that resumes its checkpoints. At every
   checkpoint it evaluates three sets: the held-out book (as the search), the held-out documents, and a sample of
   its own training records (the first ones of its file: records it trains on, so their sentence-order accuracy
   measures what it has learnt by heart).
4. `--results_json` (default bench/results/sop_scaling.json) after every arm: the command, the split, each arm's
   documents, tokens, records and curves (masked-LM and sentence-order accuracy on each set, by tokens), each set's
   chance (the share of its more frequent sentence-order label) and noise band (2 binomial sd), and each arm's CPU
   time; `--plot` (bench/figures/sop_scaling.png).
"""
import dataclasses
import hashlib
import json
import math
import os
import subprocess
import sys
import time

from bench import bench_pretrain_recipe as recipe  # first: the environment every benchmark needs (bench.support.common)
from bench.support import common, unlabelled_text

from absl import app, flags, logging

FLAGS = flags.FLAGS

BATCH = recipe.BATCH
WINNER = recipe.candidate("lamb", 1e-2, warmup=0.025, vocab=recipe.BASE_VOCAB, seq=64, masking="stored")
PROBES = ("heldout_docs", "train_sample")  # evaluated beside the held-out book, their metrics prefixed so


def define_flags():
    """The flags (defined when run as a script: importing the module, as its test does, defines none)."""
    flags.DEFINE_string("work_dir", "/root/albert_sop_scaling", "Where every stage writes (resumable).")
    recipe.define_corpus_flags()
    flags.DEFINE_list("fractions", ["0.125", "0.25", "0.5", "1"], "Shares of the training documents, one arm each.")
    flags.DEFINE_float("heldout_share", 0.05, "Share of the documents held out (evaluated, never trained on).")
    flags.DEFINE_integer("split_seed", 1, "Seed of the documents' draw (held out, and which arms take them).")
    flags.DEFINE_integer("dupe_factor", 15, "create_pretraining_data --dupe_factor of the whole text (an arm with a "
                         "fraction f of it: dupe_factor / f, rounded).")
    flags.DEFINE_integer("unit_steps", 5760, "Every arm's budget, in steps of batch 64 at sequence 128.")
    flags.DEFINE_integer("eval_every", 160, "Evaluation interval, in the same units.")
    flags.DEFINE_integer("train_sample", 704, "Training records evaluated (the first ones of the arm's file).")
    flags.DEFINE_string("results_json", os.path.join(common.RESULTS_DIR, "sop_scaling.json"), "The results.")
    flags.DEFINE_string("plot", os.path.join(common.FIGURES_DIR, "sop_scaling.png"), "The figure.")
    flags.DEFINE_integer("parallel", 1, "Arms trained at once.")
    flags.DEFINE_integer("threads_per_arm", 1, "TensorFlow threads of each arm's process (the results do not depend "
                         "on it; its CPU time does).")
    flags.DEFINE_string("train_arm", None, "(internal) train this arm in this process.")


# -- 1. the split (pure logic, tests/test_bench_sop_scaling.py) ------------------------------------------------------

def read_documents(path):
    """The documents of a pretraining text file: runs of non-blank lines (a blank line ends a document)."""
    docs, current = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                current.append(line.rstrip("\n"))
            elif current:
                docs.append(current)
                current = []
    if current:
        docs.append(current)
    return docs


def draw(seed, name, index):
    """A number in [0, 1) fixed by the seed, a file's name and a document's index in it."""
    digest = hashlib.sha256(f"{seed}:{name}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


def place(u, heldout_share, fraction):
    """Where a document with draw `u` goes: "heldout", "train" (in the arm of `fraction`) or None. An arm's
    documents are in every larger arm's."""
    if u < heldout_share:
        return "heldout"
    return "train" if (u - heldout_share) / (1.0 - heldout_share) < fraction else None


def arm_name(fraction):
    return f"docs-{fraction:g}"


def dupe_factor_of(fraction, dupe_factor):
    """Copies of an arm's text: as many instances as `dupe_factor` copies of the whole text make."""
    return max(1, round(dupe_factor / fraction))


def write_documents(path, docs):
    """Writes `docs` in the pretraining format (one sentence a line, a blank line after each), atomically."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.writelines("".join(line + "\n" for line in doc) + "\n" for doc in docs)
    os.replace(path + ".tmp", path)


def split(train_files, out_dir, fractions, heldout_share, seed):
    """Writes `<out_dir>/heldout/<file>` and `<out_dir>/<arm>/<file>` for every training file (once: split.json
    is written last); returns {"heldout": {...}, arm: {...}} with each part's files and document count."""
    done = os.path.join(out_dir, "split.json")
    if os.path.exists(done):
        with open(done, encoding="utf-8") as f:
            return json.load(f)
    parts = {"heldout": {"files": [], "documents": 0}}
    parts.update({arm_name(f): {"fraction": f, "files": [], "documents": 0} for f in fractions})
    for path in train_files:
        name = os.path.basename(path)
        docs = read_documents(path)
        draws = [draw(seed, name, i) for i in range(len(docs))]
        chosen = {"heldout": [d for d, u in zip(docs, draws) if u < heldout_share]}
        for f in fractions:
            chosen[arm_name(f)] = [d for d, u in zip(docs, draws) if place(u, heldout_share, f) == "train"]
        for part, kept in chosen.items():
            if kept:
                out = os.path.join(out_dir, part, name)
                write_documents(out, kept)
                parts[part]["files"].append(out)
                parts[part]["documents"] += len(kept)
    with open(done + ".tmp", "w", encoding="utf-8") as f:
        json.dump(parts, f, indent=1)
    os.replace(done + ".tmp", done)
    return parts


def with_order(files):
    """`files` but the text of unlabelled_text.ORDERLESS sources (documents of unrelated sentences)."""
    orderless = {recipe.extra_file_name(source) for source in unlabelled_text.ORDERLESS}
    return [f for f in files if os.path.basename(f) not in orderless]


# -- 2. records ------------------------------------------------------------------------------------------------------

def make_records(files, path, dupe_factor):
    """create_pretraining_data over `files` into `path` (sequence 64, 10 masked positions); returns its counts."""
    from albert_tf.data.pretraining import PretrainingConfig, create_pretraining_data

    seq = WINNER["seq"]
    config = PretrainingConfig(max_seq_length=seq, max_predictions_per_seq=recipe.max_predictions(seq),
                               masked_lm_prob=recipe.MASKED_LM_PROB, dupe_factor=dupe_factor)
    stats = create_pretraining_data(",".join(files), [path], spm_model_file=recipe.SPM_30K, config=config,
                                    num_workers=1)
    return {"instances": stats.instances, "tokens": stats.tokens, "documents": stats.documents,
            "dupe_factor": dupe_factor}


def take_records(source, path, count):
    """Copies the first `count` records of `source` to `path`."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    with tf.io.TFRecordWriter(path + ".tmp") as writer:
        for raw in tf.data.TFRecordDataset(source).take(count).as_numpy_iterator():
            writer.write(raw)
    os.replace(path + ".tmp", path)


def with_stats(counts, path):
    """`counts` with the evaluation's size (whole batches), its sentence-order chance and noise band."""
    n = counts["instances"] // BATCH * BATCH
    stats = recipe.eval_set_stats(path, recipe.SPM_30K, recipe.max_predictions(WINNER["seq"]), n)
    chance = stats["sentence_order_majority"]
    noise = 2 * math.sqrt(chance * (1 - chance) / max(n, 1))
    return {**counts, **stats, "evaluated": n, "sentence_order_chance_band": [chance - noise, chance + noise]}


def data(work_dir):
    """Every file the arms need, made once (stamped by data.json): {split, eval: {set: path}, arms: {...}}."""
    stamp = os.path.join(work_dir, "data.json")
    if os.path.exists(stamp):
        with open(stamp, encoding="utf-8") as f:
            return json.load(f)
    fractions = [float(f) for f in FLAGS.fractions]
    train_files, book = recipe.corpus(work_dir)
    parts = split(train_files, os.path.join(work_dir, "split"), fractions, FLAGS.heldout_share, FLAGS.split_seed)
    records = os.path.join(work_dir, "records")
    os.makedirs(records, exist_ok=True)
    sets = {}
    for name, files in (("book", book), ("heldout_docs", with_order(parts["heldout"]["files"]))):
        path = os.path.join(records, f"{name}.tfrecord")
        recipe.log(f"records {name}: {len(files)} files, dupe 1")
        sets[name] = {"path": path, **with_stats(make_records(files, path, 1), path)}
    arms = {}
    for fraction in fractions:
        name = arm_name(fraction)
        train = os.path.join(records, name, "train.tfrecord")
        os.makedirs(os.path.dirname(train), exist_ok=True)
        dupe = dupe_factor_of(fraction, FLAGS.dupe_factor)
        recipe.log(f"records {name}: {parts[name]['documents']} documents, dupe {dupe}")
        counts = make_records(parts[name]["files"], train, dupe)
        sample = os.path.join(records, name, "train_sample.tfrecord")
        take_records(train, sample, FLAGS.train_sample)
        sample_counts = with_stats({"instances": min(FLAGS.train_sample, counts["instances"])}, sample)
        arms[name] = {"fraction": fraction, "documents": parts[name]["documents"], "train": train,
                      "train_counts": counts, "train_sample": {"path": sample, **sample_counts}}
    result = {"split": {k: {"documents": v["documents"], "files": len(v["files"])} for k, v in parts.items()},
              "eval": sets, "arms": arms}
    with open(stamp + ".tmp", "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    os.replace(stamp + ".tmp", stamp)
    recipe.log(f"data: {json.dumps(result['split'])}")
    return result


# -- 3. one arm (a child process) ----------------------------------------------------------------------------------

def train_arm(work_dir, name):
    """Trains arm `name` for the whole budget (resuming its checkpoints), evaluating the three sets at every
    checkpoint (eval_history.json: the book's metrics as they are, the others prefixed by their set)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads_per_arm)
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.threads_per_arm)
    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel
    from albert_tf.tasks.pretraining import PretrainingParams, PretrainingTask
    from albert_tf.train import callbacks, runner  # pylint: disable=import-outside-toplevel

    files = data(work_dir)
    probes = {"heldout_docs": files["eval"]["heldout_docs"], "train_sample": files["arms"][name]["train_sample"]}

    class PretrainingWithProbes(PretrainingTask):
        """The pretraining task evaluating the held-out book and, beside it, each probe set."""

        def primary_metric(self, params):
            return "masked_lm_accuracy"

        def evaluate(self, model, params, strategy):
            results = super().evaluate(model, params, strategy)
            for probe, info in probes.items():
                probe_params = dataclasses.replace(params, eval_input_file=info["path"],
                                                   max_eval_steps=info["evaluated"] // BATCH)
                results.update({f"{probe}/{k}": v for k, v in super().evaluate(model, probe_params, strategy).items()})
            cost.record(callbacks.global_step(model))
            return results

    seq = WINNER["seq"]
    config = AlbertConfig.from_json_file(recipe.model_config(work_dir, WINNER["vocab"], recipe.SPM_30K))
    steps = recipe.steps_at(FLAGS.unit_steps, seq)
    every = recipe.steps_at(FLAGS.eval_every, seq)
    book = files["eval"]["book"]
    params = PretrainingParams(
        albert_config=config, input_file=files["arms"][name]["train"], eval_input_file=book["path"],
        output_dir=os.path.join(work_dir, "runs", name), max_seq_length=seq,
        max_predictions_per_seq=recipe.max_predictions(seq), do_train=True, do_eval=True, train_batch_size=BATCH,
        eval_batch_size=BATCH, optimizer=WINNER["optimizer"], learning_rate=WINNER["learning_rate"],
        num_train_steps=steps, num_warmup_steps=round(WINNER["warmup"] * steps), save_checkpoints_steps=every,
        keep_checkpoint_max=1, iterations_per_loop=every, max_eval_steps=book["evaluated"] // BATCH,
        masked_lm_budget=0.0, spm_model_file=recipe.SPM_30K, log_every=every)
    cost = common.CallCost(params.output_dir)
    outcome = runner.run(PretrainingWithProbes(), params)
    cost.record(outcome["step"])
    if outcome["step"] != steps:
        raise SystemExit(f"bench_sop_scaling: error: {name} stopped at step {outcome['step']}, not {steps}")


def start_child(work_dir, name, log_path):
    """Starts training one arm in a child process (its output appended to the log); returns the Popen."""
    args = common.module_command("bench.bench_sop_scaling", f"--work_dir={work_dir}", f"--train_arm={name}")
    args += [a for a in sys.argv[1:] if not a.startswith(("--work_dir", "--train_arm", "--parallel"))]
    threads = str(FLAGS.threads_per_arm)
    env = common.child_env(TF_NUM_INTRAOP_THREADS=threads, TF_NUM_INTEROP_THREADS=threads, OMP_NUM_THREADS=threads)
    with open(log_path, "a", encoding="utf-8") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env,  # pylint: disable=consider-using-with
                                preexec_fn=recipe.die_with_parent)


# -- 4. results and figure -----------------------------------------------------------------------------------------

SETS = {"book": "", "heldout_docs": "heldout_docs/", "train_sample": "train_sample/"}


def arm_result(work_dir, name, arm):
    """An arm's curves (by tokens; one entry per evaluation, each set's masked-LM and sentence-order accuracy),
    its cost and its last evaluation."""
    run_dir = os.path.join(work_dir, "runs", name)
    history = recipe.eval_history(run_dir)
    curve = []
    for step in sorted(history):
        r = history[step]
        point = {"step": step, "tokens": step * BATCH * WINNER["seq"]}
        for key, prefix in SETS.items():
            for metric in ("masked_lm_accuracy", "masked_lm_loss", "sentence_order_accuracy", "sentence_order_loss"):
                if prefix + metric in r:
                    point[f"{key}_{metric}"] = r[prefix + metric]
        curve.append(point)
    counts = arm["train_counts"]
    return {"fraction": arm["fraction"], "documents": arm["documents"], "train_records": counts,
            "passes": (curve[-1]["step"] * BATCH / counts["instances"]) if curve and counts["instances"] else None,
            "train_sample_chance_band": arm["train_sample"]["sentence_order_chance_band"],
            "cpu_seconds": common.CallCost.total(run_dir)["cpu_seconds"], "curve": curve, "final": curve[-1] if curve else None}


def write_results(work_dir, files, results, started):
    steps = recipe.steps_at(FLAGS.unit_steps, WINNER["seq"])
    figures = {
        "what": "held-out sentence order against the number of distinct training documents, at equal steps "
                "(bench/bench_sop_scaling.py)",
        "recipe": WINNER, "steps": steps, "tokens_per_arm": steps * BATCH * WINNER["seq"],
        "settings": {"fractions": [float(f) for f in FLAGS.fractions], "heldout_share": FLAGS.heldout_share,
                     "split_seed": FLAGS.split_seed, "dupe_factor": FLAGS.dupe_factor,
                     "eval_every_steps": recipe.steps_at(FLAGS.eval_every, WINNER["seq"]),
                     "eval_book": FLAGS.eval_book, "extra_text": FLAGS.extra_text, "corpus": FLAGS.corpus,
                     "threads_per_arm": FLAGS.threads_per_arm},
        "split": files["split"],
        "eval_sets": {k: {kk: v[kk] for kk in ("instances", "evaluated", "sentence_order_majority",
                                               "sentence_order_chance_band", "documents")}
                      for k, v in files["eval"].items()},
        "arms": results,
        "complete": len(results) == len(files["arms"]) and all(
            r["final"] and r["final"]["step"] == steps for r in results.values()),
        "started": started}
    common.write_result(figures, FLAGS.results_json)
    try:
        plot(figures, FLAGS.plot)
    except ImportError as err:
        recipe.log(f"no plot ({err})")


def plot(figures, path):
    """Top: each set's sentence-order accuracy by tokens, one line per arm, the set's chance band shaded. Bottom:
    the held-out book's masked-LM accuracy by tokens, each set's last sentence-order accuracy against the arm's
    number of documents, and the held-out documents' masked-LM accuracy by tokens."""
    import matplotlib  # pylint: disable=import-outside-toplevel

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    fig, axes = plt.subplots(2, 3, figsize=(16, 9), dpi=80)
    arms = sorted(figures["arms"].items(), key=lambda kv: kv[1]["fraction"])
    colours = plt.get_cmap("viridis")
    titles = {"book": "held-out book", "heldout_docs": "held-out documents", "train_sample": "training records"}
    for col, key in enumerate(SETS):
        ax = axes[0][col]
        for i, (name, arm) in enumerate(arms):
            pts = [p for p in arm["curve"] if f"{key}_sentence_order_accuracy" in p]
            ax.plot([p["tokens"] / 1e6 for p in pts], [p[f"{key}_sentence_order_accuracy"] for p in pts], "o-", ms=2,
                    color=colours(i / max(len(arms) - 1, 1)), label=f"{name} ({arm['documents']} documents)")
            if key == "train_sample":
                ax.axhspan(*arm["train_sample_chance_band"], color="grey", alpha=0.08, lw=0)
        if key != "train_sample":
            ax.axhspan(*figures["eval_sets"][key]["sentence_order_chance_band"], color="grey", alpha=0.2, lw=0)
        ax.set(title=f"sentence order: {titles[key]}", xlabel="tokens processed (millions)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    for ax, key in ((axes[1][0], "book"), (axes[1][2], "heldout_docs")):
        for i, (name, arm) in enumerate(arms):
            pts = [p for p in arm["curve"] if f"{key}_masked_lm_accuracy" in p]
            ax.plot([p["tokens"] / 1e6 for p in pts], [p[f"{key}_masked_lm_accuracy"] for p in pts], "o-", ms=2,
                    color=colours(i / max(len(arms) - 1, 1)), label=name)
        ax.set(title=f"masked LM: {titles[key]}", xlabel="tokens processed (millions)")
        ax.grid(alpha=0.3)
    ax = axes[1][1]
    finals = [(arm["documents"], arm["final"]) for _, arm in arms if arm["final"]]
    for key in SETS:
        ax.plot([d for d, _ in finals], [f.get(f"{key}_sentence_order_accuracy") for _, f in finals], "o-",
                label=titles[key])
    ax.set(title="sentence order at the last evaluation", xlabel="training documents", xscale="log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    common.save_figure(fig, path)


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    work_dir = os.path.abspath(FLAGS.work_dir)
    os.makedirs(work_dir, exist_ok=True)
    if FLAGS.train_arm:
        train_arm(work_dir, FLAGS.train_arm)
        return
    files = data(work_dir)
    settings_path = os.path.join(work_dir, "settings.json")
    settings = {"fractions": FLAGS.fractions, "heldout_share": FLAGS.heldout_share, "split_seed": FLAGS.split_seed,
                "dupe_factor": FLAGS.dupe_factor, "unit_steps": FLAGS.unit_steps, "eval_every": FLAGS.eval_every,
                "train_sample": FLAGS.train_sample, "corpus": FLAGS.corpus, "eval_book": FLAGS.eval_book,
                "extra_text": sorted(FLAGS.extra_text)}
    if os.path.exists(settings_path):
        with open(settings_path, encoding="utf-8") as f:
            stored = json.load(f)
        if stored["settings"] != settings:
            diff = sorted(k for k in settings if stored["settings"].get(k) != settings[k])
            raise SystemExit(f"bench_sop_scaling: error: {work_dir} holds a run with other settings "
                             f"({', '.join(diff)} differ); use another --work_dir")
        started = stored["started"]
    else:
        started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        with open(settings_path, "w", encoding="utf-8") as f:
            json.dump({"settings": settings, "started": started}, f, indent=1)
    log_path = os.path.join(work_dir, "arms.log")
    steps = recipe.steps_at(FLAGS.unit_steps, WINNER["seq"])
    arms = dict(sorted(files["arms"].items(), key=lambda kv: kv[1]["fraction"]))
    results = {name: arm_result(work_dir, name, arm) for name, arm in arms.items()}
    pending = [n for n, r in results.items() if not (r["final"] and r["final"]["step"] == steps)]
    running = {}
    while pending or running:
        while pending and len(running) < FLAGS.parallel:
            name = pending.pop(0)
            recipe.log(f"{name}: {arms[name]['documents']} documents, training to step {steps} (output in {log_path})")
            running[name] = start_child(work_dir, name, log_path)
        time.sleep(5)
        for name, child in list(running.items()):
            if child.poll() is None:
                continue
            del running[name]
            result = results[name] = arm_result(work_dir, name, arms[name])
            final = result["final"] or {}
            recipe.log(f"{name}" + (f": FAILED (exit status {child.returncode}; see {log_path})" if child.returncode
                                    else "") + f": step {final.get('step')}; sentence order book "
                       f"{final.get('book_sentence_order_accuracy', float('nan')):.4f}, held-out documents "
                       f"{final.get('heldout_docs_sentence_order_accuracy', float('nan')):.4f}, training records "
                       f"{final.get('train_sample_sentence_order_accuracy', float('nan')):.4f}; masked LM (book) "
                       f"{final.get('book_masked_lm_accuracy', float('nan')):.4f}; {result['cpu_seconds'] / 60:.1f} "
                       "CPU min")
            write_results(work_dir, files, results, started)
    write_results(work_dir, files, results, started)

if __name__ == "__main__":
    define_flags()
    app.run(main)
