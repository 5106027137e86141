"""The runner's guarantees, for every task: one resume skip right for any replica and pipeline count (a
classification and a SQuAD run on two CPU replicas, SIGKILLed and resumed, end bit-identical to uninterrupted
runs), one run per output directory, nothing written before the inputs and checkpoints are checked, versioned
exports that never remove anything, and errors as one line."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.errors import AlbertError, RunError
from albert_tf.tasks.classification import run_classifier
from albert_tf.train.runner import resume_skip
from tests.helpers import (
    REPO,
    SAMPLE_GLUE,
    SPM,
    SQUAD_V1,
    checkpoint_weights,
    flag_args,
    lock_held_elsewhere,
    log_tail,
    sst2_classifier_params,
    subprocess_env,
    tiny_config,
    write_config,
)


@pytest.mark.parametrize("replicas, pipelines, done, expected", [
    (1, 1, 6, 6),    # one device
    (2, 1, 6, 12),   # MirroredStrategy: one pipeline feeds both replicas
    (2, 2, 6, 6),    # two workers, one replica each
    (4, 2, 6, 12),   # two workers with two replicas each
    (8, 1, 3, 24),   # a TPU host feeding 8 cores
])
def test_resume_skip_counts_batches_per_pipeline(replicas, pipelines, done, expected):
    context = tf.distribute.InputContext(num_input_pipelines=pipelines, input_pipeline_id=0,
                                         num_replicas_in_sync=replicas)
    assert resume_skip(done, context) == expected


# ------------------------------------------------------------------------------------------------------------------
# Kill and resume under MirroredStrategy, through the scripts.

TWO_CPUS = textwrap.dedent("""
    import sys
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from albert_tf.scripts.{script} import run
    run()
""")


def _start(script, args, log):
    return subprocess.Popen([sys.executable, "-c", TWO_CPUS.format(script=script), *args], cwd=REPO,
                            env=subprocess_env(), stdout=log, stderr=subprocess.STDOUT)


def _run_to_end(script, args, log_path):
    with open(log_path, "w") as log:
        process = _start(script, args, log)
        assert process.wait(timeout=600) == 0, open(log_path).read()[-4000:]


def _kill_after_first_checkpoint(script, args, out, log_path, last_step):
    with open(log_path, "w") as log:
        process = _start(script, args, log)
        deadline = time.time() + 600
        while not os.path.exists(os.path.join(out, "checkpoint")):
            assert process.poll() is None, open(log_path).read()[-4000:]
            assert time.time() < deadline
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait()
    latest = tf.train.latest_checkpoint(out)
    assert latest and int(latest.rsplit("-", 1)[1]) < last_step, "the run ended before it could be killed"
    return latest


def _assert_identical(a, b):
    assert set(a) == set(b) and len(a) > 10  # the encoder's weights, not the head's alone
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def _dropout_config(tmp_path):
    return write_config(tiny_config(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1),
                        tmp_path / "albert_config.json")


@pytest.mark.slow
def test_classifier_on_two_replicas_killed_and_resumed_is_bit_identical(tmp_path):
    common = dict(task_name="sst-2", data_dir=SAMPLE_GLUE, albert_config_file=_dropout_config(tmp_path),
                  spm_model_file=SPM, max_seq_length=32, train_batch_size=8, learning_rate=1e-3, train_step=24,
                  warmup_step=2, save_checkpoints_steps=2, iterations_per_loop=1, do_train=True,
                  strategy="mirrored", log_every=0)
    straight, killed = str(tmp_path / "straight"), str(tmp_path / "killed")
    _run_to_end("run_classifier", flag_args(output_dir=straight, **common), tmp_path / "straight.log")
    _kill_after_first_checkpoint("run_classifier", flag_args(output_dir=killed, **common), killed,
                                 tmp_path / "killed.log", 24)
    _run_to_end("run_classifier", flag_args(output_dir=killed, **common), tmp_path / "resumed.log")
    assert "Resumed from" in open(tmp_path / "resumed.log").read()
    _assert_identical(checkpoint_weights(os.path.join(killed, "ckpt-24")),
                      checkpoint_weights(os.path.join(straight, "ckpt-24")))


def _squad_subset(path, questions=48):
    with open(SQUAD_V1, encoding="utf-8") as f:
        data = json.load(f)
    kept, count = [], 0
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            if count < questions:
                kept.append({"title": article["title"], "paragraphs": [paragraph]})
                count += len(paragraph["qas"])
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"version": "1.1", "data": kept}, f)
    return str(path)


@pytest.mark.slow
def test_squad_on_two_replicas_killed_and_resumed_is_bit_identical(tmp_path):
    train_file = _squad_subset(tmp_path / "train.json")
    common = dict(train_file=train_file, albert_config_file=_dropout_config(tmp_path), spm_model_file=SPM,
                  max_seq_length=64, doc_stride=32, max_query_length=16, train_batch_size=4, learning_rate=1e-3,
                  num_train_epochs=1.0, save_checkpoints_steps=2, iterations_per_loop=1, do_train=True,
                  strategy="mirrored", log_every=0)
    straight, killed = str(tmp_path / "straight"), str(tmp_path / "killed")
    _run_to_end("run_squad", flag_args(output_dir=straight, **common), tmp_path / "straight.log")
    last = tf.train.latest_checkpoint(straight)
    steps = int(last.rsplit("-", 1)[1])
    assert steps >= 10
    _kill_after_first_checkpoint("run_squad", flag_args(output_dir=killed, **common), killed,
                                 tmp_path / "killed.log", steps)
    _run_to_end("run_squad", flag_args(output_dir=killed, **common), tmp_path / "resumed.log")
    _assert_identical(checkpoint_weights(os.path.join(killed, f"ckpt-{steps}")), checkpoint_weights(last))


# ------------------------------------------------------------------------------------------------------------------
# Output directories.

def test_a_second_run_on_the_same_output_dir_is_refused_naming_the_holder(tmp_path):
    out = tmp_path / "run"
    with lock_held_elsewhere(out, "--output_dir") as pid:
        start = time.time()
        with pytest.raises(RunError, match=rf"--output_dir {out} is in use by another run \(pid {pid}"):
            run_classifier(sst2_classifier_params(out))
        assert time.time() - start < 30  # refused at once, before any data or model work


@pytest.mark.slow
def test_a_failed_run_leaves_nothing_that_blocks_the_corrected_rerun(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(AlbertError, match="--init_checkpoint"):
        run_classifier(sst2_classifier_params(out, init_checkpoint=str(tmp_path / "missing.ckpt")))
    assert not out.exists() or not os.listdir(out)
    empty_dev = tmp_path / "glue" / "SST-2"
    empty_dev.mkdir(parents=True)
    for split in ("train", "test"):
        (empty_dev / f"{split}.tsv").write_text(open(os.path.join(SAMPLE_GLUE, "SST-2", f"{split}.tsv")).read())
    (empty_dev / "dev.tsv").write_text("sentence\tlabel\n")
    with pytest.raises(AlbertError, match=r"dev.tsv: the dev split holds no example"):
        run_classifier(sst2_classifier_params(out, data_dir=str(tmp_path / "glue"), do_eval=True))
    assert not out.exists() or not os.listdir(out)
    outcome = run_classifier(sst2_classifier_params(out))  # the corrected run
    assert outcome["step"] == 2


@pytest.mark.slow
def test_checkpoints_without_their_config_are_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "run"
    run_classifier(sst2_classifier_params(out))
    os.remove(out / "albert_config.json")
    before = sorted(os.listdir(out))
    with pytest.raises(RunError, match="holds checkpoints but no albert_config.json"):
        run_classifier(sst2_classifier_params(out, train_step=4))
    assert sorted(os.listdir(out)) == before


@pytest.mark.slow
def test_versioned_exports_never_remove_what_the_run_did_not_write(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    first = run_classifier(sst2_classifier_params(out, export_dir=str(out)))  # --export_dir=<output_dir> is harmless
    assert first["export_dir"] == os.path.join(str(out), "2")
    assert os.path.exists(out / "2" / "saved_model.pb") and os.path.exists(out / "ckpt-2.index")
    stamp = os.stat(out / "2" / "saved_model.pb").st_mtime_ns
    second = run_classifier(sst2_classifier_params(out, export_dir=str(out), train_step=4))
    assert second["export_dir"] == os.path.join(str(out), "4")
    assert os.stat(out / "2" / "saved_model.pb").st_mtime_ns == stamp  # the older version is kept, untouched
    assert (out / "notes.txt").read_text() == "mine"
    again = run_classifier(sst2_classifier_params(out, export_dir=str(out), train_step=4))  # nothing to train: kept as it is
    assert again["export_dir"] == os.path.join(str(out), "4")
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".albert_tf")]


@pytest.mark.slow
def test_stale_checkpoint_temporaries_are_removed_on_the_next_start(tmp_path):
    out = tmp_path / "run"
    run_classifier(sst2_classifier_params(out))
    (out / "ckpt-4_temp").mkdir()
    (out / "ckpt-4_temp" / "part-00000-of-00001.data-00000-of-00001").write_text("half")
    assert run_classifier(sst2_classifier_params(out, train_step=4))["step"] == 4
    assert not (out / "ckpt-4_temp").exists() and (out / "ckpt-4.index").exists()


# ------------------------------------------------------------------------------------------------------------------
# Errors reach the user as one line.

def _one_line_error(result, script):
    assert result.returncode == 1, log_tail(result)
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{script}: error: ")
    return last


@pytest.mark.slow
def test_a_corrupted_record_file_is_named(tmp_path, pretraining_records):
    path, seq, preds = pretraining_records
    data = open(path, "rb").read()
    corrupt = tmp_path / "corrupt.tfrecord"
    corrupt.write_bytes(data[:len(data) // 2] + bytes(64) + data[len(data) // 2:])
    config = write_config(tiny_config(), tmp_path / "albert_config.json")
    result = subprocess.run([sys.executable, os.path.join(REPO, "run_pretraining.py"), *flag_args(
        albert_config_file=config, input_file=str(corrupt), output_dir=str(tmp_path / "out"), max_seq_length=seq,
        max_predictions_per_seq=preds, train_batch_size=2, num_train_steps=40, num_warmup_steps=0,
        save_checkpoints_steps=20, iterations_per_loop=1, log_every=0)], cwd=REPO, env=subprocess_env(),
        capture_output=True, text=True, timeout=300, check=False)
    last = _one_line_error(result, "run_pretraining.py")
    assert f"--input_file: {corrupt} is truncated or corrupted" in last
