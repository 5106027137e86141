"""Damaged checkpoints: a corrupt, truncated, incomplete, missing or foreign checkpoint is reported as one line
naming it and what is wrong, never a traceback, and a checkpoint that cannot be read is never said not to fit
the model.

In-process: `load_checkpoint` / `detect_format` / `latest_checkpoint` on every kind of damage to an original
TF1 and a native TF2 checkpoint and to a Hugging Face directory, and the runner's `load_init_checkpoint` and
resume. Then a few scripts in a subprocess: run_classifier.py (a corrupt --init_checkpoint; a resume from an
--output_dir whose `checkpoint` state file is garbage), export_model.py and `python -m albert_tf.convert` (a
truncated checkpoint) and run_pretraining.py (a missing --init_checkpoint).
"""

import glob
import os
import shutil
import subprocess
import sys
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints import (
    CheckpointMismatchError,
    CheckpointNotFoundError,
    CorruptCheckpointError,
    detect_format,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from albert_tf.config import AlbertConfig
from albert_tf.model import AlbertModel, dummy_inputs
from albert_tf.train import best_checkpoint, runner
from tests.helpers import (
    REPO,
    SAMPLE_GLUE,
    SPM,
    assert_one_line_error,
    leftovers,
    run_script,
    sst2_classifier_params,
    subprocess_env,
    tiny_config,
    tree_snapshot,
    write_config,
)

GARBAGE = bytes(np.random.default_rng(25).integers(0, 256, 512, dtype=np.uint8)) + b"\xff\xfe\x80"


# ------------------------------------------------------------------------------------------------------------------
# Helpers: pristine checkpoints, and the damage done to copies of them.

def _config():
    return AlbertConfig(vocab_size=60, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)


def _model(config=None):
    model = AlbertModel(config or _config())
    model(dummy_inputs(), training=False)
    return model


def _write(fmt, directory, config=None):
    """A checkpoint of `fmt` in `directory` (a new one): the path a user would pass."""
    model = _model(config)
    os.makedirs(directory)
    if fmt == "original":
        save_checkpoint(model, os.path.join(directory, "model.ckpt"), "original")
    elif fmt == "native":  # as training writes it: ckpt-1 and a `checkpoint` state file
        tf.train.CheckpointManager(tf.train.Checkpoint(model=model), directory, max_to_keep=3).save()
    else:
        save_checkpoint(model, directory, "huggingface")
    return str(directory)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    root = tmp_path_factory.mktemp("pristine")
    return {fmt: _write(fmt, str(root / fmt)) for fmt in ("original", "native", "huggingface")}


def _prefix(directory):
    (index,) = glob.glob(os.path.join(directory, "*.index"))
    return index[:-len(".index")]


def _data_file(directory):
    (data,) = glob.glob(_prefix(directory) + ".data-*")
    return data


def _overwrite(path, data):
    """Replaces the file at `path` with `data` (bytes); returns the path."""
    with open(path, "wb") as f:
        f.write(data)
    return path


def _truncate(path):
    """Cuts the file at `path` to its first half; returns the path."""
    with open(path, "rb") as f:
        data = f.read()
    return _overwrite(path, data[:len(data) // 2])


def _garbage_state(d):
    return _overwrite(os.path.join(d, "checkpoint"), GARBAGE)


def _unparsable_state(d):  # text, but no CheckpointState: TF ignores it (and training would overwrite it)
    with open(os.path.join(d, "checkpoint"), "w", encoding="utf-8") as f:
        f.write("these are my notes, not a checkpoint state\n")
    return os.path.join(d, "checkpoint")


def _empty_state(d):
    return _overwrite(os.path.join(d, "checkpoint"), b"")


def _garbage_index(d):
    return _overwrite(_prefix(d) + ".index", GARBAGE)


def _empty_index(d):
    return _overwrite(_prefix(d) + ".index", b"")


def _truncated_data(d):
    _truncate(_data_file(d))
    return _prefix(d)


def _flipped_data(d):  # same size, bytes in the middle inverted: only the checksums can tell
    path = _data_file(d)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    middle = len(data) // 2
    data[middle:middle + 16] = bytes(255 - b for b in data[middle:middle + 16])
    with open(path, "wb") as f:
        f.write(bytes(data))
    return _prefix(d)


def _missing_data(d):
    os.remove(_data_file(d))
    return _prefix(d)


# (damage, what the message must say besides the file it returns: a string, or a tuple of strings)
TF_DAMAGE = {
    "garbage_state": (_garbage_state, "not a TF checkpoint state file"),
    "unparsable_state": (_unparsable_state, "not a TF checkpoint state file"),
    "empty_state": (_empty_state, "names no checkpoint"),
    "garbage_index": (_garbage_index, "is not a checkpoint index"),
    "empty_index": (_empty_index, "is not a checkpoint index"),
    "truncated_data": (_truncated_data, "is truncated: "),
    "flipped_data": (_flipped_data, ("is corrupt: ", "Checksum does not match")),  # ours, and TensorFlow's why
    "missing_data": (_missing_data, "is incomplete: "),
}


def _copy(pristine, fmt, tmp_path):
    target = str(tmp_path / fmt)
    shutil.copytree(pristine[fmt], target)
    return target


def _weights(model):
    return [np.array(v.numpy()) for v in model.weights]


def _assert_corrupt(path, named, says, model=None):
    model = model or _model()
    before = _weights(model)
    with pytest.raises(CorruptCheckpointError) as err:
        load_checkpoint(model, path)
    message = str(err.value)
    assert "\n" not in message, message
    assert named in message and all(part in message for part in ((says,) if isinstance(says, str) else says)), message
    assert "does not fit" not in message and "lacks" not in message, message
    for a, b in zip(before, _weights(model)):  # nothing was assigned
        np.testing.assert_array_equal(a, b)
    return message


# ------------------------------------------------------------------------------------------------------------------
# load_checkpoint / detect_format, every damage to a TF checkpoint.

@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["original", "native"])
@pytest.mark.parametrize("damage", sorted(TF_DAMAGE))
def test_a_damaged_tf_checkpoint_is_corrupt_naming_the_file(pristine, fmt, damage, tmp_path):
    directory = _copy(pristine, fmt, tmp_path)
    prefix = _prefix(directory)
    do, says = TF_DAMAGE[damage]
    named = do(directory)
    _assert_corrupt(directory, named, says)
    if not damage.endswith("_state"):  # the prefix itself, as --init_checkpoint=<dir>/model.ckpt
        _assert_corrupt(prefix, named, says)


@pytest.mark.parametrize("fmt", ["original", "native"])
def test_a_truncated_data_shard_is_found_by_the_load_not_the_detection(pristine, fmt, tmp_path):
    directory = _copy(pristine, fmt, tmp_path)
    _truncated_data(directory)
    assert detect_format(directory) == fmt
    _assert_corrupt(directory, _prefix(directory), "truncated")


@pytest.mark.parametrize("damage", ["garbage_index", "empty_index", "garbage_state", "unparsable_state"])
def test_detection_reports_an_index_or_state_file_that_is_none(pristine, damage, tmp_path):
    directory = _copy(pristine, "native", tmp_path)
    do, says = TF_DAMAGE[damage]
    named = do(directory)
    with pytest.raises(CorruptCheckpointError, match=says) as err:
        detect_format(directory)
    assert named in str(err.value)


@pytest.mark.parametrize("path", ["nowhere/model.ckpt", "empty_dir", "empty_dir/model.ckpt"])
def test_a_missing_checkpoint_is_not_found_naming_it(path, tmp_path):
    (tmp_path / "empty_dir").mkdir()
    path = str(tmp_path / path)
    with pytest.raises(CheckpointNotFoundError, match="no checkpoint found at") as err:
        load_checkpoint(_model(), path)
    assert path in str(err.value) and "does not fit" not in str(err.value)
    with pytest.raises(CheckpointNotFoundError):
        detect_format(path)


def _foreign_native(directory):  # another model's TF2 checkpoint, under the same root name as ours
    dense = keras.layers.Dense(3)
    dense.build((None, 2))
    os.makedirs(directory)
    return tf.train.Checkpoint(model=dense).write(os.path.join(directory, "ckpt"))


def _foreign_tf1(directory):
    os.makedirs(directory)
    prefix = os.path.join(directory, "model.ckpt")
    with tf.device("/cpu:0"):
        tf.raw_ops.SaveV2(prefix=prefix, tensor_names=["dense/kernel", "global_step"], shape_and_slices=["", ""],
                          tensors=[tf.zeros([2, 3]), tf.constant(7, tf.int64)])
    return prefix


@pytest.mark.parametrize("make", [_foreign_native, _foreign_tf1])
def test_a_foreign_checkpoint_does_not_fit_naming_what_is_missing(make, tmp_path):
    path = make(str(tmp_path / "foreign"))
    with pytest.raises(CheckpointMismatchError, match=r"lacks \d+ encoder weight.*ALBERT checkpoint") as err:
        load_checkpoint(_model(), os.path.dirname(path))
    assert "\n" not in str(err.value)


def test_a_checkpoint_of_another_config_does_not_fit(tmp_path):
    path = _write("original", str(tmp_path / "other"), AlbertConfig(**{**_config().to_dict(), "hidden_size": 24,
                                                                        "num_attention_heads": 2}))
    with pytest.raises(CheckpointMismatchError, match="shape mismatch"):
        load_checkpoint(_model(), path)


# ------------------------------------------------------------------------------------------------------------------
# Hugging Face directories.

def _truncated_safetensors(d):
    return _truncate(os.path.join(d, "model.safetensors"))


def _garbage_safetensors(d):
    return _overwrite(os.path.join(d, "model.safetensors"), GARBAGE)


def _empty_safetensors(d):
    return _overwrite(os.path.join(d, "model.safetensors"), b"")


def _garbage_config(d):
    return _overwrite(os.path.join(d, "config.json"), GARBAGE)


def _truncated_config(d):
    return _truncate(os.path.join(d, "config.json"))


def _list_config(d):
    with open(os.path.join(d, "config.json"), "w", encoding="utf-8") as f:
        f.write("[1, 2, 3]")
    return os.path.join(d, "config.json")


HF_DAMAGE = {
    "truncated_safetensors": (_truncated_safetensors, "corrupt or truncated"),
    "garbage_safetensors": (_garbage_safetensors, "corrupt or truncated"),
    "empty_safetensors": (_empty_safetensors, "corrupt or truncated"),
    "garbage_config": (_garbage_config, "is corrupt"),
    "truncated_config": (_truncated_config, "not valid JSON"),
    "list_config": (_list_config, "not a model config"),
}


@pytest.mark.parametrize("damage", sorted(HF_DAMAGE))
def test_a_damaged_huggingface_directory_is_corrupt_naming_the_file(pristine, damage, tmp_path):
    directory = _copy(pristine, "huggingface", tmp_path)
    do, says = HF_DAMAGE[damage]
    named = do(directory)
    assert detect_format(directory) == "huggingface"
    _assert_corrupt(directory, named, says)


def test_a_config_json_that_is_not_text_is_no_keras_hub_preset(tmp_path):
    _garbage_config(str(tmp_path))  # and no model.safetensors: nothing is there
    with pytest.raises(CheckpointNotFoundError, match="no checkpoint found"):
        detect_format(str(tmp_path))


# ------------------------------------------------------------------------------------------------------------------
# The state file helper, and everything that reads a directory's state file.

def test_latest_checkpoint(pristine, tmp_path):
    directory = _copy(pristine, "native", tmp_path)
    assert latest_checkpoint(directory) == os.path.join(directory, "ckpt-1")
    assert latest_checkpoint(str(tmp_path)) is None  # no state file
    with open(os.path.join(directory, "checkpoint"), "w", encoding="utf-8") as f:
        f.write('model_checkpoint_path: "ckpt-9"\n')
    assert latest_checkpoint(directory) is None  # it names files that are gone, as tf.train.latest_checkpoint
    assert detect_format(directory) == "native"  # and the one checkpoint there is used
    for damage in ("garbage_state", "unparsable_state", "empty_state"):
        do, says = TF_DAMAGE[damage]
        named = do(directory)
        with pytest.raises(CorruptCheckpointError, match=says) as err:
            latest_checkpoint(directory)
        assert named in str(err.value)


def test_best_checkpoint_state_file_that_is_none_is_named(tmp_path):
    best = tmp_path / best_checkpoint.BEST_DIR
    best.mkdir()
    named = _garbage_state(str(best))
    with pytest.raises(CorruptCheckpointError, match="not a TF checkpoint state file") as err:
        best_checkpoint.best_checkpoint_prefix(str(tmp_path))
    assert named in str(err.value)


# ------------------------------------------------------------------------------------------------------------------
# The runner: --init_checkpoint, and resuming from --output_dir.

def _init(path):
    return types.SimpleNamespace(init_checkpoint=path, init_from_group0=False)


@pytest.mark.parametrize("damage", ["garbage_state", "truncated_data", "flipped_data", "garbage_index"])
def test_an_unreadable_init_checkpoint_names_the_flag_and_never_says_does_not_fit(pristine, damage, tmp_path):
    directory = _copy(pristine, "original", tmp_path)
    named = TF_DAMAGE[damage][0](directory)
    with pytest.raises(CorruptCheckpointError) as err:
        runner.load_init_checkpoint(_model(), _init(directory))
    message = str(err.value)
    assert message.startswith("--init_checkpoint: ") and named in message, message
    assert "does not fit" not in message


def test_a_missing_init_checkpoint_names_the_flag_and_never_says_does_not_fit(tmp_path):
    path = str(tmp_path / "nowhere" / "model.ckpt")
    with pytest.raises(CheckpointNotFoundError, match="^--init_checkpoint: no checkpoint found at") as err:
        runner.load_init_checkpoint(_model(), _init(path))
    assert path in str(err.value) and "does not fit" not in str(err.value)


def test_a_foreign_init_checkpoint_does_not_fit(tmp_path):
    path = _foreign_native(str(tmp_path / "foreign"))
    with pytest.raises(CheckpointMismatchError, match=r"^--init_checkpoint \S+ does not fit the model .*lacks"):
        runner.load_init_checkpoint(_model(), _init(path))


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """An --output_dir of a 2-step classifier run (ckpt-2, its state file and albert_config.json)."""
    from albert_tf.tasks.classification import run_classifier  # pylint: disable=import-outside-toplevel

    out = tmp_path_factory.mktemp("trained") / "run"
    run_classifier(sst2_classifier_params(out))
    assert os.path.exists(out / "ckpt-2.index")
    return str(out)


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["unparsable_state", "truncated_data", "flipped_data", "garbage_index"])
def test_resuming_from_a_damaged_output_dir_names_the_file_and_changes_nothing(trained_run, damage, tmp_path):
    from albert_tf.tasks.classification import run_classifier  # pylint: disable=import-outside-toplevel

    out = str(tmp_path / "run")
    shutil.copytree(trained_run, out)
    named = TF_DAMAGE[damage][0](out)
    before = tree_snapshot(out)
    with pytest.raises(CorruptCheckpointError) as err:
        run_classifier(sst2_classifier_params(out, train_step=4))
    message = str(err.value)
    assert named in message and "\n" not in message, message
    assert tree_snapshot(out) == before  # TF would have ignored an unparsable state file and overwritten it
    assert not leftovers(out)


# ------------------------------------------------------------------------------------------------------------------
# The scripts: one line on stderr, no traceback, nothing of the user's changed, nothing partial left.

def _tiny_original(directory):
    """An original TF1 checkpoint of the tiny config the script tests build, and that config's file."""
    model = AlbertModel(tiny_config())
    model(dummy_inputs(), training=False)
    os.makedirs(directory)
    prefix = save_checkpoint(model, os.path.join(directory, "model.ckpt"), "original")
    return prefix, write_config(tiny_config(), os.path.join(directory, "albert_config.json"))


def _classifier_args(config, out, **extra):
    args = [f"--albert_config_file={config}", "--task_name=sst-2", f"--data_dir={SAMPLE_GLUE}",
            f"--spm_model_file={SPM}", f"--output_dir={out}", "--do_train", "--max_seq_length=32",
            "--train_batch_size=2", "--train_step=1", "--save_checkpoints_steps=1", "--log_every=0"]
    return args + [f"--{k}={v}" for k, v in extra.items()]


@pytest.mark.slow
def test_run_classifier_with_a_corrupt_init_checkpoint(tmp_path):
    prefix, config = _tiny_original(str(tmp_path / "albert"))
    _flipped_data(os.path.dirname(prefix))
    before = tree_snapshot(tmp_path / "albert")
    out = tmp_path / "out"
    result = run_script("run_classifier.py", _classifier_args(config, out, init_checkpoint=prefix))
    line = assert_one_line_error(result, "--init_checkpoint", prefix, "Checksum does not match")
    assert "does not fit" not in line
    assert tree_snapshot(tmp_path / "albert") == before
    assert not out.exists() or not os.listdir(out)


@pytest.mark.slow
def test_run_classifier_resuming_from_a_garbage_state_file(trained_run, tmp_path):
    out = str(tmp_path / "run")
    shutil.copytree(trained_run, out)
    named = _garbage_state(out)
    before = tree_snapshot(out)
    result = run_script("run_classifier.py", _classifier_args(os.path.join(out, "albert_config.json"), out,
                                                              train_step=4))
    assert_one_line_error(result, named, "not a TF checkpoint state file")
    assert tree_snapshot(out) == before
    assert not leftovers(out)


@pytest.mark.slow
def test_export_model_with_a_truncated_checkpoint(tmp_path):
    prefix, config = _tiny_original(str(tmp_path / "albert"))
    _truncated_data(os.path.dirname(prefix))
    export_dir = tmp_path / "export"
    result = run_script("export_model.py", ["--export_type=encoder", f"--albert_config_file={config}",
                                            f"--init_checkpoint={prefix}", f"--spm_model_file={SPM}",
                                            f"--export_dir={export_dir}"])
    line = assert_one_line_error(result, prefix, "truncated")
    assert "does not fit" not in line
    assert not export_dir.exists()
    assert not leftovers(tmp_path)


@pytest.mark.slow
def test_convert_with_a_truncated_checkpoint(tmp_path):
    prefix, config = _tiny_original(str(tmp_path / "albert"))
    _truncated_data(os.path.dirname(prefix))
    output = tmp_path / "hf"
    result = subprocess.run([sys.executable, "-m", "albert_tf.convert", f"--input_checkpoint={prefix}",
                             f"--output_path={output}", "--output_format=huggingface",
                             f"--albert_config_file={config}"], cwd=REPO, env=subprocess_env(),
                            capture_output=True, text=True, timeout=600, check=False)
    line = assert_one_line_error(result, prefix, "truncated")
    assert "does not fit" not in line
    assert not output.exists()
    assert not leftovers(tmp_path)


@pytest.mark.slow
def test_run_pretraining_with_a_missing_init_checkpoint(tmp_path, pretraining_records):
    records, seq, preds = pretraining_records
    config = write_config(tiny_config(), tmp_path / "albert_config.json")
    missing = str(tmp_path / "nowhere" / "model.ckpt")
    out = tmp_path / "out"
    result = run_script("run_pretraining.py", [
        f"--albert_config_file={config}", f"--input_file={records}", f"--output_dir={out}",
        f"--max_seq_length={seq}", f"--max_predictions_per_seq={preds}", "--train_batch_size=2",
        "--num_train_steps=1", "--num_warmup_steps=0", "--save_checkpoints_steps=1", "--iterations_per_loop=1",
        "--log_every=0", f"--init_checkpoint={missing}"])
    line = assert_one_line_error(result, "--init_checkpoint", missing, "no checkpoint found")
    assert "does not fit" not in line
    assert not out.exists() or not os.listdir(out)
