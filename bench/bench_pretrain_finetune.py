r"""Does pretraining here give a better model? Pretrain a small ALBERT on public-domain books, fine-tune it on
SST-2 and on a sentence-pair task, and compare with the same model trained from random initialisation on the
same fine-tuning budget, over several seeds.

    pip install -r bench/requirements.txt                      # matplotlib, for the plot
    python bench/bench_pretrain_finetune.py                    # the run the README quotes (~1.5 h on 2 cores)
    python bench/bench_pretrain_finetune.py --work_dir=/tmp/pf_smoke --pretrain_steps=20 --sst2_steps=20 \
      --pair_steps=20 --seeds=1                                # a smoke test of every stage (a few minutes)

What it runs, each stage with the library's own code, in `--work_dir` (resumable: run the same command again and
every stage continues where it stopped, or is read back when done; a stage whose settings changed is refused):

1. Corpus. `--corpus=shared` (default): the NLTK Project Gutenberg selection in `--gutenberg_dir`
   (`../shared/data/corpus/gutenberg/`, 13 public-domain books, 5.9 MB), whole books converted to the input
   format (one sentence per line, a blank line between documents) by `tools/make_shipped_corpus.py`'s functions.
   `--corpus=shipped`: the excerpts in `data/corpus/gutenberg-*.txt` (six books, 0.5 MB). The book
   `--eval_book` is held out for the pretraining evaluation.
2. Records: `albert_tf.data.pretraining.create_pretraining_data` (MLM + SOP, `--max_seq_length`,
   `--max_predictions_per_seq` 20, `--dupe_factor`) with `data/30k-clean.model`.
3. Pretraining: `albert_tf.tasks.pretraining` (`PretrainingParams`, the runner, the original's objective, LAMB,
   linear warm-up then linear decay) of `--albert_config_file` for `--pretrain_steps` of `--pretrain_batch_size`.
   With `--masked_lm_budget` > 0 (default 0.15) new masks are drawn on every pass over the records (online
   masking). Every `--pretrain_eval_every` steps the checkpoint is evaluated on the held-out book's records
   (masked-LM and sentence-order accuracy; `eval_history.json`), printed as the run goes.
4. Fine-tuning: `albert_tf.tasks.classification.run_classifier` on SST-2 (the full 67,349-sentence train set
   from `--glue_dir`; dev 872) and on `--pair_task` (RTE or MRPC, full train sets), for each seed of `--seeds`,
   once from the final pretraining checkpoint (`--init_checkpoint`) and once from random initialisation, with
   the same steps, batch size, warm-up and checkpoint interval; the learning rates are `--pretrained_lr` and
   `--scratch_lr` (per task: `--sst2_*` / `--pair_*`). Every saved checkpoint is evaluated on dev
   (`eval_history.json`). Reported per run: dev accuracy of the final checkpoint (the headline: nothing chosen
   on dev) and of the best checkpoint (chosen on dev, optimistic); per arm the mean, the sample standard
   deviation and the range over seeds; and the gap of the means.
5. A PNG (`--plot`): the pretraining curves (held-out MLM and SOP accuracy against the step) and the dev-accuracy
   curves of the pretrained and from-scratch runs of each task. All figures also go to `results.json`.

The verdict line uses: gap of the means minus 2 points, against the combined seed spread
sqrt(sd_pretrained^2 + sd_scratch^2).

Flags (defaults are the settings of the run the README quotes):
  --work_dir             where everything is written (default /tmp/albert_pretrain_finetune)
  --corpus               shared | shipped (see 1.); --gutenberg_dir, --eval_book
  --albert_config_file   the model (default data/albert_config_tiny.json: 4 layers, H=128, E=64, 30k vocab)
  --max_seq_length, --dupe_factor, --masked_lm_budget
  --pretrain_steps, --pretrain_batch_size, --pretrain_lr, --pretrain_warmup_steps, --pretrain_eval_every,
  --pretrain_eval_batches (held-out batches of 64 per evaluation; 0: the whole held-out book)
  --seeds                comma-separated fine-tuning seeds
  --sst2_steps, --sst2_batch_size, --sst2_warmup_steps, --sst2_eval_every
  --pair_task            rte | mrpc; --pair_steps, --pair_batch_size, --pair_warmup_steps, --pair_eval_every
  --pretrained_lr, --scratch_lr    fine-tuning learning rates of the two arms (both tasks)
  --glue_dir             GLUE folder with SST-2/ and the pair task (default ../shared/data/glue)
  --skip_pair            SST-2 only
  --pretrain_only        stop after pretraining (run it ahead; the next run reads it back)
  --plot                 the PNG (default <work_dir>/pretrain_finetune.png)
"""

import glob
import json
import math
import os
import statistics
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tools"))

from absl import app, flags, logging  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("work_dir", "/tmp/albert_pretrain_finetune", "Where every stage writes (resumable).")
flags.DEFINE_enum("corpus", "shared", ["shared", "shipped"], "shared: whole books of --gutenberg_dir; shipped: "
                                                             "the excerpts in data/corpus/.")
flags.DEFINE_string("gutenberg_dir", os.path.join(REPO, "..", "shared", "data", "corpus", "gutenberg"),
                    "The raw NLTK Gutenberg selection (for --corpus=shared).")
flags.DEFINE_string("eval_book", "chesterton-thursday", "Book held out for the pretraining evaluation.")
flags.DEFINE_string("albert_config_file", os.path.join(REPO, "data", "albert_config_tiny.json"), "The model.")
flags.DEFINE_string("spm_model_file", os.path.join(REPO, "data", "30k-clean.model"), "SentencePiece model.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of pretraining and fine-tuning.")
flags.DEFINE_integer("dupe_factor", 1, "create_pretraining_data --dupe_factor (training records).")
flags.DEFINE_float("masked_lm_budget", 0.15, "Online masking (new masks every pass); 0: the stored masks.")
flags.DEFINE_integer("pretrain_steps", 2000, "Pretraining steps.")
flags.DEFINE_integer("pretrain_batch_size", 32, "Pretraining batch size.")
flags.DEFINE_float("pretrain_lr", 0.005, "Pretraining (LAMB) peak learning rate.")
flags.DEFINE_integer("pretrain_warmup_steps", 200, "Pretraining warm-up steps.")
flags.DEFINE_integer("pretrain_eval_every", 250, "Checkpoint + held-out evaluation interval (steps).")
flags.DEFINE_integer("pretrain_eval_batches", 0, "Held-out batches of 64 per evaluation (0: the whole book).")
flags.DEFINE_list("seeds", ["1", "2"], "Fine-tuning seeds.")
flags.DEFINE_integer("sst2_steps", 2000, "SST-2 fine-tuning steps.")
flags.DEFINE_integer("sst2_batch_size", 64, "SST-2 batch size.")
flags.DEFINE_integer("sst2_warmup_steps", 200, "SST-2 warm-up steps.")
flags.DEFINE_integer("sst2_eval_every", 250, "SST-2 checkpoint + dev evaluation interval.")
flags.DEFINE_enum("pair_task", "rte", ["rte", "mrpc"], "The sentence-pair task.")
flags.DEFINE_integer("pair_steps", 800, "Pair-task fine-tuning steps.")
flags.DEFINE_integer("pair_batch_size", 32, "Pair-task batch size.")
flags.DEFINE_integer("pair_warmup_steps", 80, "Pair-task warm-up steps.")
flags.DEFINE_integer("pair_eval_every", 100, "Pair-task checkpoint + dev evaluation interval.")
flags.DEFINE_float("pretrained_lr", 2e-4, "Fine-tuning learning rate from the pretrained checkpoint.")
flags.DEFINE_float("scratch_lr", 1e-3, "Fine-tuning learning rate from random initialisation.")
flags.DEFINE_string("glue_dir", os.path.join(REPO, "..", "shared", "data", "glue"), "GLUE data folder.")
flags.DEFINE_bool("skip_pair", False, "Fine-tune on SST-2 only.")
flags.DEFINE_bool("pretrain_only", False, "Stop after pretraining (to run it ahead; the next run reads it back).")
flags.DEFINE_string("plot", None, "PNG to write (default <work_dir>/pretrain_finetune.png).")

SETTINGS_JSON = "bench_settings.json"
EVAL_BATCH = 64
ACC = "eval_accuracy"  # the dev accuracy in a classifier run's eval_history.json


def load():
    return "load average %.2f %.2f %.2f" % os.getloadavg()


def stamp(directory, settings, what):
    """Records `settings` in `directory`, or refuses a directory made with other settings (a resumed stage
    must be the same run)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, SETTINGS_JSON)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
        if old != settings:
            diff = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
            raise SystemExit(f"bench_pretrain_finetune: error: {directory} holds a {what} made with other settings "
                             f"({', '.join(diff)} differ); use another --work_dir")
    else:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(settings, f, indent=1, sort_keys=True)


# -- 1. corpus and 2. records ------------------------------------------------------------------------------------

def corpus_files(work_dir):
    """(train text files, held-out text files, description)."""
    if FLAGS.corpus == "shipped":
        books = sorted(glob.glob(os.path.join(REPO, "data", "corpus", "gutenberg-*.txt")))
        where = "data/corpus/gutenberg-*.txt (shipped excerpts)"
    else:
        import make_shipped_corpus  # pylint: disable=import-outside-toplevel  (tools/make_shipped_corpus.py)

        source = os.path.abspath(FLAGS.gutenberg_dir)
        names = sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(source, "*.txt")))
        if not names:
            raise SystemExit(f"bench_pretrain_finetune: error: --gutenberg_dir {source} holds no *.txt books")
        out = os.path.join(work_dir, "corpus")
        books = [os.path.join(out, f"gutenberg-{n}.txt") for n in names]
        if not all(os.path.exists(b) for b in books):
            make_shipped_corpus.prepare(source, out, names, bytes_per_book=0)
        where = f"{source} ({len(names)} whole books, converted by tools/make_shipped_corpus.py)"
    held = [b for b in books if os.path.basename(b) == f"gutenberg-{FLAGS.eval_book}.txt"]
    if not held:
        raise SystemExit(f"bench_pretrain_finetune: error: --eval_book {FLAGS.eval_book} is not among the books")
    return [b for b in books if b not in held], held, where


def make_records(work_dir):
    """(train record file, eval record file, eval instances); built once, reused after."""
    from albert_tf.data.pretraining import PretrainingConfig, create_pretraining_data  # pylint: disable=import-outside-toplevel

    train_books, eval_books, where = corpus_files(work_dir)
    size = sum(os.path.getsize(b) for b in train_books + eval_books)
    print(f"corpus: {where}; {size / 1e6:.2f} MB of text in the input format; held out for evaluation: "
          f"{', '.join(os.path.basename(b) for b in eval_books)}")
    directory = os.path.join(work_dir, "records")
    stamp(directory, {"corpus": FLAGS.corpus, "eval_book": FLAGS.eval_book, "max_seq_length": FLAGS.max_seq_length,
                      "dupe_factor": FLAGS.dupe_factor}, "set of records")
    counts_path = os.path.join(directory, "counts.json")
    if os.path.exists(counts_path):
        with open(counts_path, encoding="utf-8") as f:
            counts = json.load(f)
    else:
        counts = {}
        for name, books, dupe in (("train", train_books, FLAGS.dupe_factor), ("eval", eval_books, 1)):
            config = PretrainingConfig(max_seq_length=FLAGS.max_seq_length, max_predictions_per_seq=20,
                                       dupe_factor=dupe)
            stats = create_pretraining_data(
                ",".join(books), [os.path.join(directory, f"{name}.tfrecord")], spm_model_file=FLAGS.spm_model_file,
                config=config, num_workers=2)
            counts[name] = {"instances": stats.instances, "tokens": stats.tokens, "documents": stats.documents,
                            "books": len(books)}
        with open(counts_path, "w", encoding="utf-8") as f:
            json.dump(counts, f, indent=1)
    for name in ("train", "eval"):
        c = counts[name]
        print(f"records ({name}): {c['books']} books, {c['documents']} documents, {c['tokens']:,} tokens -> "
              f"{c['instances']:,} instances of length {FLAGS.max_seq_length}")
    return os.path.join(directory, "train.tfrecord"), os.path.join(directory, "eval.tfrecord"), counts


# -- 3. pretraining ----------------------------------------------------------------------------------------------

def pretrain(work_dir, train_file, eval_file, counts, config):
    """Pretrains (resuming); returns (final checkpoint prefix, {step: held-out results}, seconds)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.tasks.pretraining import PretrainingParams, PretrainingTask  # pylint: disable=import-outside-toplevel
    from albert_tf.train import runner  # pylint: disable=import-outside-toplevel

    class PretrainingWithHeldOut(PretrainingTask):
        """The pretraining task with a metric, so that the runner evaluates every saved checkpoint on the
        held-out records as it is saved (`eval_history.json`)."""

        def primary_metric(self, params):
            return "masked_lm_accuracy"

    output_dir = os.path.join(work_dir, "pretrain")
    eval_batches = FLAGS.pretrain_eval_batches or counts["eval"]["instances"] // EVAL_BATCH
    settings = {k: FLAGS[k].value for k in ("albert_config_file", "masked_lm_budget", "pretrain_steps",
                                            "pretrain_batch_size", "pretrain_lr", "pretrain_warmup_steps",
                                            "pretrain_eval_every")}
    settings["albert_config_file"] = os.path.basename(settings["albert_config_file"])
    stamp(output_dir, settings, "pretraining run")
    params = PretrainingParams(
        albert_config=config, input_file=train_file, eval_input_file=eval_file, output_dir=output_dir,
        max_seq_length=FLAGS.max_seq_length, max_predictions_per_seq=20, do_train=True, do_eval=True,
        train_batch_size=FLAGS.pretrain_batch_size, eval_batch_size=EVAL_BATCH, learning_rate=FLAGS.pretrain_lr,
        num_train_steps=FLAGS.pretrain_steps, num_warmup_steps=FLAGS.pretrain_warmup_steps,
        save_checkpoints_steps=FLAGS.pretrain_eval_every, keep_checkpoint_max=2,
        iterations_per_loop=math.gcd(50, FLAGS.pretrain_eval_every), max_eval_steps=eval_batches,
        masked_lm_budget=FLAGS.masked_lm_budget, spm_model_file=FLAGS.spm_model_file, log_every=100)
    print(f"\npretraining {os.path.basename(FLAGS.albert_config_file)} ({config.num_parameters():,} encoder "
          f"parameters): {FLAGS.pretrain_steps} steps of batch {FLAGS.pretrain_batch_size} "
          f"({FLAGS.pretrain_steps * FLAGS.pretrain_batch_size / counts['train']['instances']:.1f} passes over the "
          f"records), LAMB lr {FLAGS.pretrain_lr} (warm-up {FLAGS.pretrain_warmup_steps}, linear decay), "
          f"{'online masking ' + str(FLAGS.masked_lm_budget) if FLAGS.masked_lm_budget else 'stored masks'}; "
          f"held-out eval every {FLAGS.pretrain_eval_every} steps on {eval_batches * EVAL_BATCH} instances; {load()}")
    start = time.time()
    outcome = runner.run(PretrainingWithHeldOut(), params)
    seconds = time.time() - start
    history = {int(k): v for k, v in outcome["eval_history"].items()}
    print(f"pretraining: {outcome['step'] - outcome['start_step']} steps run in {seconds / 60:.1f} min"
          + (f" ({outcome['train_examples_per_second']:.0f} examples/s)" if "train_examples_per_second" in outcome
             else "") + f"; {load()}")
    print("  step  masked_lm_accuracy  masked_lm_loss  sentence_order_accuracy")
    for step in sorted(history):
        r = history[step]
        print(f"  {step:5d}  {r['masked_lm_accuracy']:18.4f}  {r['masked_lm_loss']:14.3f}  "
              f"{r['sentence_order_accuracy']:23.4f}")
    final = tf.train.latest_checkpoint(output_dir)
    return final, history, seconds


# -- 4. fine-tuning ----------------------------------------------------------------------------------------------

def task_settings(task):
    prefix = "sst2" if task == "sst-2" else "pair"
    return {k: FLAGS[f"{prefix}_{k}"].value for k in ("steps", "batch_size", "warmup_steps", "eval_every")}


def finetune(work_dir, task, arm, seed, init_checkpoint, config):
    """One fine-tuning run (resuming); returns {step: dev results}."""
    from albert_tf.tasks.classification import ClassifierParams, run_classifier  # pylint: disable=import-outside-toplevel

    s = task_settings(task)
    lr = FLAGS.pretrained_lr if arm == "pretrained" else FLAGS.scratch_lr
    output_dir = os.path.join(work_dir, "finetune", task, f"{arm}-seed{seed}")
    stamp(output_dir, {**s, "learning_rate": lr, "init_checkpoint": init_checkpoint}, "fine-tuning run")
    params = ClassifierParams(
        albert_config=config, output_dir=output_dir, task_name=task, data_dir=FLAGS.glue_dir,
        spm_model_file=FLAGS.spm_model_file, cached_dir=os.path.join(work_dir, "features"),
        init_checkpoint=init_checkpoint, max_seq_length=FLAGS.max_seq_length, do_train=True, do_eval=True,
        train_batch_size=s["batch_size"], eval_batch_size=128, learning_rate=lr, train_step=s["steps"],
        warmup_step=s["warmup_steps"], save_checkpoints_steps=s["eval_every"], keep_checkpoint_max=1,
        iterations_per_loop=math.gcd(50, s["eval_every"]), random_seed=seed, log_every=0)
    start = time.time()
    outcome = run_classifier(params)
    history = {int(k): v for k, v in outcome["eval_history"].items()}
    final = history[max(history)][ACC]
    best = max(r[ACC] for r in history.values())
    print(f"  {task} {arm:10s} seed {seed}: dev accuracy final {100 * final:.2f} %, best {100 * best:.2f} % "
          f"({(time.time() - start) / 60:.1f} min; {load()})", flush=True)
    return history


def spread(values):
    """(mean, sample sd, min, max) of accuracies in points."""
    points = [100 * v for v in values]
    sd = statistics.stdev(points) if len(points) > 1 else 0.0
    return statistics.mean(points), sd, min(points), max(points)


def summarise(task, runs):
    """Prints the per-seed table and summary of one task; returns the summary dict."""
    summary = {}
    print(f"\n{task}: dev accuracy (%) per seed, final checkpoint / best checkpoint")
    seeds = sorted(runs["pretrained"])
    print("  seed  pretrained       scratch")
    for seed in seeds:
        row = []
        for arm in ("pretrained", "scratch"):
            h = runs[arm][seed]
            row.append(f"{100 * h[max(h)][ACC]:6.2f} / {100 * max(r[ACC] for r in h.values()):6.2f}")
        print(f"  {seed:4d}  {row[0]}  {row[1]}")
    for which in ("final", "best"):
        stats = {}
        for arm in ("pretrained", "scratch"):
            values = [(h[max(h)][ACC] if which == "final" else max(r[ACC] for r in h.values()))
                      for h in (runs[arm][s] for s in seeds)]
            stats[arm] = spread(values)
        gap = stats["pretrained"][0] - stats["scratch"][0]
        combined = math.hypot(stats["pretrained"][1], stats["scratch"][1])
        line = "; ".join(f"{arm} {m:.2f} ± {sd:.2f} (range {lo:.2f}–{hi:.2f})"
                         for arm, (m, sd, lo, hi) in stats.items())
        print(f"  {which}: {line}; gap {gap:+.2f} points (combined seed sd {combined:.2f})")
        summary[which] = {"pretrained": stats["pretrained"], "scratch": stats["scratch"], "gap": gap,
                          "combined_sd": combined, "goal_met": gap - 2.0 > combined}
    verdict = summary["final"]
    print(f"  goal (gap of the final-checkpoint means - 2 points > combined sd): "
          f"{'MET' if verdict['goal_met'] else 'NOT met'} ({verdict['gap']:+.2f} - 2 vs {verdict['combined_sd']:.2f})")
    return summary


# -- 5. plot -----------------------------------------------------------------------------------------------------

def plot(path, pretrain_history, finetune_runs):
    import matplotlib  # pylint: disable=import-outside-toplevel

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    tasks = list(finetune_runs)
    fig, axes = plt.subplots(1, 1 + len(tasks), figsize=(4.2 * (1 + len(tasks)), 3.4), dpi=90)
    ax = axes[0]
    steps = sorted(pretrain_history)
    ax.plot(steps, [pretrain_history[s]["masked_lm_accuracy"] for s in steps], "o-", label="masked-LM accuracy")
    ax.plot(steps, [pretrain_history[s]["sentence_order_accuracy"] for s in steps], "s-",
            label="sentence-order accuracy")
    ax.set(title="pretraining (held-out book)", xlabel="pretraining step", ylabel="accuracy", ylim=(0, 1))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    for ax, task in zip(axes[1:], tasks):
        for arm, color in (("pretrained", "tab:blue"), ("scratch", "tab:red")):
            for i, (seed, h) in enumerate(sorted(finetune_runs[task][arm].items())):
                s = sorted(h)
                ax.plot(s, [100 * h[k][ACC] for k in s], "-", color=color, alpha=0.7, lw=1.2,
                        label=f"{'pretrained' if arm == 'pretrained' else 'from scratch'}" if i == 0 else None)
        ax.set(title=f"{task.upper()} dev accuracy ({len(finetune_runs[task]['scratch'])} seeds each)",
               xlabel="fine-tuning step", ylabel="dev accuracy (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    print(f"\nplot: {path} ({os.path.getsize(path) / 1e3:.0f} kB)")


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel

    work_dir = os.path.abspath(FLAGS.work_dir)
    os.makedirs(work_dir, exist_ok=True)
    print(f"bench_pretrain_finetune: work dir {work_dir}; {load()}")
    config = AlbertConfig.from_json_file(FLAGS.albert_config_file)
    start = time.time()
    train_file, eval_file, counts = make_records(work_dir)
    final, pretrain_history, pretrain_seconds = pretrain(work_dir, train_file, eval_file, counts, config)
    print(f"final pretraining checkpoint: {final}")
    if FLAGS.pretrain_only:
        return

    tasks = ["sst-2"] + ([] if FLAGS.skip_pair else [FLAGS.pair_task])
    runs, summaries = {}, {}
    for task in tasks:
        s = task_settings(task)
        print(f"\nfine-tuning {task} (train and dev from {os.path.abspath(os.path.join(FLAGS.glue_dir))}): "
              f"{s['steps']} steps of batch {s['batch_size']}, warm-up {s['warmup_steps']}, AdamW, dev eval every "
              f"{s['eval_every']} steps; lr pretrained {FLAGS.pretrained_lr}, from scratch {FLAGS.scratch_lr}; "
              f"seeds {','.join(FLAGS.seeds)}", flush=True)
        runs[task] = {"pretrained": {}, "scratch": {}}
        for seed in (int(x) for x in FLAGS.seeds):
            for arm, init in (("pretrained", final), ("scratch", None)):
                runs[task][arm][seed] = finetune(work_dir, task, arm, seed, init, config)
    for task in tasks:
        summaries[task] = summarise(task, runs[task])

    plot_path = FLAGS.plot or os.path.join(work_dir, "pretrain_finetune.png")
    plot(plot_path, pretrain_history, runs)
    results = {"flags": {f.name: f.value for f in FLAGS.get_key_flags_for_module(sys.argv[0])},
               "records": counts, "pretrain_seconds": pretrain_seconds,
               "pretrain_history": pretrain_history, "finetune": runs, "summary": summaries}
    with open(os.path.join(work_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1, default=str)
    print(f"results: {os.path.join(work_dir, 'results.json')}; total {(time.time() - start) / 60:.1f} min; {load()}")


if __name__ == "__main__":
    app.run(main)
