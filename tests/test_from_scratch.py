"""Pretraining from raw text, end to end at tiny sizes, as a user runs it: the top-level scripts one after another
(issue 26).

raw JSON Lines -> prepare_corpus.py -> create_vocab.py -> create_pretraining_data.py -> run_pretraining.py ->
run_classifier.py (from the pretraining checkpoint) -> predict.py (on the classifier's export).
"""

import glob
import gzip
import json
import math
import os
import re

import numpy as np
import pytest

from tests import helpers

BOOKS = sorted(glob.glob(os.path.join(helpers.DATA_DIR, "corpus", "gutenberg-*.txt")))
DOCUMENTS_PER_RECORD = 4
SHORT_TEXT = "Too short to keep."  # under prepare_corpus' default --min_document_chars (50)


def _run(script, args):
    result = helpers.run_script(script, args)
    assert result.returncode == 0, f"{script} failed:\n{helpers.log_tail(result)}"
    return result


def _write_raw_corpus(path):
    """A JSON Lines corpus from the shipped books: each book's documents (blank-line separated blocks of one
    sentence per line) joined DOCUMENTS_PER_RECORD at a time into one record, whose text holds them as paragraphs
    (a blank line between) with hard line breaks inside; plus one exact duplicate and one short record. Returns
    the number of records."""
    records = []
    for book in BOOKS:
        with open(book, encoding="utf-8") as f:
            blocks = [b.strip() for b in f.read().split("\n\n") if b.strip()]
        for i in range(0, len(blocks), DOCUMENTS_PER_RECORD):
            text = "\n\n".join(blocks[i:i + DOCUMENTS_PER_RECORD])
            records.append({"id": f"{os.path.basename(book)}:{i}", "text": text})
    assert any("\n\n" in r["text"] for r in records)
    records.insert(3, {"id": "duplicate", "text": records[1]["text"]})
    records.append({"id": "short", "text": SHORT_TEXT})
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")
    return len(records)


def _logged_losses(log, name):
    """{step: value} of `name` in run_pretraining's `step N/total: ...` lines."""
    found = {}
    for step, metrics in re.findall(r"step (\d+)/\d+: (.*)", log):
        match = re.search(rf"\b{name}=([-+0-9.eE]+|nan|inf)", metrics)
        if match:
            found[int(step)] = float(match.group(1))
    return found


@pytest.mark.slow
def test_pretraining_from_raw_text_to_predictions(tmp_path):
    # pylint: disable=import-outside-toplevel
    import sentencepiece as spm

    from albert_tf.checkpoints import latest_checkpoint, load_checkpoint, model_arrays
    from albert_tf.model import AlbertModel
    from albert_tf.tasks.classification import build_classifier

    # 1. Raw text.
    raw = tmp_path / "raw" / "books.jsonl.gz"
    raw.parent.mkdir()
    num_records = _write_raw_corpus(raw)

    # 2. prepare_corpus.py: cleaned, sentence-split, two shards.
    corpus_prefix = tmp_path / "corpus" / "books"
    result = _run("prepare_corpus.py", [f"--input_file={raw}", f"--output_file={corpus_prefix}",
                                        "--num_output_shards=2"])
    shards = [tmp_path / "corpus" / f"books-0000{i}-of-00002.txt" for i in range(2)]
    assert sorted(glob.glob(f"{corpus_prefix}-*")) == [str(s) for s in shards]
    log = result.stdout + result.stderr
    assert re.search(rf"read 1 files, .* {num_records} documents in", log), helpers.log_tail(result)
    assert "dropped 0 empty, 1 shorter than --min_document_chars, 1 exact duplicates" in log, helpers.log_tail(result)
    documents_written = int(re.search(r"wrote (\d+) documents", log).group(1))
    assert documents_written == num_records - 2
    shard_documents = 0
    for shard in shards:
        text = shard.read_text(encoding="utf-8")
        assert text and not text.startswith("\n") and not text.endswith("\n\n") and "\n\n\n" not in text
        documents = text.rstrip("\n").split("\n\n")
        shard_documents += len(documents)
        for document in documents:
            lines = document.split("\n")
            assert len(lines) > 1 and all(line.strip() == line and line for line in lines)
    assert shard_documents == documents_written
    all_text = "".join(s.read_text(encoding="utf-8") for s in shards)
    # One sentence per line: the books' first sentence is a line of its own, the short record is gone.
    assert "\nEmma Woodhouse, handsome, clever, and rich," in "\n" + all_text
    assert SHORT_TEXT not in all_text

    # 3. create_vocab.py: a 1,000-piece SentencePiece model with the original's special pieces.
    vocab_prefix = tmp_path / "vocab" / "small"
    _run("create_vocab.py", [f"--input_file={corpus_prefix}-*", f"--model_prefix={vocab_prefix}",
                             "--vocab_size=1000", "--input_sentence_size=20000", "--num_threads=2"])
    spm_model = f"{vocab_prefix}.model"
    processor = spm.SentencePieceProcessor(model_file=spm_model)
    assert processor.get_piece_size() == 1000
    assert [processor.id_to_piece(i) for i in range(5)] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]

    # 4. create_pretraining_data.py with that vocabulary.
    records = tmp_path / "records" / "books.tfrecord"
    _run("create_pretraining_data.py", [f"--input_file={corpus_prefix}-*", f"--output_file={records}",
                                        f"--spm_model_file={spm_model}", "--max_seq_length=64",
                                        "--max_predictions_per_seq=10", "--dupe_factor=2"])
    assert records.stat().st_size > 0

    # 5. run_pretraining.py: a tiny ALBERT of that vocabulary size, a few steps, evaluated and exported.
    config = helpers.tiny_config(vocab_size=1000)
    config_file = helpers.write_config(config, tmp_path / "albert_config.json")
    pretrain_dir, pretrain_export = tmp_path / "pretrain", tmp_path / "pretrain_export"
    steps = 60
    result = _run("run_pretraining.py", [
        f"--albert_config_file={config_file}", f"--input_file={records}", f"--spm_model_file={spm_model}",
        f"--output_dir={pretrain_dir}", f"--export_dir={pretrain_export}", "--do_train", "--do_eval",
        "--max_seq_length=64", "--max_predictions_per_seq=10", "--train_batch_size=8", "--eval_batch_size=8",
        f"--num_train_steps={steps}", "--num_warmup_steps=6", "--learning_rate=0.01",
        "--save_checkpoints_steps=20", "--iterations_per_loop=1", "--max_eval_steps=5", "--log_every=1"])
    log = result.stdout + result.stderr
    eval_results = dict(line.split(" = ") for line in
                        (pretrain_dir / "eval_results.txt").read_text().strip().splitlines())
    for key in ("masked_lm_loss", "masked_lm_accuracy", "sentence_order_loss", "sentence_order_accuracy"):
        assert math.isfinite(float(eval_results[key])), eval_results
    losses = _logged_losses(log, "masked_lm_loss")
    assert min(losses) == 1 and max(losses) == steps, helpers.log_tail(result)
    assert all(math.isfinite(v) for v in losses.values()), losses
    # The loss logged at step 1 is the first batch's, under the random initialisation: about ln 1000, as a model
    # of that vocabulary that knows nothing. (Later steps log the running mean since the last checkpoint.) The
    # trained model's eval loss (on the same records: no --eval_input_file) is clearly lower (about 5.9).
    assert abs(losses[1] - math.log(1000)) < 0.1, losses
    assert float(eval_results["masked_lm_loss"]) < losses[1] - 0.5, (eval_results, losses)
    assert (pretrain_export / str(steps) / "saved_model.pb").exists()
    pretrain_checkpoint = latest_checkpoint(str(pretrain_dir))
    assert pretrain_checkpoint and pretrain_checkpoint.endswith(f"ckpt-{steps}"), pretrain_checkpoint

    # 6. run_classifier.py: SST-2 fine-tuned from that checkpoint, with the same config and vocabulary.
    cls_dir, cls_export = tmp_path / "sst2", tmp_path / "cls_export"
    cls_steps = 4
    result = _run("run_classifier.py", [
        "--task_name=sst-2", f"--data_dir={helpers.SAMPLE_GLUE}", f"--albert_config_file={config_file}",
        f"--spm_model_file={spm_model}", f"--init_checkpoint={pretrain_checkpoint}", f"--output_dir={cls_dir}",
        f"--export_dir={cls_export}", "--do_train", "--do_eval", "--max_seq_length=64", "--train_batch_size=8",
        "--eval_batch_size=8", f"--train_step={cls_steps}", "--warmup_step=1", "--learning_rate=0.001",
        f"--save_checkpoints_steps={cls_steps}", "--iterations_per_loop=1"])
    log = result.stdout + result.stderr
    assert f"Initialised from {pretrain_checkpoint}" in log, helpers.log_tail(result)
    assert (cls_dir / "eval_results.txt").exists()
    pretrained = AlbertModel(config)
    load_checkpoint(pretrained, pretrain_checkpoint)
    classifier = build_classifier(config, 2)
    load_checkpoint(classifier, latest_checkpoint(str(cls_dir)))
    name = "bert/embeddings/word_embeddings"
    before, after = model_arrays(pretrained)[name], model_arrays(classifier)[name]
    assert before.shape == after.shape == (1000, config.embedding_size)
    # Started from the pretrained weights, moved a little by the few fine-tuning steps: far closer to them than a
    # fresh initialisation of the same config is (about sqrt(2) times their norm away).
    fresh = model_arrays(AlbertModel(config))[name]
    moved = np.linalg.norm(after - before)
    assert 0 < moved < 0.25 * np.linalg.norm(before), (moved, np.linalg.norm(before))
    assert moved < 0.25 * np.linalg.norm(fresh - before), (moved, np.linalg.norm(fresh - before))

    # 7. predict.py on the classifier's export.
    versions = sorted(os.listdir(cls_export))
    assert versions == [str(cls_steps)], versions
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("A Gripping, beautifully made FILM.\nThe plot is DULL and the Acting is worse.\n")
    predictions_file = tmp_path / "preds.jsonl"
    _run("predict.py", [f"--export_dir={cls_export / versions[0]}", f"--input_file={sentences}",
                        f"--output_file={predictions_file}"])
    predictions = [json.loads(line) for line in predictions_file.read_text().splitlines()]
    assert [p["index"] for p in predictions] == [0, 1]
    # The export computes what the fine-tuned checkpoint computes here, on the vocabulary's own (lower-cased) ids,
    # label for label. (A model this small and briefly trained gives about the same logits for any text, so this
    # checks the export's weights, head, label order and softmax, not its tokenization.)
    from albert_tf.data.glue import features_from_texts
    from albert_tf.text.tokenization import FullTokenizer

    texts = sentences.read_text().splitlines()
    features = features_from_texts(FullTokenizer(spm_model_file=spm_model, do_lower_case=True), texts, None, 64)
    logits = np.asarray(classifier({k: np.asarray(v) for k, v in features.items()}, training=False), np.float64)
    want = np.exp(logits - logits.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    for prediction, expected in zip(predictions, want):
        probabilities = np.asarray(prediction["probabilities"], dtype=np.float64).reshape(-1)
        np.testing.assert_allclose(probabilities, expected, atol=1e-6, rtol=0, err_msg=str(prediction))
        assert np.ravel(prediction["predictions"]).tolist() == [int(np.argmax(expected))], prediction
