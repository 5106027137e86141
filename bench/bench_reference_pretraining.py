r"""Pretraining here against an independent implementation: the same learning curve as Hugging Face's
`AlbertForPreTraining` in PyTorch, trained by a loop written to the original release's definitions.

Both sides start from the same weights (a step-0 checkpoint made by this project, converted to Hugging Face
safetensors by `albert_tf.convert`), see the same batches in the same order (made by this project's input
pipeline, `PretrainingTask.train_dataset`, from records of this project's `create_pretraining_data` with stored
masks) and train the same config with dropout 0:

* this project: `run_pretraining.py`'s code (`PretrainingParams` + the runner, `--init_checkpoint`,
  `--masked_lm_budget=0`), a checkpoint every `--eval_every` steps. Per-step losses are read back from the run's
  TensorBoard scalars (`<output_dir>/train`: running means over each Keras epoch, turned back into each step's
  value with the batches' masked-LM weights);
* the reference: `transformers.AlbertForPreTraining` (its encoder and heads; the MLM head applied at the masked
  positions), with the original's loss (masked-LM cross-entropy sum over `masked_lm_weights` / (sum of weights
  + 1e-5), plus the mean sentence-order cross-entropy), `AdamWeightDecayOptimizer` / LAMB (no bias correction,
  beta 0.9/0.999, epsilon 1e-6, weight decay 0.01 except for variables whose original TF1 name matches
  "LayerNorm", "layer_norm" or "bias"; LAMB's trust ratio skipped for the same), the learning rate of the
  original's `create_optimizer` (polynomial decay to 0 over the run, replaced by the linear warm-up while
  step - start_warmup_step < num_warmup_steps, evaluated at the step count before the update) and
  `clip_by_global_norm(1.0)`.

What is checked (and printed, and stored with every figure in `bench/results/reference_pretraining.json`):

1. step by step: the total training loss of the first `--compare_steps` steps of seed 1 agrees within
   `--loss_rtol` (relative), for AdamW and (`--lamb`, a shorter run of `--compare_steps` steps) LAMB; and the
   weights after those steps agree: for every variable, |Δ_here - Δ_reference| / |Δ_here| within
   `--update_rtol`, Δ being the change from the initial weights (this catches what the loss cannot see in a
   few steps, e.g. decaying the LayerNorm weights);
2. the held-out masked-LM and sentence-order losses every `--eval_every` steps: the mean of the reference's
   `--seeds` lies within the range of this project's runs over the same seeds (a seed changes the data order:
   which records come first and the shuffle), at every evaluation after step 0.

The plot `bench/figures/reference_pretraining.png` shows both sides' training loss per step and the held-out
losses. Default run (17 minutes on 2 shared cores): tiny config (`data/albert_config_tiny.json`, dropout
0), sequence 64, 20 predictions, batch 16, 300 steps of AdamW (lr 1e-3, 30 warm-up steps), evaluation every 50
steps on a held-out book, seeds 1,2,3, plus 50 steps of LAMB:

  pip install -r bench/requirements.txt -r bench/requirements-reference.txt
  python -m bench.bench_reference_pretraining

Shorter runs: `--num_train_steps=60 --eval_every=20 --compare_steps=20 --seeds=1,2` (a few minutes), or
`--nolamb`; `--max_seq_length=32 --num_train_steps=4 --num_warmup_steps=2 --eval_every=4 --compare_steps=4
--seeds=1 --nolamb` is the test's toy run. `--input_file` / `--eval_input_file` use your records instead of
building them from `data/corpus/` (their lengths must be the flags'). `--output_json` / `--output_figure` write
elsewhere (the test does).
"""

import glob
import json
import math
import os
import platform
import re
import time

from bench.support import common  # first: the environment every benchmark needs

from absl import app, flags

REPO = common.REPO

FLAGS = flags.FLAGS


def define_flags():
    """The flags (defined when run as a script, so that importing the module defines none)."""
    flags.DEFINE_string("input_file", None, "Training records (globs); default: built from data/corpus/ less the "
                        "held-out book.")
    flags.DEFINE_string("eval_input_file", None, "Held-out records; default: built from --heldout_book "
                        "(dupe_factor 2).")
    flags.DEFINE_string("heldout_book", "gutenberg-melville-moby_dick.txt", "The book of data/corpus/ held out.")
    flags.DEFINE_integer("dupe_factor", 2, "Copies (with other masks) of the training text in the built records.")
    flags.DEFINE_string("albert_config_file", common.TINY_CONFIG, "The model's config; dropout is set to 0.")
    flags.DEFINE_string("spm_model_file", common.SPM_MODEL, "The records' tokenizer.")
    flags.DEFINE_integer("max_seq_length", 64, "Sequence length of the records.")
    flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per record.")
    flags.DEFINE_integer("train_batch_size", 16, "Batch size.")
    flags.DEFINE_integer("num_train_steps", 300, "Steps of the AdamW runs.")
    flags.DEFINE_integer("num_warmup_steps", 30, "Linear warm-up steps of the AdamW runs.")
    flags.DEFINE_float("learning_rate", 1e-3, "Peak learning rate of the AdamW runs.")
    flags.DEFINE_integer("compare_steps", 50, "Steps compared step by step (seed 1); also the LAMB run's length.")
    flags.DEFINE_boolean("lamb", True, "Also compare LAMB step by step over --compare_steps steps.")
    flags.DEFINE_float("lamb_learning_rate", 5e-3, "Peak learning rate of the LAMB run.")
    flags.DEFINE_integer("lamb_warmup_steps", 5, "Warm-up steps of the LAMB run.")
    flags.DEFINE_integer("eval_every", 50, "Held-out evaluation (and checkpoint) every this many steps.")
    flags.DEFINE_integer("eval_batch_size", 32, "Batch size of the evaluation.")
    flags.DEFINE_integer("max_eval_steps", 20, "Batches of held-out records evaluated (at most).")
    flags.DEFINE_list("seeds", ["1", "2", "3"], "--random_seed of the runs (data order); the first is compared "
                      "step by step.")
    flags.DEFINE_integer("init_seed", 12345, "Seed of the initial weights.")
    flags.DEFINE_float("loss_rtol", 1e-3, "Step-by-step tolerance on the total loss (relative).")
    flags.DEFINE_float("update_rtol", 1e-3, "Tolerance on each variable's change from the initial weights.")
    flags.DEFINE_integer("threads", 1, "Threads of TensorFlow (intra and inter op) and of PyTorch.")
    flags.DEFINE_string("work_dir", None, "Where records, checkpoints and runs go (default: a temporary folder, "
                        "removed at the end).")
    flags.DEFINE_string("output_json", os.path.join(common.RESULTS_DIR, "reference_pretraining.json"),
                        "The results file.")
    flags.DEFINE_string("output_figure", os.path.join(common.FIGURES_DIR, "reference_pretraining.png"),
                        "The plot (empty: no plot).")
    # A fault to inject, to show the comparison catches it (the test does): the reference's decay exclusion patterns.
    flags.DEFINE_list("reference_decay_exclusions", ["LayerNorm", "layer_norm", "bias"],
                      "The original's exclude_from_weight_decay patterns, as the reference applies them.")


EXCLUDE = ("LayerNorm", "layer_norm", "bias")
MLM_EPSILON = 1e-5  # the original's denominator: sum of weights + 1e-5
# The key bias adds the same number to every score of a query's softmax, so its gradient is 0 in exact arithmetic:
# both sides move it by rounding noise that Adam scales up to full-size steps, differently on each side.
NOT_COMPARED = ("attention.key.bias",)


# ----------------------------------------------------------------------------------------------- the data

def build_records(work_dir):
    """(training records glob, held-out records) built with this project's create_pretraining_data."""
    from albert_tf.data.pretraining import PretrainingConfig, create_pretraining_data

    books = sorted(glob.glob(os.path.join(REPO, "data", "corpus", "gutenberg-*.txt")))
    heldout = [b for b in books if os.path.basename(b) == FLAGS.heldout_book]
    if not heldout:
        raise app.UsageError(f"--heldout_book {FLAGS.heldout_book} is not in data/corpus/")
    train_books = [b for b in books if b not in heldout]
    records_dir = os.path.join(work_dir, "records")
    os.makedirs(records_dir, exist_ok=True)
    common = dict(max_seq_length=FLAGS.max_seq_length, max_predictions_per_seq=FLAGS.max_predictions_per_seq)
    train = [os.path.join(records_dir, f"train-{i}.tfrecord") for i in range(4)]
    stats = create_pretraining_data(train_books, train, spm_model_file=FLAGS.spm_model_file,
                                    config=PretrainingConfig(dupe_factor=FLAGS.dupe_factor, **common))
    evaluation = os.path.join(records_dir, "heldout.tfrecord")
    create_pretraining_data(heldout, [evaluation], spm_model_file=FLAGS.spm_model_file,
                            config=PretrainingConfig(dupe_factor=2, random_seed=54321, **common))
    print(f"records: {stats}", flush=True)
    return os.path.join(records_dir, "train-*.tfrecord"), evaluation


def train_batches(params, steps):
    """The first `steps` batches the project's run takes, as numpy dicts: its own input function, one replica,
    built under the runner's seeds (the record buffer's shuffle takes TensorFlow's global seed, which the runner
    sets to --random_seed, as well as its own)."""
    import tensorflow as tf

    from albert_tf.tasks.pretraining import PretrainingTask
    from albert_tf.train.runner import runtime_scope

    with runtime_scope(params):
        dataset = PretrainingTask().train_dataset(params, tf.distribute.InputContext(), 0)
        return [dict(batch) for batch in dataset.take(steps).as_numpy_iterator()]


def eval_batches(eval_file):
    from albert_tf.data import records

    dataset = records.pretraining_dataset(eval_file, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
                                          FLAGS.eval_batch_size, is_training=False)
    return [dict(batch) for batch in dataset.take(FLAGS.max_eval_steps).as_numpy_iterator()]


# ----------------------------------------------------------------------------------------------- this project

def make_initial_checkpoint(config, work_dir):
    """This project's step-0 weights (native checkpoint) and their Hugging Face conversion (directory)."""
    import keras

    import albert_tf
    from albert_tf.checkpoints.conversion import convert
    from albert_tf.model import dummy_inputs

    keras.utils.set_random_seed(FLAGS.init_seed)
    model = albert_tf.AlbertForPretraining(config)
    model(dummy_inputs(num_predictions=1), training=False)
    prefix = albert_tf.save_checkpoint(model, os.path.join(work_dir, "init", "ckpt-0"), "native")
    config_file = os.path.join(work_dir, "albert_config.json")
    hf_dir = os.path.join(work_dir, "init_hf")
    to_huggingface(prefix, hf_dir, config_file, convert)
    return prefix, hf_dir


def to_huggingface(prefix, hf_dir, config_file, convert=None):
    """`python -m albert_tf.convert --output_format=huggingface` (its function): config.json + model.safetensors."""
    if convert is None:
        from albert_tf.checkpoints.conversion import convert
    convert(input_checkpoint=prefix, output_path=hf_dir, output_format="huggingface",
            albert_config_file=config_file)
    return hf_dir


def project_params(config, input_file, output_dir, init_checkpoint, optimizer, seed, num_train_steps,
                   num_warmup_steps, learning_rate):
    from albert_tf.tasks.pretraining import PretrainingParams

    return PretrainingParams(
        albert_config=config, input_file=input_file, output_dir=output_dir, init_checkpoint=init_checkpoint,
        max_seq_length=FLAGS.max_seq_length, max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        do_train=True, do_eval=False, train_batch_size=FLAGS.train_batch_size, optimizer=optimizer,
        learning_rate=learning_rate, num_train_steps=num_train_steps, num_warmup_steps=num_warmup_steps,
        save_checkpoints_steps=min(FLAGS.eval_every, num_train_steps), keep_checkpoint_max=0,
        iterations_per_loop=1, masked_lm_budget=0.0, random_seed=seed, log_every=0)


def read_scalars(log_dir):
    """{tag: {step: value}} of the TensorBoard event files in `log_dir`."""
    import tensorflow as tf

    scalars = {}
    for path in sorted(glob.glob(os.path.join(log_dir, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                number = tf.make_ndarray(value.tensor) if value.HasField("tensor") else value.simple_value
                scalars.setdefault(value.tag, {})[int(event.step)] = float(number)
    return scalars


def per_step_losses(scalars, batches, steps_per_epoch):
    """Each step's (MLM, SOP, total) loss, by the original's formula, from the run's logged running means.

    Keras' metrics are means over the epoch so far (reset at each epoch, one checkpoint interval): the MLM mean
    weighted by `masked_lm_weights`, the SOP mean over examples. Each step's sums follow from consecutive means.
    """
    mlm_means, sop_means = scalars["masked_lm_loss"], scalars["sentence_order_loss"]
    out = []
    mlm_total = weight_total = sop_total = 0.0
    for step in range(1, len(batches) + 1):
        index = (step - 1) % steps_per_epoch  # steps before this one in its epoch
        if index == 0:
            mlm_total = weight_total = sop_total = 0.0
        weights = float(batches[step - 1]["masked_lm_weights"].sum())
        size = len(batches[step - 1]["next_sentence_labels"])
        mlm_sum = mlm_means[step] * (weight_total + weights) - mlm_total
        sop_sum = sop_means[step] * (index + 1) * size - sop_total
        mlm_total, weight_total, sop_total = mlm_total + mlm_sum, weight_total + weights, sop_total + sop_sum
        mlm, sop = mlm_sum / (weights + MLM_EPSILON), sop_sum / size
        out.append((mlm, sop, mlm + sop))
    return out


class ProjectEvaluator:
    """Held-out losses of this project's checkpoints, through the task's own evaluation."""

    def __init__(self, config, eval_file):
        import tensorflow as tf

        from albert_tf.tasks.pretraining import PretrainingParams, PretrainingTask
        from albert_tf.train.optimization import create_optimizer

        self.task = PretrainingTask()
        self.params = PretrainingParams(
            albert_config=config, input_file=eval_file, eval_input_file=eval_file, output_dir="unused",
            max_seq_length=FLAGS.max_seq_length, max_predictions_per_seq=FLAGS.max_predictions_per_seq,
            eval_batch_size=FLAGS.eval_batch_size, max_eval_steps=FLAGS.max_eval_steps, do_eval=True)
        self.model = self.task.build_model(self.params)
        self.model.compile(optimizer=create_optimizer("adamw", 1e-3, 1))
        self.strategy = tf.distribute.get_strategy()

    def __call__(self, prefix):
        import tensorflow as tf

        import albert_tf

        if os.path.basename(prefix) == "ckpt-0":
            albert_tf.load_checkpoint(self.model, prefix)
        else:
            tf.train.Checkpoint(model=self.model).read(prefix).expect_partial()
        results = self.task.evaluate(self.model, self.params, self.strategy)
        return {"masked_lm_loss": results["masked_lm_loss"], "sentence_order_loss": results["sentence_order_loss"]}


def run_project(config, name, input_file, init_prefix, optimizer, seed, steps, warmup, lr, work_dir, batches,
                evaluator):
    """One run of this project's pretraining; returns per-step losses, eval curve, the checkpoints by step."""
    from albert_tf.tasks.pretraining import run_pretraining
    from albert_tf.train.runner import plan_steps

    output_dir = os.path.join(work_dir, name)
    params = project_params(config, input_file, output_dir, init_prefix, optimizer, seed, steps, warmup, lr)
    start = time.time()
    outcome = run_pretraining(params)
    seconds = time.time() - start
    assert outcome["step"] == steps, outcome
    steps_per_epoch = plan_steps(steps, params.save_checkpoints_steps, params.iterations_per_loop, 0)[0]
    losses = per_step_losses(read_scalars(os.path.join(output_dir, "train")), batches[:steps], steps_per_epoch)
    checkpoints = {0: init_prefix}
    for index in glob.glob(os.path.join(output_dir, "ckpt-*.index")):
        prefix = index[:-len(".index")]
        checkpoints[int(prefix.rsplit("-", 1)[1])] = prefix
    evals = {}
    if evaluator is not None:
        evals = {step: evaluator(prefix) for step, prefix in sorted(checkpoints.items())}
    print(f"  albert_tf {name}: {seconds:.1f} s, last loss {losses[-1][2]:.4f}", flush=True)
    return {"losses": losses, "evals": evals, "checkpoints": checkpoints, "seconds": seconds}


# ----------------------------------------------------------------------------------------------- the reference

_LAYER_PARTS = {"attention.query": "attention_1/self/query", "attention.key": "attention_1/self/key",
                "attention.value": "attention_1/self/value", "attention.dense": "attention_1/output/dense",
                "attention.LayerNorm": "LayerNorm", "ffn": "ffn_1/intermediate/dense",
                "ffn_output": "ffn_1/intermediate/output/dense", "full_layer_layer_norm": "LayerNorm_1"}
_OTHER_PARTS = {"albert.embeddings.LayerNorm": "bert/embeddings/LayerNorm",
                "albert.encoder.embedding_hidden_mapping_in": "bert/encoder/embedding_hidden_mapping_in",
                "albert.pooler": "bert/pooler/dense", "predictions.dense": "cls/predictions/transform/dense",
                "predictions.LayerNorm": "cls/predictions/transform/LayerNorm"}
_WHOLE = {"albert.embeddings.word_embeddings.weight": "bert/embeddings/word_embeddings",
          "albert.embeddings.position_embeddings.weight": "bert/embeddings/position_embeddings",
          "albert.embeddings.token_type_embeddings.weight": "bert/embeddings/token_type_embeddings",
          "predictions.bias": "cls/predictions/output_bias", "predictions.decoder.bias": "cls/predictions/output_bias",
          "sop_classifier.classifier.weight": "cls/seq_relationship/output_weights",
          "sop_classifier.classifier.bias": "cls/seq_relationship/output_bias"}


def original_name(hf_name):
    """The original release's TF1 variable name of a Hugging Face ALBERT parameter (what its optimizer's
    exclusion patterns are searched in)."""
    if hf_name in _WHOLE:
        return _WHOLE[hf_name]
    module, _, leaf = hf_name.rpartition(".")
    layer = re.fullmatch(r"albert\.encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.(.+)", module)
    if layer:
        group, inner, part = layer.groups()
        base = f"bert/encoder/transformer/group_{group}/inner_group_{inner}/{_LAYER_PARTS[part]}"
    elif module in _OTHER_PARTS:
        base = _OTHER_PARTS[module]
    else:
        raise KeyError(f"no original name for {hf_name}")
    norm = base.rsplit("/", 1)[-1].startswith("LayerNorm")
    return f"{base}/{ {'weight': 'gamma' if norm else 'kernel', 'bias': 'beta' if norm else 'bias'}[leaf] }"


def learning_rate_at(step, init_lr, num_train_steps, num_warmup_steps, start_warmup_step=0, power=1.0):
    """The original's `create_optimizer` schedule at global step `step` (the count before the update)."""
    decayed = init_lr * (1.0 - min(step, num_train_steps) / num_train_steps) ** power
    if num_warmup_steps:
        warm = step - start_warmup_step
        if warm < num_warmup_steps:
            return init_lr * warm / num_warmup_steps
    return decayed


class ReferenceOptimizer:
    """The original's AdamWeightDecayOptimizer (`lamb=False`) or LAMBOptimizer, on PyTorch tensors."""

    def __init__(self, named_params, lamb, exclusions, weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-6):
        import torch

        self.params = [(name, p) for name, p in named_params]
        self.lamb = lamb
        self.rate, self.beta_1, self.beta_2, self.epsilon = weight_decay_rate, beta_1, beta_2, epsilon
        excluded = {name: any(re.search(r, original_name(name)) for r in exclusions) for name, _ in self.params}
        self.decayed = {name: bool(weight_decay_rate) and not excluded[name] for name, _ in self.params}
        self.adapted = {name: not excluded[name] for name, _ in self.params}  # layer adaptation: same patterns
        self.m = {name: torch.zeros_like(p) for name, p in self.params}
        self.v = {name: torch.zeros_like(p) for name, p in self.params}

    def step(self, lr):
        import torch

        with torch.no_grad():
            for name, param in self.params:
                grad = param.grad
                if grad is None:
                    continue
                m = self.m[name].mul_(self.beta_1).add_(grad, alpha=1.0 - self.beta_1)
                v = self.v[name].mul_(self.beta_2).add_(grad * grad, alpha=1.0 - self.beta_2)
                update = m / (v.sqrt() + self.epsilon)
                if self.decayed[name]:
                    update = update + self.rate * param
                ratio = 1.0
                if self.lamb and self.adapted[name]:
                    w_norm, u_norm = torch.linalg.vector_norm(param), torch.linalg.vector_norm(update)
                    ratio = torch.where(w_norm > 0, torch.where(u_norm > 0, w_norm / u_norm, 1.0), 1.0)
                param.sub_(ratio * lr * update)


def load_reference(hf_dir):
    import torch
    from transformers import AlbertForPreTraining

    model, info = AlbertForPreTraining.from_pretrained(
        hf_dir, output_loading_info=True, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        classifier_dropout_prob=0.0, attn_implementation="eager", dtype=torch.float32)
    if info["missing_keys"] or info["unexpected_keys"] or info.get("mismatched_keys"):
        raise RuntimeError(f"the converted weights do not fit AlbertForPreTraining: {info}")
    return model


def reference_losses(model, batch):
    """The original's pretraining losses (MLM, SOP) of `batch` (numpy) through the Hugging Face modules."""
    import torch
    import torch.nn.functional as F

    tensor = {k: torch.from_numpy(v.astype("int64" if k != "masked_lm_weights" else "float32"))
              for k, v in batch.items()}
    out = model.albert(input_ids=tensor["input_ids"], attention_mask=tensor["input_mask"],
                       token_type_ids=tensor["segment_ids"])
    hidden = out.last_hidden_state
    positions = tensor["masked_lm_positions"]
    gathered = torch.gather(hidden, 1, positions[:, :, None].expand(-1, -1, hidden.shape[-1]))
    logits = model.predictions(gathered)  # [B, P, V]
    per_position = -torch.gather(F.log_softmax(logits, dim=-1), 2, tensor["masked_lm_ids"][:, :, None])[..., 0]
    weights = tensor["masked_lm_weights"]
    mlm = (weights * per_position).sum() / (weights.sum() + MLM_EPSILON)
    sop_logits = model.sop_classifier(out.pooler_output)
    sop = F.cross_entropy(sop_logits, tensor["next_sentence_labels"].reshape(-1))
    return mlm, sop, (weights * per_position).sum(), weights.sum()


def clip_by_global_norm(params, clip_norm=1.0):
    import torch

    grads = [p.grad for p in params if p.grad is not None]
    norm = torch.sqrt(sum((g * g).sum() for g in grads))
    factor = clip_norm / torch.maximum(norm, torch.tensor(clip_norm))
    for g in grads:
        g.mul_(factor)


def reference_eval(model, batches):
    """Held-out losses pooled as the project's evaluation pools them: the MLM mean over every weighted position,
    the SOP mean over every example."""
    import torch

    mlm_sum = weight_sum = sop_sum = 0.0
    count = 0
    with torch.no_grad():
        for batch in batches:
            _, sop, weighted, weights = reference_losses(model, batch)
            mlm_sum, weight_sum = mlm_sum + float(weighted), weight_sum + float(weights)
            size = len(batch["next_sentence_labels"])
            sop_sum, count = sop_sum + float(sop) * size, count + size
    return {"masked_lm_loss": mlm_sum / weight_sum, "sentence_order_loss": sop_sum / count}


def run_reference(hf_dir, batches, lamb, steps, warmup, lr, eval_steps, heldout, keep_weights_at=(),
                  exclusions=EXCLUDE):
    """Trains the Hugging Face model on `batches` with the original's loop; per-step losses, eval curve and the
    weights (numpy, Hugging Face names) at the steps of `keep_weights_at`. `exclusions`: the weight decay
    exclusion patterns (the original's unless a fault is injected)."""
    model = load_reference(hf_dir)
    model.train()
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    optimizer = ReferenceOptimizer(params, lamb, exclusions)
    losses, evals, weights = [], {}, {}
    start = time.time()
    for step in range(steps + 1):
        if step in eval_steps:
            model.eval()
            evals[step] = reference_eval(model, heldout)
            model.train()
        if step in keep_weights_at:
            weights[step] = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
        if step == steps:
            break
        model.zero_grad(set_to_none=True)
        mlm, sop, _, _ = reference_losses(model, batches[step])
        total = mlm + sop
        total.backward()
        clip_by_global_norm([p for _, p in params])
        optimizer.step(learning_rate_at(step, lr, steps, warmup))
        losses.append((float(mlm.detach()), float(sop.detach()), float(total.detach())))
    return {"losses": losses, "evals": evals, "weights": weights, "seconds": time.time() - start}


# ----------------------------------------------------------------------------------------------- comparisons

def compare_steps(here, reference, steps):
    """Max relative difference of the total loss over the first `steps` steps."""
    diffs = [abs(a[2] - b[2]) / abs(a[2]) for a, b in zip(here[:steps], reference[:steps])]
    return max(diffs), diffs


def compare_updates(init_hf, here_hf, reference_weights):
    """max over variables of |Δ_here - Δ_ref| / |Δ_here| (Δ: change from the initial weights), and the worst one."""
    import numpy as np
    from safetensors.numpy import load_file

    init = load_file(os.path.join(init_hf, "model.safetensors"))
    here = load_file(os.path.join(here_hf, "model.safetensors"))
    worst, worst_name, per_variable = 0.0, None, {}
    for name, value in here.items():
        if name not in reference_weights or name.endswith(NOT_COMPARED):
            continue
        ref_name = name
        delta_here = value - init[name]
        delta_ref = reference_weights[ref_name] - init[name]
        scale = float(np.linalg.norm(delta_here))
        if scale == 0.0:
            diff = float(np.linalg.norm(delta_ref))
        else:
            diff = float(np.linalg.norm(delta_here - delta_ref)) / scale
        per_variable[name] = diff
        if diff > worst:
            worst, worst_name = diff, name
    missing = sorted(set(reference_weights) - set(here) - {"predictions.decoder.weight", "predictions.decoder.bias"})
    if missing:
        raise RuntimeError(f"not in the converted checkpoint: {missing}")
    return worst, worst_name, per_variable


def spread_check(project_runs, reference_runs, steps):
    """Per eval step and loss: the project's seeds' range, the reference's seeds' mean, within or not, and the
    largest difference between the two sides' runs of one seed (the same batches)."""
    rows, ok = [], True
    for step in steps:
        row = {"step": step}
        for key in ("masked_lm_loss", "sentence_order_loss"):
            here = [run["evals"][step][key] for run in project_runs]
            ref = [run["evals"][step][key] for run in reference_runs]
            ref_mean = sum(ref) / len(ref)
            within = min(here) <= ref_mean <= max(here) or math.isclose(ref_mean, sum(here) / len(here),
                                                                        rel_tol=FLAGS.loss_rtol)
            row[key] = {"albert_tf": here, "reference": ref, "albert_tf_range": [min(here), max(here)],
                        "reference_mean": ref_mean, "within": within,
                        "max_same_seed_difference": max(abs(a - b) for a, b in zip(here, ref))}
            if step > 0:
                ok = ok and within
        rows.append(row)
    return ok, rows


def plot(result, path):
    """Left: both sides' training loss per step (AdamW, the first seed). Middle and right: the held-out losses
    of every seed, this project's seed range shaded, the reference's seeds as points and their mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, *panels) = plt.subplots(1, 3, figsize=(16, 4.5))
    adamw = result["adamw"]
    seed = str(adamw["seeds"][0])
    here, ref = adamw["albert_tf"][seed]["train_losses"], adamw["reference"][seed]["train_losses"]
    steps = range(1, len(here) + 1)
    left.plot(steps, [x[2] for x in here], label="albert_tf (run_pretraining)", lw=2, alpha=0.7)
    left.plot(steps, [x[2] for x in ref], "--", label="Hugging Face AlbertForPreTraining (PyTorch)", lw=1)
    left.axvline(result["settings"]["compare_steps"], color="gray", lw=0.5)
    left.set_xlabel("step")
    left.set_ylabel("training loss (MLM + SOP)")
    left.set_title(f"AdamW, seed {seed}: training loss per step")
    left.legend()
    rows = [r for r in adamw["eval_spread"] if r["step"] > 0]
    xs = [r["step"] for r in rows]
    for axis, key, title in zip(panels, ("masked_lm_loss", "sentence_order_loss"),
                                ("held-out masked-LM loss", "held-out sentence-order loss")):
        axis.fill_between(xs, [r[key]["albert_tf_range"][0] for r in rows],
                          [r[key]["albert_tf_range"][1] for r in rows], color="C0", alpha=0.25,
                          label="albert_tf, range of seeds")
        for i in range(len(adamw["seeds"])):
            axis.plot(xs, [r[key]["albert_tf"][i] for r in rows], "s", color="C0", ms=4,
                      label="albert_tf, each seed" if i == 0 else None)
            axis.plot(xs, [r[key]["reference"][i] for r in rows], "x", color="C1", ms=6,
                      label="reference, each seed" if i == 0 else None)
        axis.plot(xs, [r[key]["reference_mean"] for r in rows], "--", color="C1", label="reference, mean")
        axis.set_xlabel("step")
        axis.set_title(f"{title}, seeds {', '.join(map(str, adamw['seeds']))}")
        axis.legend(fontsize=8)
    fig.tight_layout()
    common.save_figure(fig, path, dpi=100)


# ----------------------------------------------------------------------------------------------- main

def versions():
    import keras
    import numpy
    import tensorflow as tf
    import torch
    import transformers

    return {"python": platform.python_version(), "tensorflow": tf.__version__, "keras": keras.__version__,
            "torch": torch.__version__, "transformers": transformers.__version__, "numpy": numpy.__version__}


def main(argv):
    del argv
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.threads)
    import numpy as np
    import torch

    torch.set_num_threads(FLAGS.threads)
    from albert_tf.config import AlbertConfig

    started = time.time()
    seeds = [int(s) for s in FLAGS.seeds]
    if FLAGS.compare_steps > FLAGS.num_train_steps:
        raise app.UsageError("--compare_steps must not exceed --num_train_steps")
    with common.scratch_dir(FLAGS.work_dir, "reference_pretraining_") as work_dir:
        config = AlbertConfig.from_json_file(FLAGS.albert_config_file)
        config.hidden_dropout_prob = 0.0
        config.attention_probs_dropout_prob = 0.0
        with open(os.path.join(work_dir, "albert_config.json"), "w", encoding="utf-8") as f:
            f.write(config.to_json_string())
        if FLAGS.input_file:
            input_file, eval_file = FLAGS.input_file, FLAGS.eval_input_file or FLAGS.input_file
        else:
            input_file, eval_file = build_records(work_dir)
            eval_file = FLAGS.eval_input_file or eval_file
        print(f"[{time.time() - started:.0f} s] records ready", flush=True)
        init_prefix, init_hf = make_initial_checkpoint(config, work_dir)
        heldout = eval_batches(eval_file)
        evaluator = ProjectEvaluator(config, eval_file)
        print(f"[{time.time() - started:.0f} s] initial weights converted, evaluator built", flush=True)

        runs = [("adamw", FLAGS.num_train_steps, FLAGS.num_warmup_steps, FLAGS.learning_rate, seeds)]
        if FLAGS.lamb:
            runs.append(("lamb", FLAGS.compare_steps, FLAGS.lamb_warmup_steps, FLAGS.lamb_learning_rate, seeds[:1]))
        result = {"command": common.command(),
                  "versions": versions(), "machine": platform.machine(), "cpus": os.cpu_count(),
                  "settings": {"albert_config": config.to_dict(), "max_seq_length": FLAGS.max_seq_length,
                               "max_predictions_per_seq": FLAGS.max_predictions_per_seq,
                               "train_batch_size": FLAGS.train_batch_size, "compare_steps": FLAGS.compare_steps,
                               "eval_every": FLAGS.eval_every, "eval_batch_size": FLAGS.eval_batch_size,
                               "max_eval_steps": FLAGS.max_eval_steps, "eval_examples": sum(
                                   len(b["input_ids"]) for b in heldout),
                               "input_file": FLAGS.input_file or f"built: data/corpus/gutenberg-*.txt less "
                                             f"{FLAGS.heldout_book}, dupe_factor {FLAGS.dupe_factor}",
                               "eval_input_file": FLAGS.eval_input_file or f"built: {FLAGS.heldout_book}",
                               "reference_decay_exclusions": FLAGS.reference_decay_exclusions,
                               "loss_rtol": FLAGS.loss_rtol, "update_rtol": FLAGS.update_rtol,
                               "threads": FLAGS.threads, "init_seed": FLAGS.init_seed}}
        verdicts = {}
        for optimizer, steps, warmup, lr, run_seeds in runs:
            print(f"{optimizer}: {steps} steps, warm-up {warmup}, lr {lr}, seeds {run_seeds}", flush=True)
            eval_steps = sorted({0, *range(FLAGS.eval_every, steps + 1, FLAGS.eval_every), steps})
            section = {"num_train_steps": steps, "num_warmup_steps": warmup, "learning_rate": lr,
                       "seeds": run_seeds, "albert_tf": {}, "reference": {}}
            project_runs, reference_runs = [], []
            for i, seed in enumerate(run_seeds):
                params = project_params(config, input_file, "unused", init_prefix, optimizer, seed, steps, warmup,
                                        lr)
                batches = train_batches(params, steps)
                print(f"[{time.time() - started:.0f} s] batches of seed {seed} read", flush=True)
                here = run_project(config, f"{optimizer}-seed{seed}", input_file, init_prefix, optimizer, seed,
                                   steps, warmup, lr, work_dir, batches, evaluator)
                # The weights are compared at the last checkpoint within the steps compared step by step.
                compare_at = [max(s for s in here["checkpoints"] if s <= FLAGS.compare_steps)] if i == 0 else []
                compare_at = [s for s in compare_at if s > 0]
                if i == 0:  # kept for a look afterwards (and for the test's fault injection)
                    np.savez(os.path.join(work_dir, f"batches-{optimizer}-seed{seed}.npz"),
                             **{k: np.stack([b[k] for b in batches]) for k in batches[0]})
                ref = run_reference(init_hf, batches, optimizer == "lamb", steps, warmup, lr, set(eval_steps),
                                    heldout, keep_weights_at=set(compare_at),
                                    exclusions=FLAGS.reference_decay_exclusions)
                print(f"  reference {optimizer}-seed{seed}: {ref['seconds']:.1f} s, last loss "
                      f"{ref['losses'][-1][2]:.4f}", flush=True)
                project_runs.append(here)
                reference_runs.append(ref)
                section["albert_tf"][str(seed)] = {"train_losses": here["losses"], "seconds": here["seconds"],
                                                   "evals": {str(k): v for k, v in here["evals"].items()}}
                section["reference"][str(seed)] = {"train_losses": ref["losses"], "seconds": ref["seconds"],
                                                   "evals": {str(k): v for k, v in ref["evals"].items()}}
                if i == 0:
                    n = min(FLAGS.compare_steps, steps)
                    worst, diffs = compare_steps(here["losses"], ref["losses"], n)
                    section["step_by_step"] = {"steps": n, "max_relative_loss_difference": worst,
                                               "relative_loss_differences": diffs, "pass": worst <= FLAGS.loss_rtol}
                    updates = {}
                    for step in compare_at:
                        converted = to_huggingface(here["checkpoints"][step],
                                                   os.path.join(work_dir, f"{optimizer}-seed{seed}-hf-{step}"),
                                                   os.path.join(work_dir, "albert_config.json"))
                        u_worst, u_name, _ = compare_updates(init_hf, converted, ref["weights"][step])
                        updates[str(step)] = {"max_relative_update_difference": u_worst, "variable": u_name,
                                              "pass": u_worst <= FLAGS.update_rtol}
                    section["weights"] = updates
                    print(f"[{time.time() - started:.0f} s] weights compared", flush=True)
                    print(f"  step by step ({n} steps): max relative loss difference {worst:.3g}; weight updates: "
                          + ", ".join(f"step {s} {u['max_relative_update_difference']:.3g} ({u['variable']})"
                                      for s, u in updates.items()), flush=True)
            spread_ok, rows = spread_check(project_runs, reference_runs, eval_steps)
            section["eval_spread"] = rows
            verdicts[optimizer] = {
                "step_by_step": section["step_by_step"]["pass"],
                "weights": all(u["pass"] for u in section["weights"].values()),
                "max_relative_loss_difference": section["step_by_step"]["max_relative_loss_difference"],
                "max_relative_update_difference": max(
                    [u["max_relative_update_difference"] for u in section["weights"].values()], default=None)}
            if len(run_seeds) > 1:
                verdicts[optimizer]["eval_within_seed_spread"] = spread_ok
            for row in rows:
                print(f"  eval step {row['step']}: " + "; ".join(
                    f"{k} albert_tf {row[k]['albert_tf_range'][0]:.4f}..{row[k]['albert_tf_range'][1]:.4f} "
                    f"reference mean {row[k]['reference_mean']:.4f} {'ok' if row[k]['within'] else 'OUTSIDE'}"
                    for k in ("masked_lm_loss", "sentence_order_loss")), flush=True)
            result[optimizer] = section
        result["verdicts"] = verdicts
        result["pass"] = all(v for verdict in verdicts.values() for k, v in verdict.items()
                             if isinstance(v, bool))
        result["seconds"] = time.time() - started
        os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output_json)), exist_ok=True)
        with open(FLAGS.output_json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
        if FLAGS.output_figure:
            plot(result, FLAGS.output_figure)
        print(json.dumps({"verdicts": verdicts, "pass": result["pass"]}, indent=1))
        print(f"wrote {FLAGS.output_json}" + (f" and {FLAGS.output_figure}" if FLAGS.output_figure else "")
              + f" in {result['seconds']:.0f} s")
    return 0 if result["pass"] else 1


if __name__ == "__main__":
    define_flags()
    app.run(main)
