r"""Does pretraining here give a better model? Pretrain a small ALBERT on public-domain books, then fine-tune it
and the same model from random initialisation on SST-2 and on a sentence-pair task, each arm with its learning
rate tuned the same way, over several seeds.

    pip install -r bench/requirements.txt                      # matplotlib, for the plot
    python bench/bench_pretrain_finetune.py                    # the first run docs/pretraining_evidence.md quotes
    python bench/bench_pretrain_finetune.py --work_dir=/tmp/albert_more_text \
      --extra_text=race,squad,sst-2,mrpc --dupe_factor=15 --lr_grid=3e-5,1e-4,3e-4,1e-3,3e-3 \
      --scratch_work_dir=/tmp/albert_pretrain_finetune --results_json=bench/results/pretrain_finetune_more_text.json \
      --plot=bench/figures/pretrain_finetune_more_text.png   # its second run: twice the text, half the repeats
    python bench/bench_pretrain_finetune.py --work_dir=/tmp/pf_smoke --corpus=shipped --pretrain_steps=40 \
      --pretrain_eval_every=20 --sst2_steps=40 --sst2_eval_every=20 --pair_steps=20 --pair_eval_every=10 \
      --lr_grid=1e-4,1e-3 --seeds=1,2 --results_json=/tmp/pf_smoke/results.json \
      --plot=/tmp/pf_smoke/pretrain_finetune.png             # a smoke test of every stage (a few minutes)

What it runs, each stage with the library's own code, in `--work_dir` (resumable: run the same command again and
every stage continues where it stopped, or is read back when done; a stage whose settings changed is refused):

1. Corpus. `--corpus=shared` (default): the NLTK Project Gutenberg selection in `--gutenberg_dir`
   (`../shared/data/corpus/gutenberg/`, 13 public-domain books, 5.9 MB), whole books converted to the input
   format (one sentence per line, a blank line between documents) by `tools/make_shipped_corpus.py`'s functions.
   `--corpus=shipped`: the excerpts in `data/corpus/gutenberg-*.txt` (six books, 0.5 MB). The book
   `--eval_book` is held out for the pretraining evaluation. `--extra_text` adds unlabelled text of the task data
   to the training books (bench/unlabelled_text.py: RACE articles, SQuAD contexts, the training sentences of SST-2
   and MRPC, never a label or a dev example), each source converted by the library's `prepare_corpus`.
2. Records: `albert_tf.data.pretraining.create_pretraining_data` (MLM + SOP, `--max_seq_length`,
   `--max_predictions_per_seq` 20, `--dupe_factor` copies of the training books, each copy with its own segment
   pairs and masks, as the original's `--dupe_factor=40`) with `data/30k-clean.model`.
3. Pretraining: `albert_tf.tasks.pretraining` (`PretrainingParams`, the runner, the original's objective, LAMB,
   linear warm-up then linear decay) of `--albert_config_file` for `--pretrain_steps` of `--pretrain_batch_size`.
   With `--masked_lm_budget` > 0 new masks are drawn on every pass (online masking); the default 0 uses the
   stored masks. Every `--pretrain_eval_every` steps the checkpoint is evaluated on the held-out book's records
   (masked-LM and sentence-order accuracy and loss), printed as the run goes.
4. Fine-tuning: `albert_tf.tasks.classification.run_classifier` on SST-2 (the full 67,349-sentence train set
   from `--glue_dir`; dev 872) and on `--pair_task` (MRPC or RTE, full train sets), once from the final
   pretraining checkpoint (`--init_checkpoint`, arm "pretrained") and once from random initialisation (arm
   "scratch"), with the same steps, batch size, warm-up and evaluation interval. Both arms are tuned alike:
   a. sweep: every rate of `--lr_grid` on the first seed of `--seeds`;
   b. the rate whose final checkpoint has the best dev accuracy is chosen, per arm and task, among the runs whose
      final model predicts more than one class (bench/majority_class.py; all rates if none does);
   c. every seed of `--seeds` at the chosen rate (the first is the sweep's run, read back);
   d. the scratch arm again at `--scratch_long_factor` times the steps and warm-up (its best with more time).
   The scratch arm does not depend on the pretraining: `--scratch_work_dir` keeps its runs in (and reads them back
   from) another run's work dir.
   Every saved checkpoint is evaluated on dev. Reported per run: dev accuracy of the final checkpoint (the
   headline: nothing chosen on dev beyond the rate) and of the best checkpoint (optimistic).
5. Summary per task: mean ± sample sd over seeds of each arm; the best scratch arm (same steps or longer, by
   mean); the gap pretrained − best scratch and the combined seed sd sqrt(sd_p^2 + sd_s^2). The goals: on
   SST-2 the gap is at least 2 points and larger than the combined sd; on the pair task the gap is larger than
   the combined sd.
6. `--results_json` (default `bench/results/pretrain_finetune.json`, written after every run, `"complete":
   false` until the last) and the plot `--plot` (default `bench/figures/pretrain_finetune.png`): the held-out
   pretraining curves, the learning-rate sweeps and the dev-accuracy curves of the chosen runs.

Low-resource run (`--train_sizes`, docs/pretraining_evidence.md "Low-resource run"): the pretrained model against
the same model from random weights on few labels. The pretrained arm is a recipe search's candidate
(`--recipe_work_dir`, `--candidate`, default the search's best so far in `--recipe_results_json`; its latest
checkpoint, config and vocabulary copied once into <work_dir>/pretrained/) or, without `--recipe_work_dir`, this
script's pretraining; the scratch arm has the same config, vocabulary and sequence length. Each task is
fine-tuned on seeded, stratified, nested subsets of `--train_sizes` labels (the pair task: `--pair_train_sizes`;
"all": the whole train set), the same subsets for both arms (bench/support/label_subsets.py), for
`--subset_epochs` passes over the subset, at least `--subset_min_steps` and at most the task's steps. At each size,
steps a-d above with 5 seeds below 1,000 labels and 3 otherwise (of `--seeds`, default 1-5 here); when an arm's
chosen rate is the sweep's highest or lowest, both arms are swept one rate further on the 1-3-10 ladder (up to
`--lr_grid_widen` times), since a pretrained model's weights can be an order of magnitude larger than a fresh
one's and want larger Adam steps (docs/pretraining_evidence.md). Results go to
`--results_json` (default here bench/results/pretrain_lowresource.json, resumed: the runs it holds are read back)
and the figure to `--plot` (default here bench/figures/pretrain_lowresource.png): dev accuracy against the number
of labels. The goals: the pretrained mean >= 3 points above the best scratch arm's and beyond the combined seed sd
at 1,000 labels or fewer, and not below it with all labels. `--pretrained_checkpoint` takes the pretrained arm from
any pretraining run's output directory instead (its recorded settings.json gives the vocabulary and sequence
length). `--adapt_steps` adds task-adaptive pretraining: before fine-tuning on a task, the pretrained model trains
on with its own objective on that task's unlabelled training text (bench/support/task_adaptive.py; a twentieth of
the text held out, its masked-LM accuracy measured before and during), and fine-tunes from there.
`--scratch_results_json` reads the from-scratch arm back from an earlier run's results when its subsets, steps,
model and vocabulary are this run's, so that variants of the pretrained arm are compared with the same runs.

Flags (the defaults are the settings of the run docs/pretraining_evidence.md quotes):
  --work_dir             where everything is written (default /tmp/albert_pretrain_finetune)
  --corpus               shared | shipped (see 1.); --gutenberg_dir, --eval_book
  --extra_text           race,squad,sst-2,mrpc (any of them; see 1.); --race_dir, --squad_file
  --albert_config_file   the model (default data/albert_config_tiny.json: 4 layers, H=128, E=64, 30k vocab)
  --max_seq_length, --dupe_factor, --masked_lm_budget
  --pretrain_steps, --pretrain_batch_size, --pretrain_lr, --pretrain_warmup_steps, --pretrain_eval_every,
  --pretrain_eval_batches (held-out batches of 64 per evaluation; 0: the whole held-out book)
  --lr_grid              fine-tuning learning rates swept for both arms
  --lr_grid_widen        low-resource run: how often a sweep may widen past an arm's edge choice (default 2)
  --seeds                fine-tuning seeds (the first one sweeps)
  --scratch_work_dir     where the from-scratch runs are kept (default --work_dir)
  --scratch_long_factor  the longer scratch runs' steps, as a multiple (0: none)
  --sst2_steps, --sst2_batch_size, --sst2_warmup_steps, --sst2_eval_every
  --pair_task            mrpc | rte; --pair_steps, --pair_batch_size, --pair_warmup_steps, --pair_eval_every
  --glue_dir             GLUE folder with SST-2/ and the pair task (default ../shared/data/glue)
  --skip_pair            SST-2 only
  --pretrain_only        stop after pretraining (run it ahead; the next run reads it back)
  --results_json, --plot where the results and the PNG go
  --train_sizes, --pair_train_sizes, --subset_seed, --subset_epochs, --subset_min_steps
                         the low-resource run (above)
  --recipe_work_dir, --recipe_results_json, --candidate
                         its pretrained model from the recipe search (bench_pretrain_recipe.py)
  --pretrained_checkpoint
                         or from a pretraining run's output directory
  --adapt_steps, --adapt_lr, --adapt_dupe_factor
                         task-adaptive pretraining before fine-tuning on each task (0 steps: none)
  --scratch_results_json the from-scratch arm read back from an earlier low-resource run
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

from absl import app, flags, logging  # noqa: E402

from bench.support import common, majority_class, unlabelled_text  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("work_dir", "/tmp/albert_pretrain_finetune", "Where every stage writes (resumable).")
flags.DEFINE_enum("corpus", "shared", ["shared", "shipped"], "shared: whole books of --gutenberg_dir; shipped: "
                                                             "the excerpts in data/corpus/.")
flags.DEFINE_string("gutenberg_dir", os.path.join(REPO, "..", "shared", "data", "corpus", "gutenberg"),
                    "The raw NLTK Gutenberg selection (for --corpus=shared).")
flags.DEFINE_string("eval_book", "chesterton-thursday", "Book held out for the pretraining evaluation.")
flags.DEFINE_list("extra_text", [], "Unlabelled text pretrained on beside the books: any of "
                  f"{', '.join(unlabelled_text.SOURCES)} (bench/unlabelled_text.py).")
flags.DEFINE_string("race_dir", os.path.join(REPO, "..", "shared", "data", "race", "RACE"),
                    "RACE folder (for --extra_text=race).")
flags.DEFINE_string("squad_file", os.path.join(REPO, "..", "shared", "data", "squad", "dev-v1.1.json.zip"),
                    "SQuAD v1.1 JSON or zip (for --extra_text=squad).")
flags.DEFINE_string("albert_config_file", os.path.join(REPO, "data", "albert_config_tiny.json"), "The model.")
flags.DEFINE_string("spm_model_file", os.path.join(REPO, "data", "30k-clean.model"), "SentencePiece model.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of pretraining and fine-tuning.")
flags.DEFINE_integer("dupe_factor", 40, "create_pretraining_data --dupe_factor (training records).")
flags.DEFINE_float("masked_lm_budget", 0.0, "Online masking (new masks every pass); 0: the stored masks.")
flags.DEFINE_integer("pretrain_steps", 5000, "Pretraining steps.")
flags.DEFINE_integer("pretrain_batch_size", 64, "Pretraining batch size.")
flags.DEFINE_float("pretrain_lr", 0.005, "Pretraining (LAMB) peak learning rate.")
flags.DEFINE_integer("pretrain_warmup_steps", 500, "Pretraining warm-up steps.")
flags.DEFINE_integer("pretrain_eval_every", 500, "Checkpoint + held-out evaluation interval (steps).")
flags.DEFINE_integer("pretrain_eval_batches", 0, "Held-out batches of 64 per evaluation (0: the whole book).")
flags.DEFINE_list("lr_grid", ["1e-4", "3e-4", "1e-3", "3e-3"], "Fine-tuning learning rates swept for both arms.")
flags.DEFINE_integer("lr_grid_widen", 2, "Low-resource run: when an arm's chosen rate is the sweep's highest or "
                     "lowest, sweep both arms one rate further (1-3-10 steps), at most this many times.")
flags.DEFINE_list("seeds", ["1", "2", "3"], "Fine-tuning seeds; the first one sweeps --lr_grid.")
flags.DEFINE_integer("scratch_long_factor", 2, "The scratch arm again at this multiple of the steps (0: not).")
flags.DEFINE_integer("sst2_steps", 1500, "SST-2 fine-tuning steps.")
flags.DEFINE_integer("sst2_batch_size", 64, "SST-2 batch size.")
flags.DEFINE_integer("sst2_warmup_steps", 150, "SST-2 warm-up steps.")
flags.DEFINE_integer("sst2_eval_every", 250, "SST-2 checkpoint + dev evaluation interval.")
flags.DEFINE_enum("pair_task", "mrpc", ["mrpc", "rte"], "The sentence-pair task.")
flags.DEFINE_integer("pair_steps", 600, "Pair-task fine-tuning steps.")
flags.DEFINE_integer("pair_batch_size", 32, "Pair-task batch size.")
flags.DEFINE_integer("pair_warmup_steps", 60, "Pair-task warm-up steps.")
flags.DEFINE_integer("pair_eval_every", 100, "Pair-task checkpoint + dev evaluation interval.")
flags.DEFINE_string("glue_dir", os.path.join(REPO, "..", "shared", "data", "glue"), "GLUE data folder.")
flags.DEFINE_string("scratch_work_dir", None, "Where the from-scratch arm's fine-tuning runs are kept (default: "
                    "--work_dir). They do not depend on the pretraining: an earlier run's work dir reuses them (their "
                    "settings are checked).")
flags.DEFINE_bool("skip_pair", False, "Fine-tune on SST-2 only.")
flags.DEFINE_bool("pretrain_only", False, "Stop after pretraining (to run it ahead; the next run reads it back).")
flags.DEFINE_string("results_json", os.path.join(REPO, "bench", "results", "pretrain_finetune.json"),
                    "Where the results go (rewritten after every run).")
flags.DEFINE_string("plot", os.path.join(REPO, "bench", "figures", "pretrain_finetune.png"), "The PNG to write.")
flags.DEFINE_list("train_sizes", [], "Low-resource run: fine-tune SST-2 on these numbers of labels (seeded "
                  "subsets; 'all' for the whole train set) instead of the protocol above.")
flags.DEFINE_list("pair_train_sizes", None, "The pair task's sizes in a low-resource run (default --train_sizes).")
flags.DEFINE_integer("subset_seed", 1, "Seed of the low-resource run's label subsets (the same for both arms).")
flags.DEFINE_integer("subset_epochs", 30, "Low-resource fine-tuning steps: this many passes over the subset, at "
                     "least --subset_min_steps and at most the task's steps.")
flags.DEFINE_integer("subset_min_steps", 200, "The fewest fine-tuning steps of a low-resource subset.")
flags.DEFINE_string("recipe_work_dir", None, "Low-resource run: the pretrained arm is this recipe search's "
                    "candidate (bench_pretrain_recipe.py --work_dir) instead of this script's pretraining.")
flags.DEFINE_string("recipe_results_json", os.path.join(REPO, "bench", "results", "pretrain_recipe_search.json"),
                    "The recipe search's results (its candidates' settings, files and held-out curves).")
flags.DEFINE_float("head_only_fraction", 0.0, "Low-resource run: the pretrained arm trains the classifier alone, "
                   "its encoder held, for this share of its steps before fine-tuning the whole model (LP-FT; "
                   "run_classifier --head_only_steps); 0: plain fine-tuning. Write such a run to its own "
                   "--work_dir and --results_json (its settings differ); --scratch_work_dir reuses another run's "
                   "from-scratch arm.", lower_bound=0.0, upper_bound=0.99)
flags.DEFINE_boolean("plot_only", False, "Low-resource run: draw the figure (--plot) from --results_json as it "
                     "stands (an unfinished run's too) and stop; nothing is trained.")
flags.DEFINE_string("candidate", None, "The recipe search's candidate to fine-tune (default: its best so far).")
flags.DEFINE_string("pretrained_checkpoint", None, "Low-resource run: the pretrained arm is the latest checkpoint of "
                    "this finished pretraining run's output directory (its albert_config.json and settings.json beside "
                    "it) instead of a recipe candidate or this script's pretraining; a run short of its "
                    "num_train_steps is refused.")
flags.DEFINE_integer("adapt_steps", 0, "Low-resource run: task-adaptive pretraining: the pretrained model trained on "
                     "for this many steps on each task's unlabelled training text before it is fine-tuned on the "
                     "task (bench/support/task_adaptive.py); 0: none.", lower_bound=0)
flags.DEFINE_float("adapt_lr", 1e-3, "Task-adaptive pretraining: LAMB peak learning rate.", lower_bound=0.0)
flags.DEFINE_integer("adapt_dupe_factor", 20, "Task-adaptive pretraining: copies of the task's text in its records, "
                     "each with its own masks.", lower_bound=1)
flags.DEFINE_string("scratch_results_json", None, "Low-resource run: read the from-scratch arm's runs from this "
                    "earlier run's results when it holds them (its subsets, steps, model and vocabulary must be "
                    "these); the others are run.")

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
        from tools import make_shipped_corpus  # pylint: disable=import-outside-toplevel

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
    extra = [extra_text_file(work_dir, source) for source in FLAGS.extra_text]
    if extra:
        where += " + unlabelled text of " + ", ".join(FLAGS.extra_text)
    return [b for b in books if b not in held] + extra, held, where


def extra_text_file(work_dir, source):
    """The input-format file of one `--extra_text` source, made once by the library's `prepare_corpus` from the
    JSON Lines documents of bench/unlabelled_text.py."""
    from albert_tf.data.corpus import prepare_corpus  # pylint: disable=import-outside-toplevel

    out = os.path.join(work_dir, "corpus", f"extra-{source}.txt")
    if not os.path.exists(out):
        jsonl = out[:-4] + ".jsonl"
        unlabelled_text.write_jsonl(jsonl, unlabelled_text.documents(
            source, FLAGS.race_dir, FLAGS.squad_file, os.path.abspath(FLAGS.glue_dir)))
        stats = prepare_corpus([jsonl], out)
        print(f"extra text {source}: {stats.documents_written} documents, {stats.sentences_written} sentences, "
              f"{stats.bytes_written / 1e6:.2f} MB")
    return out


def make_records(work_dir):
    """(train record file, eval record file, eval instances); built once, reused after."""
    from albert_tf.data.pretraining import PretrainingConfig, create_pretraining_data  # pylint: disable=import-outside-toplevel

    train_books, eval_books, where = corpus_files(work_dir)
    size = sum(os.path.getsize(b) for b in train_books + eval_books)
    print(f"corpus: {where}; {size / 1e6:.2f} MB of text in the input format; held out for evaluation: "
          f"{', '.join(os.path.basename(b) for b in eval_books)}")
    directory = os.path.join(work_dir, "records")
    settings = {"corpus": FLAGS.corpus, "eval_book": FLAGS.eval_book, "max_seq_length": FLAGS.max_seq_length,
                "dupe_factor": FLAGS.dupe_factor, "global_shuffle": True}
    if FLAGS.extra_text:
        settings["extra_text"] = FLAGS.extra_text
    stamp(directory, settings, "set of records")
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
                            "books": len(books) - (len(FLAGS.extra_text) if name == "train" else 0)}
            if name == "train" and FLAGS.extra_text:
                counts[name]["extra_text"] = FLAGS.extra_text
        with open(counts_path, "w", encoding="utf-8") as f:
            json.dump(counts, f, indent=1)
    for name in ("train", "eval"):
        c = counts[name]
        extra = f" + {', '.join(c['extra_text'])}" if c.get("extra_text") else ""
        print(f"records ({name}): {c['books']} books{extra}, {c['documents']} documents, {c['tokens']:,} tokens -> "
              f"{c['instances']:,} instances of length {FLAGS.max_seq_length}")
    return os.path.join(directory, "train.tfrecord"), os.path.join(directory, "eval.tfrecord"), counts


# -- 3. pretraining ----------------------------------------------------------------------------------------------

def held_out_pretraining():
    """The pretraining task with a primary metric, so that the runner evaluates every saved checkpoint on the
    held-out records as it is saved (`eval_history.json`)."""
    from albert_tf.tasks.pretraining import PretrainingTask  # pylint: disable=import-outside-toplevel

    class PretrainingWithHeldOut(PretrainingTask):
        def primary_metric(self, params):
            return "masked_lm_accuracy"

    return PretrainingWithHeldOut()


def pretrain(work_dir, train_file, eval_file, counts, config):
    """Pretrains (resuming); returns (final checkpoint prefix, {step: held-out results})."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.tasks.pretraining import PretrainingParams  # pylint: disable=import-outside-toplevel
    from albert_tf.train import runner  # pylint: disable=import-outside-toplevel

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
    outcome = runner.run(held_out_pretraining(), params)
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
    return final, history


# -- 4. fine-tuning ----------------------------------------------------------------------------------------------

def task_settings(task, factor=1):
    """Steps, batch size, warm-up and evaluation interval of `task`; steps and warm-up times `factor`."""
    prefix = "sst2" if task == "sst-2" else "pair"
    s = {k: FLAGS[f"{prefix}_{k}"].value for k in ("steps", "batch_size", "warmup_steps", "eval_every")}
    s["steps"] *= factor
    s["warmup_steps"] *= factor
    return s


def finetune(work_dir, task, arm, lr, seed, factor, init_checkpoint, config):
    """One fine-tuning run (resuming, or read back when done); returns a record of it."""
    s = task_settings(task, factor)
    name = f"{arm}-lr{lr:g}-seed{seed}" + (f"-x{factor}" if factor != 1 else "")
    if arm == "scratch" and FLAGS.scratch_work_dir:
        work_dir = os.path.abspath(FLAGS.scratch_work_dir)
    output_dir = os.path.join(work_dir, "finetune", task, name)
    stamp(output_dir, {**s, "learning_rate": lr, "init_checkpoint": init_checkpoint}, "fine-tuning run")
    start = time.time()
    history = run_finetuning(output_dir, task, s, lr, seed, init_checkpoint, config, {
        "data_dir": FLAGS.glue_dir, "spm_model_file": FLAGS.spm_model_file, "max_seq_length": FLAGS.max_seq_length,
        "cached_dir": os.path.join(work_dir, "features")})
    run = {"arm": arm, "learning_rate": lr, "seed": seed, "steps": s["steps"], "history": history,
           "final": 100 * history[max(history)][ACC], "best": 100 * max(r[ACC] for r in history.values()),
           "constant_final": one_class(task, history),
           "train_wall_seconds": training_wall_seconds(output_dir)}
    print_run(task, name, run["final"], run["best"], run["constant_final"], start)
    return run


def run_finetuning(output_dir, task, s, lr, seed, init_checkpoint, config, data, head_only_steps=0):
    """Runs `run_classifier` (resuming, or reading a finished run back) with the settings `s` of task_settings and
    `data` (data_dir, spm_model_file, max_seq_length, cached_dir), the encoder held for `head_only_steps`; returns
    its {step: dev results}."""
    from albert_tf.tasks.classification import ClassifierParams, run_classifier  # pylint: disable=import-outside-toplevel

    params = ClassifierParams(
        albert_config=config, output_dir=output_dir, task_name=task, data_dir=data["data_dir"],
        spm_model_file=data["spm_model_file"], cached_dir=data["cached_dir"],
        init_checkpoint=init_checkpoint, max_seq_length=data["max_seq_length"], do_train=True, do_eval=True,
        train_batch_size=s["batch_size"], eval_batch_size=128, learning_rate=lr, train_step=s["steps"],
        warmup_step=s["warmup_steps"], save_checkpoints_steps=s["eval_every"], keep_checkpoint_max=1,
        iterations_per_loop=math.gcd(50, s["eval_every"]), random_seed=seed, log_every=0,
        head_only_steps=head_only_steps)
    outcome = run_classifier(params)
    return {int(k): v for k, v in outcome["eval_history"].items()}


def one_class(task, history):
    """Whether the final model of a run with this dev `history` predicts one class (bench/majority_class.py)."""
    return majority_class.predicts_one_class(
        history[max(history)], majority_class.dev_label_shares(os.path.abspath(FLAGS.glue_dir), task))


def print_run(task, name, final, best, constant, start):
    print(f"  {task} {name:28s} dev accuracy final {final:.2f} %" + (" (one class only)" if constant else "")
          + f", best {best:.2f} % ({(time.time() - start) / 60:.1f} min this call; {load()})", flush=True)


def spread(values):
    """{mean, sd (sample), min, max} of accuracies in points."""
    return {"mean": statistics.mean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
            "min": min(values), "max": max(values), "n": len(values)}


def one_class_note(rates, grid):
    """How the rate choice treated the sweep's runs that predict one class."""
    if len(rates) == len(grid):
        return " (every rate's model predicts one class: chosen among all)"
    return f" (one class only at {', '.join(f'{x:g}' for x in rates)})" if rates else ""


def tune_and_compare(work_dir, task, final_checkpoint, config, report):
    """The protocol of the module docstring, steps 4a-d and 5, for one task; fills `report[task]`."""
    from bench.support import label_subsets  # pylint: disable=import-outside-toplevel

    grid = [float(x) for x in FLAGS.lr_grid]
    seeds = [int(x) for x in FLAGS.seeds]
    inits = {"pretrained": final_checkpoint, "scratch": None}
    entry = report.setdefault(task, {"settings": task_settings(task), "sweep": {}, "chosen_lr": {}, "runs": {}})
    s = entry["settings"]
    print(f"\nfine-tuning {task} (train and dev from {os.path.abspath(FLAGS.glue_dir)}): {s['steps']} steps of batch "
          f"{s['batch_size']}, warm-up {s['warmup_steps']}, AdamW, dev eval every {s['eval_every']} steps; "
          f"sweep {', '.join(map(str, grid))} on seed {seeds[0]} for both arms, then seeds "
          f"{', '.join(map(str, seeds))} at each arm's chosen rate", flush=True)
    for lr in grid:
        for arm in inits:
            run = finetune(work_dir, task, arm, lr, seeds[0], 1, inits[arm], config)
            entry["sweep"].setdefault(arm, {})[f"{lr:g}"] = run
            write_results(report)
    entry["one_class_rates"] = {}
    for arm in inits:
        entry["chosen_lr"][arm], entry["one_class_rates"][arm] = label_subsets.choose_rate(
            grid, entry["sweep"][arm], score="final")
    print(f"  chosen rates (best final dev accuracy on seed {seeds[0]} among the models that predict more than one "
          "class): " + ", ".join(f"{arm} {lr:g}" + one_class_note(entry["one_class_rates"][arm], grid)
                                 for arm, lr in entry["chosen_lr"].items()), flush=True)
    arms = [("pretrained", 1), ("scratch", 1)] + ([("scratch", FLAGS.scratch_long_factor)]
                                                   if FLAGS.scratch_long_factor > 1 else [])
    for arm, factor in arms:
        key = arm if factor == 1 else f"{arm}_x{factor}"
        lr = entry["chosen_lr"][arm]
        entry["runs"][key] = [finetune(work_dir, task, arm, lr, seed, factor, inits[arm], config) for seed in seeds]
        write_results(report)
    summarise(task, entry)
    write_results(report)


def summarise(task, entry):
    """Per-arm spread, the best scratch arm, the gap and the goal of `task`; printed and stored in `entry`."""
    summary = {}
    print(f"\n{task}: dev accuracy (%), final checkpoint / best checkpoint, at each arm's chosen rate")
    for key, runs in entry["runs"].items():
        print(f"  {key:12s} " + "  ".join(f"seed {r['seed']}: {r['final']:6.2f} / {r['best']:6.2f}"
                                          + ("*" if r["constant_final"] else "") for r in runs))
    print("  (* the final model predicts one class for every dev example)")
    for which in ("final", "best"):
        stats = {key: spread([r[which] for r in runs]) for key, runs in entry["runs"].items()}
        scratch_keys = [k for k in stats if k.startswith("scratch")]
        best_scratch = max(scratch_keys, key=lambda k: stats[k]["mean"])
        gap = stats["pretrained"]["mean"] - stats[best_scratch]["mean"]
        combined = math.hypot(stats["pretrained"]["sd"], stats[best_scratch]["sd"])
        needed = 2.0 if task == "sst-2" else 0.0
        goal = gap >= needed and gap > combined
        summary[which] = {"arms": stats, "best_scratch": best_scratch, "gap": gap, "combined_sd": combined,
                          "goal": f"gap >= {needed:g} points and gap > combined sd", "goal_met": goal}
        line = "; ".join(f"{k} {v['mean']:.2f} ± {v['sd']:.2f}" for k, v in stats.items())
        print(f"  {which}: {line}; gap to the best scratch arm ({best_scratch}) {gap:+.2f} points, combined sd "
              f"{combined:.2f}: goal {'MET' if goal else 'NOT met'} ({summary[which]['goal']})")
    entry["summary"] = summary


# -- 5. results and plot -----------------------------------------------------------------------------------------

RESULTS = {}


def write_results(report):
    """Rewrites --results_json with everything so far (atomically: a killed run leaves the previous file)."""
    RESULTS["finetune"] = report
    RESULTS["complete"] = all("summary" in report.get(t, {}) for t in RESULTS["tasks"])
    path = os.path.abspath(FLAGS.results_json)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(RESULTS, f, indent=1, sort_keys=True)
    os.replace(path + ".tmp", path)


def training_wall_seconds(output_dir):
    """Wall seconds between the first and the last training summary of a run in `output_dir` (its TensorBoard
    events), so that a run read back or resumed still reports how long its training took."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    times = []
    for path in glob.glob(os.path.join(output_dir, "train", "events.out.tfevents.*")):
        times += [e.wall_time for e in tf.compat.v1.train.summary_iterator(path) if e.summary.value]
    return max(times) - min(times) if times else None


def plot(path, pretrain_history, report):
    import matplotlib  # pylint: disable=import-outside-toplevel

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    tasks = [t for t in report if "summary" in report[t]]
    fig, axes = plt.subplots(1, 1 + 2 * len(tasks), figsize=(4.0 * (1 + 2 * len(tasks)), 3.4), dpi=90)
    ax = axes[0]
    steps = sorted(pretrain_history)
    ax.plot(steps, [pretrain_history[s]["masked_lm_accuracy"] for s in steps], "o-", label="masked-LM accuracy")
    ax.plot(steps, [pretrain_history[s]["sentence_order_accuracy"] for s in steps], "s-",
            label="sentence-order accuracy")
    ax.set(title="pretraining (held-out book)", xlabel="pretraining step", ylabel="accuracy", ylim=(0, 1))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    colors = {"pretrained": "tab:blue", "scratch": "tab:red"}
    for i, task in enumerate(tasks):
        entry = report[task]
        ax = axes[1 + 2 * i]
        for arm, sweep in entry["sweep"].items():
            lrs = sorted(sweep, key=float)
            ax.plot([float(lr) for lr in lrs], [sweep[lr]["final"] for lr in lrs], "o-", color=colors[arm],
                    label=arm)
        ax.set(title=f"{task.upper()}: learning-rate sweep", xlabel="learning rate", ylabel="final dev accuracy (%)",
               xscale="log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax = axes[2 + 2 * i]
        for key, runs in entry["runs"].items():
            arm = "pretrained" if key == "pretrained" else "scratch"
            for j, r in enumerate(runs):
                h = r["history"]
                s = sorted(h, key=int)
                ax.plot([int(k) for k in s], [100 * h[k][ACC] for k in s], "--" if "_x" in key else "-",
                        color=colors[arm], alpha=0.7, lw=1.2, label=f"{key} (lr {r['learning_rate']:g})" if j == 0
                        else None)
        ax.set(title=f"{task.upper()} dev accuracy ({len(FLAGS.seeds)} seeds each)", xlabel="fine-tuning step",
               ylabel="dev accuracy (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    common.save_figure(fig, path)
    print(f"\nplot: {path} ({os.path.getsize(path) / 1e3:.0f} kB)")


# -- the low-resource run (--train_sizes) --------------------------------------------------------------------------

def recipe_model(work_dir):
    """The recipe search's candidate as the pretrained arm. Its latest checkpoint, config and vocabulary are
    copied once into <work_dir>/pretrained/<candidate>/ (the search may still be training it; a resumed run keeps
    the copy). Returns the model's files, its sequence length and the record of its recipe and held-out curves."""
    from bench import bench_pretrain_recipe as search_recipe  # pylint: disable=import-outside-toplevel

    results_path = os.path.abspath(FLAGS.recipe_results_json)
    with open(results_path, encoding="utf-8") as f:
        search = json.load(f)
    name = FLAGS.candidate or search["best_so_far"]
    if name not in search["candidates"]:
        raise SystemExit(f"bench_pretrain_finetune: error: --candidate {name}: not among the candidates of "
                         f"{results_path}")
    cand = search["candidates"][name]
    recipe_dir = os.path.abspath(FLAGS.recipe_work_dir)

    def resolve(path):
        return path.replace("<work_dir>", recipe_dir, 1) if path.startswith("<work_dir>") else os.path.join(REPO, path)

    spm = resolve(cand["files"]["spm_model_file"])
    copied = copy_checkpoint(resolve(cand["files"]["output_dir"]), os.path.join(work_dir, "pretrained", name),
                             resolve(cand["files"]["albert_config_file"]), spm, name)
    print(f"pretrained arm: {name} at step {copied['step']} of the recipe search (copied {copied['copied']} into "
          f"{copied['copy_dir']})")
    recipe = {"source": os.path.relpath(results_path, REPO), "search_command": search.get("command"),
              "search_date": search.get("date"), "search_complete": search.get("complete"),
              "best_so_far": search.get("best_so_far"), "search_settings": search.get("settings"),
              "candidate": {k: v for k, v in cand.items() if k not in ("curve", "files", "final")},
              "curve": cand["curve"], "checkpoint_step": copied["step"],
              "held_out_at_checkpoint": copied["held_out_at_checkpoint"], "reference": search.get("reference")}
    return {"init_checkpoint": copied["init_checkpoint"], "albert_config_file": copied["albert_config_file"],
            "spm_model_file": copied["spm_model_file"], "max_seq_length": cand["files"]["max_seq_length"],
            "max_predictions_per_seq": search_recipe.max_predictions(cand["files"]["max_seq_length"]),
            "identity": f"{name}@{copied['step']}", "recipe": recipe}


def copy_checkpoint(source_dir, copy_dir, config_file, spm_model_file, name):
    """Copies the latest checkpoint of `source_dir` with its config and vocabulary into `copy_dir`, once (a run
    that goes on training there does not change this one; a resumed run keeps the copy). Returns what was copied:
    its files, step and the held-out results the run recorded at that step."""
    import shutil  # pylint: disable=import-outside-toplevel

    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    marker = os.path.join(copy_dir, "copied.json")
    for _ in range(3):  # a run that is still training replaces its checkpoint: copy again if it went meanwhile
        if os.path.exists(marker):
            break
        source = tf.train.latest_checkpoint(source_dir)
        if source is None:
            raise SystemExit(f"bench_pretrain_finetune: error: no checkpoint of {name} in {source_dir}")
        tmp = copy_dir + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        try:
            for path in glob.glob(source + ".*"):
                shutil.copy2(path, tmp)
        except FileNotFoundError:
            continue
        shutil.copy2(config_file, os.path.join(tmp, "albert_config.json"))
        shutil.copy2(spm_model_file, os.path.join(tmp, os.path.basename(spm_model_file)))
        step = int(source.rsplit("-", 1)[1])
        history_path = os.path.join(os.path.dirname(source), "eval_history.json")
        held_out = None
        if os.path.exists(history_path):
            with open(history_path, encoding="utf-8") as f:
                held_out = json.load(f)["results"].get(str(step))
        with open(os.path.join(tmp, "copied.json"), "w", encoding="utf-8") as f:
            json.dump({"candidate": name, "checkpoint": os.path.basename(source), "step": step,
                       "spm_model_file": os.path.basename(spm_model_file), "held_out_at_checkpoint": held_out,
                       "copied": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, f, indent=1)
        shutil.rmtree(copy_dir, ignore_errors=True)
        os.replace(tmp, copy_dir)
    if not os.path.exists(marker):
        raise SystemExit(f"bench_pretrain_finetune: error: {name}'s checkpoint kept changing while it was copied")
    with open(marker, encoding="utf-8") as f:
        copied = json.load(f)
    copied.update(init_checkpoint=os.path.join(copy_dir, copied["checkpoint"]),
                  albert_config_file=os.path.join(copy_dir, "albert_config.json"),
                  spm_model_file=os.path.join(copy_dir, copied["spm_model_file"]), copy_dir=copy_dir)
    return copied


def check_finished(source_dir, num_train_steps):
    """Refuses, in one line, a pretraining run whose latest checkpoint is short of the steps its settings.json
    records: one still training (or stopped) would otherwise give the pretrained arm a mid-run checkpoint, kept
    for every later resumption."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    latest = tf.train.latest_checkpoint(source_dir)
    step = int(latest.rsplit("-", 1)[1]) if latest else 0
    if step < num_train_steps:
        raise SystemExit(f"bench_pretrain_finetune: error: --pretrained_checkpoint {source_dir}: its latest checkpoint "
                         f"is at step {step} of the {num_train_steps} its settings.json records (still training, or "
                         "stopped): give a finished run")


def checkpoint_model(work_dir):
    """The pretrained arm from a pretraining run's output directory (--pretrained_checkpoint: its latest checkpoint,
    albert_config.json and the settings.json it recorded, which give the vocabulary, sequence length and recipe;
    its eval_history.json gives the held-out curve), copied once like a recipe candidate."""
    source_dir = os.path.abspath(FLAGS.pretrained_checkpoint)
    for needed in ("albert_config.json", "settings.json"):
        path = os.path.join(source_dir, needed)
        if not os.path.exists(path):
            raise SystemExit(f"bench_pretrain_finetune: error: --pretrained_checkpoint {source_dir}: no {needed} "
                             "(the output directory of a pretraining run is expected)")
    with open(os.path.join(source_dir, "settings.json"), encoding="utf-8") as f:
        recorded = json.load(f)["settings"]
    name = os.path.basename(source_dir.rstrip("/"))
    if not os.path.exists(os.path.join(work_dir, "pretrained", name, "copied.json")):
        check_finished(source_dir, recorded["num_train_steps"])
    copied = copy_checkpoint(source_dir, os.path.join(work_dir, "pretrained", name),
                             os.path.join(source_dir, "albert_config.json"),
                             recorded.get("spm_model_file") or os.path.abspath(FLAGS.spm_model_file), name)
    print(f"pretrained arm: {source_dir} at step {copied['step']} (copied {copied['copied']} into "
          f"{copied['copy_dir']})")
    curve = []
    history_path = os.path.join(source_dir, "eval_history.json")
    if os.path.exists(history_path):
        with open(history_path, encoding="utf-8") as f:
            history = json.load(f)["results"]
        tokens = recorded["train_batch_size"] * recorded["max_seq_length"]
        curve = [{"step": int(step), "tokens": int(step) * tokens,
                  **{k: v for k, v in r.items() if k != "global_step"}}
                 for step, r in sorted(history.items(), key=lambda kv: int(kv[0])) if int(step) <= copied["step"]]
    kept = ("input_file", "eval_input_file", "max_seq_length", "max_predictions_per_seq", "train_batch_size",
            "optimizer", "learning_rate", "num_train_steps", "num_warmup_steps", "masked_lm_budget", "random_seed")
    recipe = {"source": source_dir, "settings": {k: recorded.get(k) for k in kept}, "curve": curve,
              "checkpoint_step": copied["step"], "held_out_at_checkpoint": copied["held_out_at_checkpoint"]}
    return {"init_checkpoint": copied["init_checkpoint"], "albert_config_file": copied["albert_config_file"],
            "spm_model_file": copied["spm_model_file"], "max_seq_length": recorded["max_seq_length"],
            "max_predictions_per_seq": recorded["max_predictions_per_seq"],
            "identity": f"{source_dir}@{copied['step']}", "recipe": recipe}


def own_model(work_dir, config):
    """This script's pretraining (stages 1-3) as the pretrained arm, in the form of recipe_model."""
    train_file, eval_file, counts = make_records(work_dir)
    final, history = pretrain(work_dir, train_file, eval_file, counts, config)
    settings = {k: FLAGS[k].value for k in ("corpus", "extra_text", "dupe_factor", "masked_lm_budget",
                                            "pretrain_steps", "pretrain_batch_size", "pretrain_lr",
                                            "pretrain_warmup_steps")}
    curve = [{"step": step, "tokens": step * FLAGS.pretrain_batch_size * FLAGS.max_seq_length, **history[step]}
             for step in sorted(history)]
    return {"init_checkpoint": final, "albert_config_file": os.path.abspath(FLAGS.albert_config_file),
            "spm_model_file": os.path.abspath(FLAGS.spm_model_file), "max_seq_length": FLAGS.max_seq_length,
            "max_predictions_per_seq": 20,
            "identity": f"bench_pretrain_finetune pretraining {json.dumps(settings, sort_keys=True)}",
            "recipe": {"source": "this script's pretraining (stages 1-3)", "settings": settings, "records": counts,
                       "curve": curve}}


def adapted_model(work_dir, task, model, config):
    """`model` after task-adaptive pretraining on `task`'s unlabelled training text (--adapt_steps, --adapt_lr,
    --adapt_dupe_factor; bench/support/task_adaptive.py), made once in <work_dir>/adapt/<task>/ and resumed after a
    stop. Returns (the model with the adapted checkpoint as its init_checkpoint, the record of the adaptation: its
    text, settings and masked LM on the held-out part of the text before and during it)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf import fileio  # pylint: disable=import-outside-toplevel
    from albert_tf.train import runner  # pylint: disable=import-outside-toplevel
    from bench.support import task_adaptive  # pylint: disable=import-outside-toplevel

    directory = os.path.join(work_dir, "adapt", task)
    seq, max_predictions = model["max_seq_length"], model["max_predictions_per_seq"]
    settings = {"pretrained": model["identity"], "steps": FLAGS.adapt_steps, "learning_rate": FLAGS.adapt_lr,
                "dupe_factor": FLAGS.adapt_dupe_factor, "max_seq_length": seq,
                "max_predictions_per_seq": max_predictions}
    stamp(directory, settings, "task-adaptive pretraining")
    records_dir = os.path.join(directory, "records")
    counts_path = os.path.join(records_dir, "counts.json")
    if not os.path.exists(counts_path):
        os.makedirs(records_dir, exist_ok=True)
        counts = task_adaptive.make_records(records_dir, task, os.path.abspath(FLAGS.glue_dir),
                                            model["spm_model_file"], seq, max_predictions, FLAGS.adapt_dupe_factor)
        fileio.write_json(counts_path, counts)
    with open(counts_path, encoding="utf-8") as f:
        counts = json.load(f)
    common_args = (config, records_dir, counts)
    model_args = (seq, max_predictions, model["spm_model_file"])
    before_path = os.path.join(directory, "before.json")
    if not os.path.exists(before_path):
        outcome = runner.run(held_out_pretraining(), task_adaptive.pretraining_params(
            *common_args, os.path.join(directory, "before"), model["init_checkpoint"], *model_args))
        fileio.write_json(before_path, outcome["eval_results"])
    with open(before_path, encoding="utf-8") as f:
        before = json.load(f)
    every = max(1, FLAGS.adapt_steps // 5)
    run_dir = os.path.join(directory, "run")
    print(f"\ntask-adaptive pretraining on {task}'s training text ({counts['train']['documents']} documents, "
          f"{counts['train']['tokens']:,} tokens, {FLAGS.adapt_dupe_factor} copies; {counts['heldout']['documents']} "
          f"documents held out): {FLAGS.adapt_steps} steps of batch 64, LAMB {FLAGS.adapt_lr:g}; held-out masked LM "
          f"before {before['masked_lm_accuracy']:.4f}; {load()}", flush=True)
    start = time.time()
    outcome = runner.run(held_out_pretraining(), task_adaptive.pretraining_params(
        *common_args, run_dir, model["init_checkpoint"], *model_args, steps=FLAGS.adapt_steps,
        learning_rate=FLAGS.adapt_lr, eval_every=every))
    history = {int(k): v for k, v in outcome["eval_history"].items()}
    print("  step  held-out masked_lm_accuracy  masked_lm_loss  sentence_order_accuracy"
          f"  ({(time.time() - start) / 60:.1f} min this call)")
    for step, r in [(0, before)] + sorted(history.items()):
        print(f"  {step:5d}  {r['masked_lm_accuracy']:27.4f}  {r['masked_lm_loss']:14.3f}  "
              f"{r['sentence_order_accuracy']:23.4f}", flush=True)
    record = {"text": f"the training sentences of {task} without labels (bench/support/unlabelled_text.py), every "
                      f"{task_adaptive.HELD_OUT_EVERY}th document held out", "settings": settings, "records": counts,
              "held_out_before": before, "held_out_history": history,
              "train_wall_seconds": training_wall_seconds(run_dir)}
    return dict(model, init_checkpoint=tf.train.latest_checkpoint(run_dir)), record


SCRATCH_RUNS = {}  # the from-scratch runs borrowed from --scratch_results_json, by result key


def lowres_run(work_dir, store, task, n, subset, arm, factor, lr, seed, model, config):
    """One fine-tuning run of the low-resource plan, or its record read back from the results file."""
    from bench.support import label_subsets  # pylint: disable=import-outside-toplevel

    key = store.run_key(task, n, arm, lr, seed, factor)
    if store.get(key) is not None:
        return store.get(key)
    if key in SCRATCH_RUNS:
        store.put(key, SCRATCH_RUNS[key])
        print(f"  {task} n={label_subsets.size_key(n)} {key.split('/', 2)[2]}: read from "
              f"{SCRATCH_RUNS[key]['read_from']} (dev accuracy {SCRATCH_RUNS[key]['dev_accuracy']:.2f} %)", flush=True)
        return SCRATCH_RUNS[key]
    s = dict(subset["settings"], steps=subset["settings"]["steps"] * factor,
             warmup_steps=subset["settings"]["warmup_steps"] * factor)
    name = f"{arm}-lr{lr:g}-seed{seed}" + (f"-x{factor}" if factor != 1 else "")
    base = FLAGS.scratch_work_dir if arm == "scratch" and FLAGS.scratch_work_dir else work_dir
    output_dir = os.path.join(os.path.abspath(base), "lowres", task, f"n{label_subsets.size_key(n)}", name)
    init = model["init_checkpoint"] if arm == "pretrained" else None
    head_only = round(FLAGS.head_only_fraction * s["steps"]) if arm == "pretrained" else 0
    stamp(output_dir, {**s, "learning_rate": lr, "init_checkpoint": init, "train_examples": subset["n"],
                       "subset_seed": FLAGS.subset_seed, "albert_config": config.to_dict(),
                       "spm_model_file": os.path.basename(model["spm_model_file"]),
                       "max_seq_length": model["max_seq_length"],
                       **({"head_only_steps": head_only} if head_only else {})}, "fine-tuning run")
    start = time.time()
    history = run_finetuning(output_dir, task, s, lr, seed, init, config, {
        "data_dir": subset["data_dir"], "spm_model_file": model["spm_model_file"],
        "max_seq_length": model["max_seq_length"], "cached_dir": os.path.join(os.path.abspath(base), "features")},
        head_only_steps=head_only)
    last = history[max(history)]
    record = {"task": task, "n": subset["n"], "arm": arm, "factor": factor, "learning_rate": lr, "seed": seed,
              "steps": s["steps"], "head_only_steps": head_only, "history": history,
              "dev_accuracy": 100 * last[ACC],
              "dev_f1": 100 * last["f1"] if "f1" in last else None,
              "best_dev_accuracy": 100 * max(r[ACC] for r in history.values()),
              "constant_final": one_class(task, history), "train_wall_seconds": training_wall_seconds(output_dir)}
    print_run(task, f"n={label_subsets.size_key(n)} {name}", record["dev_accuracy"], record["best_dev_accuracy"],
              record["constant_final"], start)
    store.put(key, record)
    return record


def lowres_size(work_dir, store, task, n, model, config, seeds):
    """The protocol at one size of one task: the rate sweep of both arms on the size's first seed, the rate
    chosen on dev with the one-class guard, the size's seeds at it, and the summary; fills the results entry."""
    from bench.support import label_subsets  # pylint: disable=import-outside-toplevel

    glue_dir = os.path.abspath(FLAGS.glue_dir)
    if n is None:
        data_dir, count = glue_dir, None
    else:
        data_dir, count = label_subsets.write_subset(glue_dir, task, n, FLAGS.subset_seed,
                                                     os.path.join(work_dir, "subsets"))
    grid = sorted(float(x) for x in FLAGS.lr_grid)
    plan = label_subsets.seeds_for_size(n, seeds)
    subset = {"n": count, "data_dir": data_dir,
              "settings": label_subsets.steps_for_size(n, task_settings(task), FLAGS.subset_epochs,
                                                       FLAGS.subset_min_steps)}
    entry = {"train_examples": count if n is not None else "all", "settings": subset["settings"], "seeds": plan,
             "sweep": {}, "chosen_lr": {}, "one_class_rates": {}, "runs": {}}
    store.data["results"].setdefault(task, {})[label_subsets.size_key(n)] = entry
    s = subset["settings"]
    print(f"\n{task} on {label_subsets.size_key(n)} labels: {s['steps']} steps of batch {s['batch_size']}, warm-up "
          f"{s['warmup_steps']}, dev eval every {s['eval_every']}; sweep {', '.join(map(str, grid))} on seed "
          f"{plan[0]} for both arms, then seeds {', '.join(map(str, plan))} at each arm's chosen rate", flush=True)
    arms = ["pretrained", "scratch"]

    def run(arm, lr):
        record = lowres_run(work_dir, store, task, n, subset, arm, 1, lr, plan[0], model, config)
        return {k: record[k] for k in ("dev_accuracy", "dev_f1", "best_dev_accuracy", "constant_final")}

    grid, entry["sweep"], entry["chosen_lr"], entry["one_class_rates"] = label_subsets.sweep_rates(
        grid, arms, run, FLAGS.lr_grid_widen, log=lambda line: print(line, flush=True))
    entry["grid"] = grid
    print("  chosen rates: " + ", ".join(f"{arm} {lr:g}" + one_class_note(entry["one_class_rates"][arm], grid)
                                         for arm, lr in entry["chosen_lr"].items()), flush=True)
    long_arm = [("scratch", FLAGS.scratch_long_factor)] if FLAGS.scratch_long_factor > 1 else []
    for arm, factor in [("pretrained", 1), ("scratch", 1)] + long_arm:
        runs = [lowres_run(work_dir, store, task, n, subset, arm, factor, entry["chosen_lr"][arm], seed, model,
                           config) for seed in plan]
        entry["runs"][arm if factor == 1 else f"{arm}_x{factor}"] = [
            {k: r[k] for k in ("seed", "learning_rate", "steps", "dev_accuracy", "dev_f1", "best_dev_accuracy",
                               "constant_final")} for r in runs]
    entry["summary"] = lowres_summary(task, n, entry["runs"])
    store.write()


def lowres_summary(task, n, runs):
    """Per arm the spread of dev accuracy (and F1) over seeds, the best from-scratch arm, the gap and the goal at
    this size: >= 3 points and beyond the combined seed sd at 1,000 labels or fewer; not below with all labels."""
    stats = {key: spread([r["dev_accuracy"] for r in rs]) for key, rs in runs.items()}
    best_scratch = max((k for k in stats if k.startswith("scratch")), key=lambda k: stats[k]["mean"])
    gap = stats["pretrained"]["mean"] - stats[best_scratch]["mean"]
    combined = math.hypot(stats["pretrained"]["sd"], stats[best_scratch]["sd"])
    if n is None:
        goal, met = "gap >= 0 (not below the best scratch arm with all labels)", gap >= 0
    elif n <= 1000:
        goal, met = "gap >= 3 points and gap > combined sd", gap >= 3 and gap > combined
    else:
        goal, met = None, None
    summary = {"arms": stats, "best_scratch": best_scratch, "gap": gap, "combined_sd": combined, "goal": goal,
               "goal_met": met}
    if all(r["dev_f1"] is not None for rs in runs.values() for r in rs):
        summary["f1"] = {key: spread([r["dev_f1"] for r in rs]) for key, rs in runs.items()}
    line = "; ".join(f"{k} {v['mean']:.2f} ± {v['sd']:.2f}" for k, v in stats.items())
    print(f"  {task} n={'all' if n is None else n}: dev accuracy {line}; gap to {best_scratch} {gap:+.2f} points, "
          f"combined sd {combined:.2f}" + (f": goal {'MET' if met else 'NOT met'} ({goal})" if goal else ""),
          flush=True)
    return summary


def lowresource(work_dir, config_default):
    """The low-resource comparison (docs/pretraining_evidence.md, "Low-resource run")."""
    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel
    from albert_tf.data import glue  # pylint: disable=import-outside-toplevel
    from bench.support import label_subsets  # pylint: disable=import-outside-toplevel

    tasks = ["sst-2"] + ([] if FLAGS.skip_pair else [FLAGS.pair_task])
    results_json = FLAGS.results_json if FLAGS["results_json"].present else os.path.join(
        REPO, "bench", "results", "pretrain_lowresource.json")
    plot_path = FLAGS.plot if FLAGS["plot"].present else os.path.join(REPO, "bench", "figures",
                                                                      "pretrain_lowresource.png")
    if FLAGS.plot_only:
        with open(results_json, encoding="utf-8") as f:
            stored = json.load(f)
        plot_lowres(plot_path, stored, [t for t in tasks if stored["results"].get(t)])
        return
    glue_dir = os.path.abspath(FLAGS.glue_dir)
    sizes, available = {}, {}
    for task in tasks:
        flag = "pair_train_sizes" if task != "sst-2" and FLAGS.pair_train_sizes else "train_sizes"
        sizes[task] = label_subsets.parse_sizes(FLAGS[flag].value, flag)
        processor = glue.get_processor(task)
        available[task] = len(processor.get_train_examples(os.path.join(glue_dir, processor.task.directory)))
        label_subsets.check_sizes(sizes[task], available[task], task, flag)
    seeds = [int(x) for x in FLAGS.seeds] if FLAGS["seeds"].present else [1, 2, 3, 4, 5]
    for n in (n for t in tasks for n in sizes[t]):
        label_subsets.seeds_for_size(n, seeds)
    if FLAGS.recipe_work_dir and FLAGS.pretrained_checkpoint:
        raise SystemExit("bench_pretrain_finetune: error: --pretrained_checkpoint and --recipe_work_dir: give one")
    if FLAGS.adapt_steps:
        from bench.support import task_adaptive  # pylint: disable=import-outside-toplevel

        for task in tasks:
            task_adaptive.check_task(task, "--adapt_steps")
    if FLAGS.recipe_work_dir:
        model = recipe_model(work_dir)
    elif FLAGS.pretrained_checkpoint:
        model = checkpoint_model(work_dir)
    else:
        model = own_model(work_dir, config_default)
    config = AlbertConfig.from_json_file(model["albert_config_file"])
    settings = {"pretrained": model["identity"], "albert_config": config.to_dict(),
                "spm_model_file": os.path.basename(model["spm_model_file"]), "max_seq_length": model["max_seq_length"],
                "sizes": {t: [label_subsets.size_key(n) for n in sizes[t]] for t in tasks},
                "subset_seed": FLAGS.subset_seed, "subset_epochs": FLAGS.subset_epochs,
                "subset_min_steps": FLAGS.subset_min_steps, "lr_grid": [float(x) for x in FLAGS.lr_grid],
                "lr_grid_widen": FLAGS.lr_grid_widen,
                "seeds": seeds, "scratch_long_factor": FLAGS.scratch_long_factor,
                "task_settings": {t: task_settings(t) for t in tasks}}
    if FLAGS.head_only_fraction:  # only then: the settings of a plain run stay those of runs stored before it
        settings["head_only_fraction"] = FLAGS.head_only_fraction
    if FLAGS.adapt_steps:
        settings["adapt"] = {"steps": FLAGS.adapt_steps, "learning_rate": FLAGS.adapt_lr,
                             "dupe_factor": FLAGS.adapt_dupe_factor}
    if FLAGS.scratch_results_json:
        SCRATCH_RUNS.update(label_subsets.borrowed_runs(FLAGS.scratch_results_json, settings, tasks, "scratch",
                                                        "--scratch_results_json", REPO))
    store = label_subsets.ResultStore(results_json, settings)
    store.data.update({
        "what": "low-resource fine-tuning: the pretrained model against the same model from random weights on "
                "seeded label subsets (bench/bench_pretrain_finetune.py --train_sizes)",
        "command": " ".join(["python", "-m", "bench.bench_pretrain_finetune"] + sys.argv[1:]),
        "machine": {"cpus": os.cpu_count(), "load": load()}, "pretrained": model["recipe"],
        "train_examples_available": available, "complete": False})
    store.data.setdefault("started", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    store.data["results"] = {}
    store.write()
    where = "; ".join(f"{t} at {','.join(settings['sizes'][t])}" for t in tasks)
    print(f"low-resource run: {where} labels (subset seed {FLAGS.subset_seed}); results "
          f"{os.path.abspath(results_json)}", flush=True)
    for task in tasks:
        task_model = model
        if FLAGS.adapt_steps:
            task_model, store.data.setdefault("adapted", {})[task] = adapted_model(work_dir, task, model, config)
            store.write()
        for n in sizes[task]:
            lowres_size(work_dir, store, task, n, task_model, config, seeds)
    met = [e["summary"]["goal_met"] for t in tasks for e in store.data["results"][t].values()
           if e["summary"]["goal"]]
    store.data.update({"goal_met": bool(met) and all(met), "complete": True,
                       "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})
    store.write()
    plot_lowres(plot_path, store.data, tasks)
    print(f"results: {os.path.abspath(results_json)}; goals {'MET' if store.data['goal_met'] else 'NOT met'}")


def plot_lowres(path, results, tasks):
    """The figure of a low-resource run: the pretrained model's held-out curves, and per task the dev accuracy
    against the number of labels (log scale; each seed a dot, each arm's mean ± sd a line with error bars)."""
    import matplotlib  # pylint: disable=import-outside-toplevel

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    fig, axes = plt.subplots(1, 1 + len(tasks), figsize=(4.4 * (1 + len(tasks)), 3.6), dpi=90)
    ax = axes[0]
    curve = results["pretrained"]["curve"]
    x = [c["tokens"] / 1e6 for c in curve]
    ax.plot(x, [c["masked_lm_accuracy"] for c in curve], "o-", label="masked-LM accuracy")
    ax.plot(x, [c["sentence_order_accuracy"] for c in curve], "s-", label="sentence-order accuracy")
    at = results["pretrained"].get("held_out_at_checkpoint")
    if at:  # the copied checkpoint, where the search went on past its last stored curve
        tokens = results["pretrained"]["checkpoint_step"] * curve[-1]["tokens"] / curve[-1]["step"] / 1e6
        ax.plot([tokens] * 2, [at["masked_lm_accuracy"], at["sentence_order_accuracy"]], "k*", ms=9,
                label="fine-tuned checkpoint")
    ax.set(title="pretraining (held-out book)", xlabel="tokens processed (millions)", ylabel="accuracy", ylim=(0, 1))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    colors = {"pretrained": "tab:blue", "scratch": "tab:red"}
    for ax, task in zip(axes[1:], tasks):
        entries = results["results"][task]
        for i, key in enumerate(sorted({k for e in entries.values() for k in e["runs"]})):
            points = []
            for size, e in entries.items():
                n = results["train_examples_available"][task] if size == "all" else int(size)
                if key in e["runs"]:
                    points.append((n, [r["dev_accuracy"] for r in e["runs"][key]]))
            points.sort()
            color = colors["pretrained" if key == "pretrained" else "scratch"]
            shift = 1.0 + 0.04 * (i - 1)  # the arms' dots side by side
            for n, values in points:
                ax.plot([n * shift] * len(values), values, ".", color=color, alpha=0.5)
            ax.errorbar([n * shift for n, _ in points], [statistics.mean(v) for _, v in points],
                        yerr=[statistics.stdev(v) if len(v) > 1 else 0.0 for _, v in points],
                        fmt="o-" if "_x" not in key else "o--", color=color, capsize=3, label=key)
        ax.set(title=f"{task.upper()}: dev accuracy by labels", xlabel="training labels (log scale)",
               ylabel="final dev accuracy (%)", xscale="log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    common.save_figure(fig, path)
    print(f"\nplot: {path} ({os.path.getsize(path) / 1e3:.0f} kB)")


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel

    work_dir = os.path.abspath(FLAGS.work_dir)
    os.makedirs(work_dir, exist_ok=True)
    print(f"bench_pretrain_finetune: work dir {work_dir}; {load()}")
    config = AlbertConfig.from_json_file(FLAGS.albert_config_file)
    if FLAGS.train_sizes:
        lowresource(work_dir, config)
        return
    start = time.time()
    train_file, eval_file, counts = make_records(work_dir)
    final, pretrain_history = pretrain(work_dir, train_file, eval_file, counts, config)
    wall = training_wall_seconds(os.path.join(work_dir, "pretrain"))
    print(f"final pretraining checkpoint: {final}; training took {wall / 60:.1f} min of wall time")
    if FLAGS.pretrain_only:
        return

    tasks = ["sst-2"] + ([] if FLAGS.skip_pair else [FLAGS.pair_task])
    RESULTS.update({
        "command": " ".join(["python", "bench/bench_pretrain_finetune.py"] + sys.argv[1:]),
        "flags": {f.name: f.value for f in FLAGS.get_key_flags_for_module(sys.argv[0])},
        "machine": {"cpus": os.cpu_count(), "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())},
        "records": counts, "pretrain_wall_seconds": wall, "pretrain_history": pretrain_history, "tasks": tasks})
    for key in ("work_dir", "gutenberg_dir", "glue_dir", "albert_config_file", "spm_model_file", "results_json",
                "plot"):
        RESULTS["flags"][key] = os.path.relpath(os.path.abspath(RESULTS["flags"][key]), REPO)
    RESULTS["flags"]["work_dir"] = "<work_dir>"
    if FLAGS.scratch_work_dir:
        RESULTS["flags"]["scratch_work_dir"] = "<an earlier run's work_dir>"
    report = {}
    for task in tasks:
        tune_and_compare(work_dir, task, final, config, report)
    plot(FLAGS.plot, pretrain_history, report)
    print(f"results: {os.path.abspath(FLAGS.results_json)}; total {(time.time() - start) / 60:.1f} min; {load()}")


if __name__ == "__main__":
    app.run(main)
