"""Task-adaptive pretraining (Gururangan et al., 2020, "Don't Stop Pretraining"): a pretrained model trained on,
with its own objective, on the unlabelled training text of the task it is about to be fine-tuned on.

The text is the task's training sentences without their labels (bench/support/unlabelled_text.py: SST-2's whole
sentences, MRPC's sentences each once), in its documents of unrelated sentences. Every `HELD_OUT_EVERY`-th document
is held out of training, and the masked LM is measured on it before and after adaptation: the number that says the
model did adapt to the task's words. Sentence order stays in the objective (the original's), though these documents
have no order to learn: its accuracy on them stays at chance.
"""
import os

from bench.support import unlabelled_text

HELD_OUT_EVERY = 20
SOURCES = ("sst-2", "mrpc")  # the tasks with unlabelled training text in bench/support/unlabelled_text.py


def check_task(task, flag="task"):
    """Refuses, in one line naming `flag`, a task without unlabelled training text here."""
    if task not in SOURCES:
        raise SystemExit(f"bench_pretrain_finetune: error: {flag}: no unlabelled training text for {task} (tasks "
                         f"with one: {', '.join(SOURCES)})")


def split_documents(docs):
    """(training documents, held-out documents): every HELD_OUT_EVERY-th document, from the first, is held out."""
    held = docs[::HELD_OUT_EVERY]
    return [d for i, d in enumerate(docs) if i % HELD_OUT_EVERY], held


def make_records(directory, task, glue_dir, spm_model_file, seq, max_predictions, dupe_factor):
    """The task's text as pretraining records in `directory`: train.tfrecord (`dupe_factor` copies, each with its
    own masks) and heldout.tfrecord (one copy). Made once; returns {split: counts}."""
    from albert_tf.data.corpus import prepare_corpus  # pylint: disable=import-outside-toplevel
    from albert_tf.data.pretraining import PretrainingConfig, create_pretraining_data  # pylint: disable=import-outside-toplevel

    check_task(task)
    train, held = split_documents(unlabelled_text.documents(task, None, None, glue_dir))
    counts = {}
    for split, docs, dupe in (("train", train, dupe_factor), ("heldout", held, 1)):
        jsonl = os.path.join(directory, f"{split}.jsonl")
        text = os.path.join(directory, f"{split}.txt")
        unlabelled_text.write_jsonl(jsonl, docs)
        prepare_corpus([jsonl], text)
        config = PretrainingConfig(max_seq_length=seq, max_predictions_per_seq=max_predictions, dupe_factor=dupe)
        stats = create_pretraining_data(text, [os.path.join(directory, f"{split}.tfrecord")],
                                        spm_model_file=spm_model_file, config=config, num_workers=1)
        counts[split] = {"documents": stats.documents, "tokens": stats.tokens, "instances": stats.instances,
                         "dupe_factor": dupe}
    return counts


def pretraining_params(config, records_dir, counts, output_dir, init_checkpoint, seq, max_predictions, spm_model_file,
                       steps=0, learning_rate=0.0, batch_size=64, eval_every=0):
    """The `PretrainingParams` of adapting `init_checkpoint` for `steps` (LAMB, warm-up a tenth of the steps, then
    linear decay; the held-out text evaluated every `eval_every` steps), or with `steps` 0 of evaluating it as it
    is on the held-out text."""
    from albert_tf.tasks.pretraining import PretrainingParams  # pylint: disable=import-outside-toplevel

    held_batches = max(1, counts["heldout"]["instances"] // batch_size)
    train = steps > 0
    return PretrainingParams(
        albert_config=config, input_file=os.path.join(records_dir, "train.tfrecord" if train else "heldout.tfrecord"),
        eval_input_file=os.path.join(records_dir, "heldout.tfrecord"), output_dir=output_dir,
        init_checkpoint=init_checkpoint, max_seq_length=seq, max_predictions_per_seq=max_predictions,
        do_train=train, do_eval=True, train_batch_size=batch_size, eval_batch_size=batch_size, optimizer="lamb",
        learning_rate=learning_rate if train else 1e-3, num_train_steps=steps if train else 1,
        num_warmup_steps=steps // 10, save_checkpoints_steps=eval_every if train else 1, keep_checkpoint_max=1,
        iterations_per_loop=eval_every if train else 1, max_eval_steps=held_batches, masked_lm_budget=0.0,
        spm_model_file=spm_model_file, log_every=eval_every if train else 0)
