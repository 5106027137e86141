r"""Which pretraining recipe lifts a tiny ALBERT off the word-frequency plateau? A search at equal cost.

bench_pretrain_finetune.py pretrained data/albert_config_tiny.json with one recipe (LAMB 5e-3, the 30k
`30k-clean.model`, sequence 128, stored masks) and held-out masked-LM accuracy stopped at 0.150, while held-out
sentence order stayed at chance (docs/pretraining_evidence.md). This script varies the knobs that decide whether
a small model leaves that plateau, every candidate at the same cost, and prunes the worse ones early (successive
halving) so that the best get the most steps:

    python -m bench.bench_pretrain_recipe --work_dir=/root/albert_recipe_search   # resumable: rerun after a stop
    python -m bench.bench_pretrain_recipe --work_dir=/tmp/rs_smoke --corpus=shipped --extra_text= \
      --rung_steps=4,8 --eval_every=4 --dupe_factor=1 --vocab_sizes=500 --grid=smoke \
      --results_json=/tmp/rs_smoke/search.json --plot=/tmp/rs_smoke/search.png   # every stage in minutes

Equal cost is equal tokens processed: every candidate of a rung has trained on the same number of sequence
positions (steps x batch 64 x sequence length; a sequence-64 candidate takes twice the steps of a sequence-128
one). Not CPU seconds, because on this shared 2-core machine the seconds a step takes vary twofold with the other
jobs' load, so a budget in seconds would depend on who else ran and a resumed search would not be the same
search; the CPU seconds each candidate took are recorded beside it (a 30k vocabulary costs about 1.3 times an 8k
one per token: the output softmax and LAMB over its embedding table), so the cost of a recipe is reported too.

Stages, each with the library's own code, all in `--work_dir` (state.json holds what is done):

1. Corpus: the NLTK Gutenberg books (`--gutenberg_dir`) converted by tools/make_shipped_corpus.py, `--eval_book`
   held out, plus the unlabelled task text of bench/support/unlabelled_text.py (`--extra_text`, as the second
   pretrain-finetune run: about 2.5 M tokens of training text).
2. Vocabularies: `data/30k-clean.model` and, for each of `--vocab_sizes`, a SentencePiece model trained by
   `albert_tf.text.vocab.create_vocab` (create_vocab.py, the original's recipe) on the training text only.
3. Records per vocabulary x sequence length that a candidate needs (made when first needed): the library's
   `create_pretraining_data` at `--dupe_factor`, 19 predictions at sequence 128 and 10 at 64 (15 % either way);
   the held-out book once, its stored masks the evaluation set of every candidate of that vocabulary and length.
   Online-masking candidates train on the same records with new masks every pass (`masked_lm_budget` 0.15).
4. Successive halving over the grid (`--grid`, `grid()`): rung r trains every surviving candidate, resuming its
   own checkpoints, up to `--rung_steps[r]` steps (in steps of batch 64 at sequence 128: 8,192 tokens each),
   evaluating the held-out records every `--eval_every` such steps; then the best ceil(n / `--eta`) by the
   selection metric go on. Every candidate's learning rate warms up over its fraction of the whole search's last
   rung and decays linearly to 0 there (`--rung_steps[-1]`, `decay_horizon`), whatever rung it stops at, so a
   pruned candidate's curve is the start of the run it would have had, and the last survivor's run is a complete
   run of its recipe.
   Each rung of each candidate runs in a child process (a crash costs one candidate, not the search).
5. The selection metric is the held-out masked-LM loss per character (bits per character of the masked pieces:
   the loss in nats per masked piece divided by the mean characters per masked piece of the evaluation records,
   over ln 2): accuracy per piece is easier with smaller pieces (an 8k vocabulary splits words into more, shorter
   pieces), so it cannot rank vocabularies; loss per character can. Accuracy and loss per piece and held-out
   sentence-order accuracy are reported for every evaluation, with the noise of the sentence-order figure
   (chance: the share of the evaluation set's more frequent label; its band: 2 binomial sd on that many examples).
6. `--results_json` (default bench/results/pretrain_recipe_search.json) after every candidate's rung: the command,
   the grid, the budget, every candidate's held-out curve (by tokens), its cost, and the rungs with who was
   pruned; and `--plot` (default bench/figures/pretrain_recipe_search.png).
7. For the next step, fine-tuning the best recipe's model on few labels (`bench_pretrain_finetune --train_sizes
   --recipe_work_dir`, with bench/support/label_subsets.py): every candidate's `files` in the results
   (checkpoints, albert_config.json, tokenizer, sequence length).

The grid (`grid()`): LAMB at peak rates 2.5e-3, 5e-3, 1e-2, 2e-2 and AdamW at 2.5e-4, 5e-4, 1e-3, 2e-3, each
warming up over 2.5 % of the last rung (ALBERT's 3,125 of 125,000 steps) on today's data (30k vocabulary,
sequence 128, stored masks); a 1 % warm-up (BERT's) at LAMB 1e-2 and AdamW 1e-3; and at LAMB 1e-2 with the 2.5 %
warm-up, the data knobs: the 16k and 8k vocabularies trained here, sequence 64, online masking, and the small
vocabulary with short sequences (BabyBERTa's recipe, Huebner et al. 2021) with stored and online masks.

Flags:
  --work_dir             where everything is written (state.json, corpus/, vocab/, records/, runs/, search.log)
  --corpus               shared | shipped; --gutenberg_dir, --eval_book, --extra_text (+ --race_dir, --squad_file,
                         --glue_dir)
  --albert_config_file   the model (vocab_size is set from each vocabulary)
  --vocab_sizes          the vocabularies trained here besides 30k-clean (thousands of pieces are named "8k", ...)
  --dupe_factor          create_pretraining_data --dupe_factor (training records)
  --grid                 default | smoke (two candidates, for a smoke test)
  --rung_steps           cumulative budget of each rung, in steps of batch 64 at sequence 128
  --eta                  keep ceil(n / eta) candidates after each rung
  --eval_every           held-out evaluation interval, in the same units
  --max_candidate_runs   stop after this many candidate-rungs this call (0: run to the end)
  --retry_failed         run again the candidate-rungs that failed (else they stay pruned)
  --results_json, --plot where the results and the figure go
"""
import contextlib
import ctypes
import dataclasses
import glob
import json
import math
import os
import signal
import subprocess
import sys
import time

from bench.support import common  # first: the environment every benchmark needs
from bench.support import unlabelled_text

from absl import app, flags, logging

REPO = common.REPO

FLAGS = flags.FLAGS


def define_flags():
    """The flags (defined when run as a script, so that importing the module, as its test does, defines none)."""
    flags.DEFINE_string("work_dir", "/root/albert_recipe_search", "Where every stage writes (resumable).")
    define_corpus_flags()
    flags.DEFINE_list("vocab_sizes", ["16000", "8000"], "Vocabularies trained by create_vocab on the training text.")
    flags.DEFINE_integer("dupe_factor", 15, "create_pretraining_data --dupe_factor of the training records.")
    flags.DEFINE_enum("grid", "default", ["default", "smoke"], "The candidates (see grid()).")
    flags.DEFINE_list("rung_steps", ["160", "480", "1440", "5760"], "Cumulative budget of each rung, in steps of "
                      "batch 64 at sequence 128 (8,192 tokens each).")
    flags.DEFINE_integer("eta", 3, "Keep ceil(n / eta) candidates after each rung.")
    flags.DEFINE_integer("eval_every", 80, "Held-out evaluation interval, in steps of batch 64 at sequence 128.")
    flags.DEFINE_integer("max_candidate_runs", 0, "Stop after this many candidate-rungs in this call (0: no limit).")
    flags.DEFINE_bool("retry_failed", False, "Run the failed candidate-rungs again.")
    flags.DEFINE_string("results_json", os.path.join(common.RESULTS_DIR, "pretrain_recipe_search.json"),
                        "Where the results go (rewritten after every candidate-rung).")
    flags.DEFINE_string("plot", os.path.join(common.FIGURES_DIR, "pretrain_recipe_search.png"), "The figure.")
    flags.DEFINE_string("train_candidate", None, "(internal) train this candidate to --train_steps in this process.")
    flags.DEFINE_integer("train_steps", 0, "(internal) with --train_candidate.")


def define_corpus_flags():
    """The flags of the text and the model that `corpus()` and `model_config()` read (bench_sop_scaling.py's too)."""
    flags.DEFINE_enum("corpus", "shared", ["shared", "shipped"], "shared: whole books of --gutenberg_dir; shipped: "
                                                                 "the excerpts in data/corpus/.")
    flags.DEFINE_string("gutenberg_dir", common.GUTENBERG, "The raw NLTK Gutenberg selection (for --corpus=shared).")
    flags.DEFINE_string("eval_book", "chesterton-thursday", "Book held out for the evaluation.")
    flags.DEFINE_list("extra_text", list(unlabelled_text.SOURCES), "Unlabelled task text pretrained on beside the "
                      f"books: any of {', '.join(unlabelled_text.SOURCES)} (bench/support/unlabelled_text.py).")
    flags.DEFINE_string("race_dir", os.path.join(common.SHARED_DATA, "race", "RACE"), "RACE folder.")
    flags.DEFINE_string("squad_file", os.path.join(common.SHARED_DATA, "squad", "dev-v1.1.json.zip"),
                        "SQuAD v1.1 JSON or zip.")
    flags.DEFINE_string("glue_dir", os.path.join(common.SHARED_DATA, "glue"), "GLUE data folder.")
    flags.DEFINE_string("albert_config_file", common.TINY_CONFIG, "The model.")


BATCH = 64
UNIT_SEQ = 128  # --rung_steps and --eval_every count steps of BATCH sequences of this length
UNIT_TOKENS = BATCH * UNIT_SEQ
MASKED_LM_PROB = 0.15
BASE_VOCAB = "30k"
SPM_30K = common.SPM_MODEL
STATE_JSON = "state.json"


# -- the grid and successive halving (pure logic, tests/test_bench_pretrain_recipe.py) ----------------------------

def candidate(optimizer, lr, warmup=0.025, vocab=BASE_VOCAB, seq=128, masking="stored"):
    """One recipe: optimizer, peak rate, warm-up (fraction of the last rung), vocabulary, sequence length and
    masking ("stored": the records' masks; "online": new masks every pass). Its name is its directory."""
    name = f"{optimizer}-lr{lr:g}-wu{warmup:g}-v{vocab}-s{seq}-{masking}"
    return {"name": name, "optimizer": optimizer, "learning_rate": lr, "warmup": warmup, "vocab": vocab,
            "seq": seq, "masking": masking}


def grid(which="default", vocab_sizes=("16000", "8000")):
    """The candidates, in the order rung 1 runs them (today's data first, so its records are made first)."""
    small = [vocab_name(v) for v in vocab_sizes]
    if which == "smoke":
        return [candidate("lamb", 1e-2), candidate("adamw", 1e-3, vocab=small[-1], seq=64, masking="online")]
    lamb_rates, adamw_rates = (2.5e-3, 5e-3, 1e-2, 2e-2), (2.5e-4, 5e-4, 1e-3, 2e-3)
    out = [candidate("lamb", lr) for lr in lamb_rates] + [candidate("adamw", lr) for lr in adamw_rates]
    out += [candidate("lamb", 1e-2, warmup=0.01), candidate("adamw", 1e-3, warmup=0.01)]
    out += [candidate("lamb", 1e-2, masking="online"), candidate("lamb", 1e-2, seq=64)]
    out += [candidate("lamb", 1e-2, vocab=v) for v in small]
    out += [candidate("lamb", 1e-2, vocab=small[-1], seq=64, masking=m) for m in ("stored", "online")]
    return out


def vocab_name(size):
    """'8000' -> '8k' (how candidates and directories name a vocabulary)."""
    size = int(size)
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


def steps_at(unit_steps, seq):
    """Steps of batch 64 at sequence `seq` that process the tokens of `unit_steps` steps at sequence 128."""
    tokens = unit_steps * UNIT_TOKENS
    if tokens % (BATCH * seq):
        raise ValueError(f"{unit_steps} steps at sequence {UNIT_SEQ} are not a whole number of steps at {seq}")
    return tokens // (BATCH * seq)


def keep_count(n, eta):
    """How many of `n` candidates go on to the next rung."""
    return max(1, math.ceil(n / eta)) if n else 0


def select(scores, eta):
    """Successive halving's cut: the names of the best ceil(n / eta) of `scores` ({name: metric, lower better}),
    best first; a candidate without a finite score (failed, diverged) never goes on; ties go by name."""
    finite = sorted((s, n) for n, s in scores.items() if s is not None and math.isfinite(s))
    return [n for _, n in finite[:keep_count(len(scores), eta)]]


def new_state(settings, candidates):
    """The search's state before anything ran: rung 0 holds every candidate."""
    return {"settings": settings, "candidates": {c["name"]: c for c in candidates},
            "rungs": [{"unit_steps": settings["rung_steps"][0], "candidates": [c["name"] for c in candidates],
                       "results": {}, "survivors": None}]}


def load_state(path, settings, candidates):
    """The state in `path`, or a new one; a state made with other settings is refused (a resumed search must be
    the same search)."""
    if not os.path.exists(path):
        return new_state(settings, candidates)
    with open(path, encoding="utf-8") as f:
        state = json.load(f)
    if state["settings"] != settings:
        diff = sorted(k for k in set(state["settings"]) | set(settings)
                      if state["settings"].get(k) != settings.get(k))
        raise SystemExit(f"bench_pretrain_recipe: error: {path} is a search with other settings ({', '.join(diff)} "
                         "differ); use another --work_dir")
    return state


def save_state(path, state):
    """Writes `state` atomically (a killed search keeps the previous one)."""
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(state, f, indent=1, sort_keys=True)
    os.replace(path + ".tmp", path)


def next_run(state, eta, retry_failed=False):
    """(rung index, candidate name) to train next, or None when the search is over. Closes every rung whose
    candidates all have a result: picks its survivors by each result's "score" and opens the next rung."""
    rung_steps = state["settings"]["rung_steps"]
    while True:
        index = len(state["rungs"]) - 1
        rung = state["rungs"][-1]
        for name in rung["candidates"]:
            result = rung["results"].get(name)
            if result is None or (retry_failed and "error" in result):
                return index, name
        if rung["survivors"] is None:
            rung["survivors"] = select({n: r.get("score") for n, r in rung["results"].items()}, eta)
        if index + 1 >= len(rung_steps) or not rung["survivors"]:
            return None
        state["rungs"].append({"unit_steps": rung_steps[index + 1], "candidates": list(rung["survivors"]),
                               "results": {}, "survivors": None})


# -- 1.-3. corpus, vocabularies, records ---------------------------------------------------------------------------

def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}  (load {common.load_average()})", flush=True)


def corpus(work_dir):
    """(training text files, held-out text files), made once."""
    from albert_tf.data.corpus import prepare_corpus  # pylint: disable=import-outside-toplevel

    out = os.path.join(work_dir, "corpus")
    if FLAGS.corpus == "shipped":
        books = sorted(glob.glob(os.path.join(REPO, "data", "corpus", "gutenberg-*.txt")))
    else:
        from tools import make_shipped_corpus  # pylint: disable=import-outside-toplevel

        source = os.path.abspath(FLAGS.gutenberg_dir)
        names = sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(source, "*.txt")))
        books = [os.path.join(out, f"gutenberg-{n}.txt") for n in names]
        if not names or not all(os.path.exists(b) for b in books):
            make_shipped_corpus.prepare(source, out, names, bytes_per_book=0)
    held = [b for b in books if os.path.basename(b) == f"gutenberg-{FLAGS.eval_book}.txt"]
    if not held:
        raise SystemExit(f"bench_pretrain_recipe: error: --eval_book {FLAGS.eval_book} is not among the books")
    extra = []
    for source in FLAGS.extra_text:
        path = os.path.join(out, extra_file_name(source))
        if not os.path.exists(path):
            jsonl = path[:-4] + ".jsonl"
            unlabelled_text.write_jsonl(jsonl, unlabelled_text.documents(
                source, FLAGS.race_dir, FLAGS.squad_file, os.path.abspath(FLAGS.glue_dir)))
            prepare_corpus([jsonl], path)
        extra.append(path)
    return [b for b in books if b not in held] + extra, held


def extra_file_name(source):
    """The training text file that `corpus()` makes of one of unlabelled_text.SOURCES."""
    return f"extra-{source}.txt"


def spm_file(work_dir, vocab, train_files):
    """The SentencePiece model of `vocab`: 30k-clean, or one trained here on the training text (once)."""
    if vocab == BASE_VOCAB:
        return SPM_30K
    from albert_tf.text import vocab as vocab_lib  # pylint: disable=import-outside-toplevel

    prefix = os.path.join(work_dir, "vocab", vocab)
    if not os.path.exists(prefix + ".model"):
        size = next(int(v) for v in FLAGS.vocab_sizes if vocab_name(v) == vocab)
        log(f"training the {vocab} vocabulary on the training text")
        result = vocab_lib.create_vocab(",".join(train_files), prefix,
                                        vocab_lib.SentencePieceOptions(vocab_size=size, num_threads=1))
        log(result.summary())
    return prefix + ".model"


def max_predictions(seq):
    """Masked positions per sequence: the masking budget of a full sequence (19 at 128, 10 at 64)."""
    return max(1, round(seq * MASKED_LM_PROB))


def records(work_dir, vocab, seq):
    """{train, eval, spm, counts} of one vocabulary and sequence length; made once (stamped in counts.json)."""
    from albert_tf.data.pretraining import PretrainingConfig, create_pretraining_data

    directory = os.path.join(work_dir, "records", f"v{vocab}-s{seq}")
    train_files, held = corpus(work_dir)
    spm = spm_file(work_dir, vocab, train_files)
    paths = {"train": os.path.join(directory, "train.tfrecord"), "eval": os.path.join(directory, "eval.tfrecord"),
             "spm": spm}
    counts_path = os.path.join(directory, "counts.json")
    if os.path.exists(counts_path):
        with open(counts_path, encoding="utf-8") as f:
            return {**paths, "counts": json.load(f)}
    os.makedirs(directory, exist_ok=True)
    counts = {}
    for name, files, dupe in (("train", train_files, FLAGS.dupe_factor), ("eval", held, 1)):
        log(f"records v{vocab} s{seq} {name}: create_pretraining_data over {len(files)} files, dupe {dupe}")
        config = PretrainingConfig(max_seq_length=seq, max_predictions_per_seq=max_predictions(seq),
                                   masked_lm_prob=MASKED_LM_PROB, dupe_factor=dupe)
        stats = create_pretraining_data(",".join(files), [paths[name]], spm_model_file=spm, config=config,
                                        num_workers=1)
        counts[name] = {"instances": stats.instances, "tokens": stats.tokens, "documents": stats.documents}
    counts["eval"].update(eval_set_stats(paths["eval"], spm, max_predictions(seq),
                                         counts["eval"]["instances"] // BATCH * BATCH))
    with open(counts_path, "w", encoding="utf-8") as f:
        json.dump(counts, f, indent=1)
    log(f"records v{vocab} s{seq}: {counts}")
    return {**paths, "counts": counts}


def eval_set_stats(eval_file, spm, num_predictions, num_examples):
    """Of the first `num_examples` records of `eval_file` (those the evaluation reads): the mean characters per
    masked piece of the stored masks (the word-start mark counted as one, a space), which turns a loss per piece
    into a loss per character, comparable across vocabularies; and the share of the more frequent sentence-order
    label, the accuracy of a model that always answers it (chance)."""
    import sentencepiece  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    processor = sentencepiece.SentencePieceProcessor(model_file=spm)
    pieces = chars = swapped = 0
    for raw in tf.data.TFRecordDataset(eval_file).take(num_examples).as_numpy_iterator():
        feature = tf.train.Example.FromString(raw).features.feature
        ids = feature["masked_lm_ids"].int64_list.value[:num_predictions]
        weights = feature["masked_lm_weights"].float_list.value[:num_predictions]
        swapped += int(feature["next_sentence_labels"].int64_list.value[0])
        for i, w in zip(ids, weights):
            if w > 0:
                pieces += 1
                chars += len(processor.id_to_piece(int(i)))
    share = swapped / max(num_examples, 1)
    return {"chars_per_masked_piece": chars / max(pieces, 1), "sentence_order_majority": max(share, 1 - share)}


def model_config(work_dir, vocab, spm):
    """The model's albert_config.json with the vocabulary's size (written once per vocabulary)."""
    import sentencepiece  # pylint: disable=import-outside-toplevel

    path = os.path.join(work_dir, "configs", f"albert_config_v{vocab}.json")
    if not os.path.exists(path):
        with open(FLAGS.albert_config_file, encoding="utf-8") as f:
            config = json.load(f)
        config["vocab_size"] = sentencepiece.SentencePieceProcessor(model_file=spm).get_piece_size()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2, sort_keys=True)
        os.replace(path + ".tmp", path)
    return path


# -- 4. one candidate's rung (a child process) ---------------------------------------------------------------------

@contextlib.contextmanager
def decay_horizon(total_steps):
    """Makes the runner's optimizer warm up and decay over `total_steps` whatever step the run stops at.

    The library plans the schedule over `num_train_steps`, the step it stops at; a rung must stop early on the
    schedule of the whole search, so the runner's `optimization.create_optimizer` is wrapped for this process
    (restored after). A resumed run restores the optimizer's step, so the schedule carries on exactly."""
    from albert_tf.train import runner  # pylint: disable=import-outside-toplevel

    original = runner.optimization.create_optimizer

    def create_optimizer(name, learning_rate, num_train_steps, *args, **kwargs):
        del num_train_steps
        return original(name, learning_rate, total_steps, *args, **kwargs)

    runner.optimization.create_optimizer = create_optimizer
    try:
        yield
    finally:
        runner.optimization.create_optimizer = original


def train_candidate(work_dir, cand, steps):
    """Trains `cand` to `steps` (resuming its checkpoints), evaluating the held-out records at every checkpoint."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel
    from albert_tf.tasks.pretraining import PretrainingParams, PretrainingTask
    from albert_tf.train import callbacks, runner  # pylint: disable=import-outside-toplevel

    class PretrainingWithHeldOut(PretrainingTask):
        """The pretraining task with a metric, so that the runner evaluates every checkpoint on the held-out
        records as it is saved (eval_history.json), recording the call's cost as it goes."""

        def primary_metric(self, params):
            return "masked_lm_accuracy"

        def evaluate(self, model, params, strategy):
            results = super().evaluate(model, params, strategy)
            cost.record(callbacks.global_step(model))
            return results

    seq = cand["seq"]
    data = records(work_dir, cand["vocab"], seq)
    config = AlbertConfig.from_json_file(model_config(work_dir, cand["vocab"], data["spm"]))
    rung_steps = [int(s) for s in FLAGS.rung_steps]
    total = steps_at(rung_steps[-1], seq)
    every = steps_at(FLAGS.eval_every, seq)
    params = PretrainingParams(
        albert_config=config, input_file=data["train"], eval_input_file=data["eval"],
        output_dir=os.path.join(work_dir, "runs", cand["name"]), max_seq_length=seq,
        max_predictions_per_seq=max_predictions(seq), do_train=True, do_eval=True, train_batch_size=BATCH,
        eval_batch_size=BATCH, optimizer=cand["optimizer"], learning_rate=cand["learning_rate"],
        num_train_steps=steps, num_warmup_steps=round(cand["warmup"] * total), save_checkpoints_steps=every,
        keep_checkpoint_max=1, iterations_per_loop=every, max_eval_steps=data["counts"]["eval"]["instances"] // BATCH,
        masked_lm_budget=MASKED_LM_PROB if cand["masking"] == "online" else 0.0, spm_model_file=data["spm"],
        log_every=every)
    cost = common.CallCost(params.output_dir, tag=f"{steps}-")
    if any(f.name == "allow_settings_change" for f in dataclasses.fields(params)):
        # A rung resumes the run with a later stop (num_train_steps), on the same schedule (decay_horizon); the
        # search's own state.json refuses any other change.
        params = dataclasses.replace(params, allow_settings_change=True)
    with decay_horizon(total):
        outcome = runner.run(PretrainingWithHeldOut(), params)
    cost.record(outcome["step"], train_seconds=outcome.get("train_seconds", 0.0))
    if outcome["step"] != steps:
        raise SystemExit(f"bench_pretrain_recipe: error: {cand['name']} stopped at step {outcome['step']}, not {steps}")


def eval_history(run_dir):
    """{step: held-out results} of a run's evaluations (the runner's eval_history.json; {} before the first)."""
    path = os.path.join(run_dir, "eval_history.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return {int(k): v for k, v in json.load(f)["results"].items()}


def candidate_result(work_dir, cand, state):
    """A candidate's record after a rung: its held-out curve (by tokens), derived figures, cost and score."""
    seq = cand["seq"]
    run_dir = os.path.join(work_dir, "runs", cand["name"])
    with open(os.path.join(work_dir, "records", f"v{cand['vocab']}-s{seq}", "counts.json"), encoding="utf-8") as f:
        counts = json.load(f)
    chars = counts["eval"]["chars_per_masked_piece"]
    n_eval = counts["eval"]["instances"] // BATCH * BATCH
    history = eval_history(run_dir)
    curve = []
    for step in sorted(history):
        r = history[step]
        curve.append({"step": step, "tokens": step * BATCH * seq, "masked_lm_accuracy": r["masked_lm_accuracy"],
                      "masked_lm_loss": r["masked_lm_loss"],
                      "masked_lm_bits_per_char": r["masked_lm_loss"] / chars / math.log(2),
                      "sentence_order_accuracy": r["sentence_order_accuracy"],
                      "sentence_order_loss": r.get("sentence_order_loss")})
    cost = common.CallCost.total(run_dir)
    chance = counts["eval"]["sentence_order_majority"]
    sop_noise = 2 * math.sqrt(chance * (1 - chance) / max(n_eval, 1))
    last = curve[-1] if curve else None
    del state
    return {"curve": curve, "eval_instances": n_eval, "chars_per_masked_piece": chars,
            "sentence_order_chance_band": [chance - sop_noise, chance + sop_noise],
            "cpu_seconds": cost["cpu_seconds"], "wall_seconds": cost["wall_seconds"],
            "train_records": counts["train"], "score": last["masked_lm_bits_per_char"] if last else None,
            "final": last}


def run_child(work_dir, name, steps, log_path):
    """Trains one candidate to `steps` in a child process (its output appended to the search log); returns
    its exit status."""
    args = common.module_command("bench.bench_pretrain_recipe", f"--work_dir={work_dir}", f"--train_candidate={name}",
                                 f"--train_steps={steps}")
    args += [a for a in sys.argv[1:] if not a.startswith(("--work_dir", "--train_"))]
    env = common.child_env(TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1", OMP_NUM_THREADS="1")
    with open(log_path, "a", encoding="utf-8") as out:
        return subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, env=env, check=False,
                              preexec_fn=die_with_parent).returncode


def die_with_parent():
    """Asks Linux to end the child when the search process ends (a stopped search leaves no training behind to
    hold a run's directory lock when it is resumed); elsewhere nothing."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


# -- 5. results and figure -----------------------------------------------------------------------------------------

def candidate_files(cand):
    """Where a candidate's model is, for fine-tuning it (part 2 of the issue): its checkpoints (the latest in the
    run directory, which also holds albert_config.json) and its tokenizer; "<work_dir>" stands for --work_dir."""
    spm = (os.path.relpath(SPM_30K, REPO) if cand["vocab"] == BASE_VOCAB
           else f"<work_dir>/vocab/{cand['vocab']}.model")
    return {"output_dir": f"<work_dir>/runs/{cand['name']}", "spm_model_file": spm,
            "albert_config_file": f"<work_dir>/runs/{cand['name']}/albert_config.json",
            "max_seq_length": cand["seq"]}


REFERENCE_JSON = os.path.join(common.RESULTS_DIR, "pretrain_finetune_more_text.json")


def reference_curve(work_dir):
    """Today's recipe for comparison: the held-out curve of bench_pretrain_finetune.py's second run (the same
    training text, records and held-out book: 30k, sequence 128, stored masks, dupe 15; LAMB 5e-3, 500 warm-up
    steps, decay to 0 at 5,000 steps of batch 64), by tokens; None without its results file."""
    counts_path = os.path.join(work_dir, "records", f"v{BASE_VOCAB}-s{UNIT_SEQ}", "counts.json")
    if not (os.path.exists(REFERENCE_JSON) and os.path.exists(counts_path)):
        return None
    with open(REFERENCE_JSON, encoding="utf-8") as f:
        run = json.load(f)
    with open(counts_path, encoding="utf-8") as f:
        chars = json.load(f)["eval"]["chars_per_masked_piece"]
    batch, seq = run["flags"]["pretrain_batch_size"], run["flags"]["max_seq_length"]
    curve = [{"step": int(step), "tokens": int(step) * batch * seq, "masked_lm_accuracy": r["masked_lm_accuracy"],
              "masked_lm_loss": r["masked_lm_loss"],
              "masked_lm_bits_per_char": r["masked_lm_loss"] / chars / math.log(2),
              "sentence_order_accuracy": r["sentence_order_accuracy"]}
             for step, r in sorted(run["pretrain_history"].items(), key=lambda kv: int(kv[0]))]
    return {"source": os.path.relpath(REFERENCE_JSON, REPO), "command": run["command"],
            "recipe": "lamb-lr0.005-wu500of5000steps-v30k-s128-stored", "curve": curve}


def write_results(state, settings, started):
    """Rewrites --results_json from the state (via common.write_result: command, date, machine, load)."""
    rungs = []
    for i, rung in enumerate(state["rungs"]):
        closed = rung["survivors"] is not None
        rungs.append({"rung": i + 1, "unit_steps": rung["unit_steps"], "tokens": rung["unit_steps"] * UNIT_TOKENS,
                      "candidates": rung["candidates"], "finished": sorted(rung["results"]),
                      "survivors": rung["survivors"],
                      "pruned": sorted(set(rung["candidates"]) - set(rung["survivors"])) if closed else None})
    latest = {}
    for rung in state["rungs"]:
        latest.update(rung["results"])
    candidates = {name: {**state["candidates"][name], **latest[name],
                         "files": candidate_files(state["candidates"][name])} for name in latest}
    best = min((c for c in candidates.values() if c.get("score") is not None), key=lambda c: c["score"], default=None)
    figures = {
        "what": "pretraining recipe search at equal tokens processed (bench/bench_pretrain_recipe.py)",
        "settings": settings, "grid": list(state["candidates"].values()),
        "budget": {"unit": f"tokens processed (steps x batch {BATCH} x sequence length)",
                   "rung_tokens": [s * UNIT_TOKENS for s in settings["rung_steps"]],
                   "schedule_horizon_tokens": settings["rung_steps"][-1] * UNIT_TOKENS},
        "selection_metric": "held-out masked-LM bits per character at the rung's end (lower is better)",
        "goal": "held-out masked-LM accuracy >= 0.25 and held-out sentence-order accuracy above the chance band",
        "rungs": rungs, "candidates": candidates, "best_so_far": best and best["name"],
        "reference": reference_curve(os.path.abspath(FLAGS.work_dir)),
        "complete": state["rungs"][-1]["survivors"] is not None and len(state["rungs"]) == len(settings["rung_steps"]),
        "started": started}
    common.write_result(figures, FLAGS.results_json)
    try:
        plot(candidates, figures["reference"], FLAGS.plot)
    except ImportError as err:
        log(f"no plot ({err})")


def plot(candidates, reference, path):
    """The held-out curves of every candidate by tokens processed: masked-LM accuracy (the goal, 0.25, dotted),
    bits per character (the selection metric) and sentence-order accuracy with its chance band (shaded); today's
    recipe (`reference`) in black, dashed."""
    import matplotlib  # pylint: disable=import-outside-toplevel

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    fig, axes = plt.subplots(1, 3, figsize=(17, 5.2), dpi=80)
    keys = (("masked_lm_accuracy", "held-out masked-LM accuracy"),
            ("masked_lm_bits_per_char", "held-out masked-LM bits per character"),
            ("sentence_order_accuracy", "held-out sentence-order accuracy"))
    cmap = plt.get_cmap("tab20")
    for i, name in enumerate(sorted(candidates)):
        curve = candidates[name]["curve"]
        for ax, (key, _) in zip(axes, keys):
            ax.plot([p["tokens"] / 1e6 for p in curve], [p[key] for p in curve], "o-", ms=2.5, lw=1.2,
                    color=cmap(i % 20), label=name if ax is axes[0] else None)
    if reference:
        for ax, (key, _) in zip(axes, keys):
            ax.plot([p["tokens"] / 1e6 for p in reference["curve"]], [p[key] for p in reference["curve"]], "k--",
                    lw=1.2, label="today's recipe (bench_pretrain_finetune, 2nd run)" if ax is axes[0] else None)
    for ax, (key, title) in zip(axes, keys):
        ax.set(title=title, xlabel="tokens processed (millions)", xscale="log")
        ax.grid(alpha=0.3)
    axes[0].axhline(0.25, color="k", ls=":", lw=1)
    for low, high in {tuple(c["sentence_order_chance_band"]) for c in candidates.values()}:
        axes[2].axhspan(low, high, color="grey", alpha=0.15, lw=0)
    fig.legend(loc="lower center", ncol=4, fontsize=7)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    common.save_figure(fig, path)


# -- the search ----------------------------------------------------------------------------------------------------

def settings_of_flags():
    """What makes a search the same search (stored in state.json; a rerun with others is refused)."""
    return {"corpus": FLAGS.corpus, "eval_book": FLAGS.eval_book, "extra_text": sorted(FLAGS.extra_text),
            "albert_config_file": os.path.basename(FLAGS.albert_config_file),
            "vocab_sizes": [int(v) for v in FLAGS.vocab_sizes], "dupe_factor": FLAGS.dupe_factor,
            "grid": FLAGS.grid, "rung_steps": [int(s) for s in FLAGS.rung_steps], "eta": FLAGS.eta,
            "eval_every": FLAGS.eval_every, "batch_size": BATCH, "masked_lm_prob": MASKED_LM_PROB}


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    work_dir = os.path.abspath(FLAGS.work_dir)
    os.makedirs(work_dir, exist_ok=True)
    settings = settings_of_flags()
    candidates = grid(FLAGS.grid, FLAGS.vocab_sizes)
    state_path = os.path.join(work_dir, STATE_JSON)
    state = load_state(state_path, settings, candidates)
    if FLAGS.train_candidate:
        train_candidate(work_dir, state["candidates"][FLAGS.train_candidate], FLAGS.train_steps)
        return
    started = state.setdefault("started", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    log_path = os.path.join(work_dir, "search.log")
    log(f"bench_pretrain_recipe: work dir {work_dir}; {len(candidates)} candidates; rungs at "
        f"{', '.join(f'{s * UNIT_TOKENS / 1e6:.2f}M' for s in settings['rung_steps'])} tokens; keep 1/{FLAGS.eta}; "
        f"child output in {log_path}")
    runs = 0
    while True:
        work = next_run(state, FLAGS.eta, FLAGS.retry_failed)
        save_state(state_path, state)
        if work is None:
            break
        index, name = work
        cand = state["candidates"][name]
        steps = steps_at(state["rungs"][index]["unit_steps"], cand["seq"])
        if FLAGS.max_candidate_runs and runs >= FLAGS.max_candidate_runs:
            log(f"stopping after {runs} candidate-rungs (--max_candidate_runs); rerun to go on")
            break
        records(work_dir, cand["vocab"], cand["seq"])  # made here, once, not in the child
        log(f"rung {index + 1}: {name} to step {steps} ({state['rungs'][index]['unit_steps'] * UNIT_TOKENS / 1e6:.2f}M "
            "tokens)")
        status = run_child(work_dir, name, steps, log_path)
        result = candidate_result(work_dir, cand, state)
        if status != 0 or not result["curve"] or result["curve"][-1]["step"] < steps:
            result.update(error=f"exit status {status}; see {log_path}", score=None)
        state["rungs"][index]["results"][name] = result
        save_state(state_path, state)
        runs += 1
        final = result["final"] or {}
        log(f"rung {index + 1}: {name}" + (f" FAILED ({result['error']})" if "error" in result else "")
            + f": held-out masked-LM accuracy {final.get('masked_lm_accuracy', float('nan')):.4f}, loss "
            f"{final.get('masked_lm_loss', float('nan')):.3f}, {final.get('masked_lm_bits_per_char', float('nan')):.3f}"
            f" bits/char; sentence order {final.get('sentence_order_accuracy', float('nan')):.4f} (chance band "
            f"{result['sentence_order_chance_band'][1]:.3f}); {result['cpu_seconds'] / 60:.1f} CPU min so far")
        write_results(state, settings, started)
    write_results(state, settings, started)
    for i, rung in enumerate(state["rungs"]):
        log(f"rung {i + 1}: {len(rung['results'])}/{len(rung['candidates'])} done; survivors {rung['survivors']}")


if __name__ == "__main__":
    define_flags()
    app.run(main)
