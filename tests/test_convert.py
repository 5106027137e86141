"""`python -m albert_tf.convert` (`albert_tf.scripts.convert`, running `albert_tf.checkpoints.conversion`):
conversions between formats, config handling, overwrite protection, errors, and the usage's list of formats."""

import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from absl import app
from safetensors.numpy import load_file

from albert_tf.checkpoints import CheckpointError, conversion, load_checkpoint, model_arrays, registry, save_checkpoint
from albert_tf.config import AlbertConfig
from albert_tf.errors import MissingDataError, UsageError
from albert_tf.model import AlbertForPretraining, AlbertModel, dummy_inputs
from albert_tf.scripts import convert
from tests.helpers import SPM, tree_snapshot, written_entries

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = os.path.join(REPO_ROOT, "tests", "fixtures", "reference")


def _config(**overrides):
    values = dict(vocab_size=60, embedding_size=8, hidden_size=16, num_hidden_layers=4, num_hidden_groups=2,
                  num_attention_heads=2, intermediate_size=32, max_position_embeddings=16)
    values.update(overrides)
    return AlbertConfig(**values)


def _random_model(config, cls=AlbertForPretraining, seed=0):
    model = cls(config)
    model(dummy_inputs(num_predictions=1 if cls is AlbertForPretraining else None), training=False)
    rng = np.random.RandomState(seed)
    for variable in model.weights:
        value = rng.normal(0.0, 0.3, tuple(variable.shape))
        if variable.path.endswith("gamma"):
            value += 1.0
        variable.assign(value.astype(np.float32))
    return model


def _tf1_arrays(prefix):
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _run(*args):
    convert.convert_argv(["convert", *args])


def _saved(model, config, prefix):
    """`model` saved at `prefix` in the original format with `config` beside it as albert_config.json."""
    save_checkpoint(model, prefix, "original")
    config.to_json_file(os.path.join(os.path.dirname(prefix), "albert_config.json"))
    return prefix


@pytest.fixture()
def original_checkpoint(tmp_path):
    """A random pretraining model saved in the original format, with albert_config.json beside it."""
    config = _config()
    model = _random_model(config)
    (tmp_path / "albert_orig").mkdir()
    return config, model, _saved(model, config, str(tmp_path / "albert_orig" / "model.ckpt-best"))


def test_tf1_to_hf_to_tf1_is_identical(original_checkpoint, tmp_path):
    config, _, prefix = original_checkpoint
    config_file = os.path.join(os.path.dirname(prefix), "albert_config.json")
    hf_dir = str(tmp_path / "hf")
    _run(f"--input_checkpoint={prefix}", f"--albert_config_file={config_file}", "--output_format=huggingface",
         f"--output_path={hf_dir}")
    assert written_entries(hf_dir) == ["albert_config.json", "config.json", "model.safetensors"]
    assert AlbertConfig.from_json_file(os.path.join(hf_dir, "albert_config.json")) == config
    assert AlbertConfig.from_json_file(os.path.join(hf_dir, "config.json")) == config  # HF spelling
    tensors = load_file(os.path.join(hf_dir, "model.safetensors"))
    assert "sop_classifier.classifier.weight" in tensors and "predictions.dense.weight" in tensors

    # Back, with the config taken from the Hugging Face directory itself.
    back = str(tmp_path / "back" / "model.ckpt")
    _run(f"--input_checkpoint={hf_dir}", "--output_format=original", f"--output_path={back}")
    before, after = _tf1_arrays(prefix), _tf1_arrays(back)
    assert sorted(before) == sorted(after)
    for name, value in before.items():
        assert after[name].dtype == value.dtype, name
        np.testing.assert_array_equal(after[name], value, err_msg=name)
    assert AlbertConfig.from_json_file(str(tmp_path / "back" / "albert_config.json")) == config


def test_config_found_beside_the_input_and_native_output(original_checkpoint, tmp_path):
    config, model, prefix = original_checkpoint
    out = str(tmp_path / "native" / "ckpt")
    _run(f"--input_checkpoint={prefix}", "--output_format=native", f"--output_path={out}")
    assert AlbertConfig.from_json_file(str(tmp_path / "native" / "albert_config.json")) == config
    recorded = json.loads((tmp_path / "native" / "ckpt.settings.json").read_text())  # the run's settings record
    assert recorded["command"] == ["convert", f"--input_checkpoint={prefix}", "--output_format=native",
                                   f"--output_path={out}"]
    assert recorded["settings"]["output_format"] == "native" and recorded["settings"]["do_lower_case"] is True
    fresh = _random_model(config, seed=3)
    result = load_checkpoint(fresh, out)
    assert result.format == "native" and not result.missing
    before, after = model_arrays(model), model_arrays(fresh)
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    # native -> original, the config from the albert_config.json written beside the native checkpoint.
    again = str(tmp_path / "again" / "model.ckpt")
    _run(f"--input_checkpoint={out}", "--output_format=original", f"--output_path={again}")
    assert _tf1_arrays(again).keys() == _tf1_arrays(prefix).keys()


def test_reference_fixture_to_original(tmp_path):
    """A real Hugging Face ALBERT directory converts and still gives the reference numbers."""
    directory = os.path.join(REFERENCE, "exact_gelu")
    out = str(tmp_path / "orig" / "model.ckpt")
    _run(f"--input_checkpoint={directory}", "--output_format=original", f"--output_path={out}")
    config = AlbertConfig.from_json_file(str(tmp_path / "orig" / "albert_config.json"))
    assert config.hidden_act == "gelu_exact"
    model = AlbertForPretraining(config)
    load_checkpoint(model, out)
    reference = dict(np.load(os.path.join(directory, "reference.npz")))
    out = model({k: reference[k] for k in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")})
    for key in ("sequence_output", "mlm_logits", "sop_logits"):
        np.testing.assert_allclose(out[key].numpy(), reference[key], atol=1e-5, err_msg=key)


def test_encoder_only_input_writes_encoder_only(tmp_path):
    config = _config()
    encoder = _random_model(config, cls=AlbertModel)
    prefix = _saved(encoder, config, str(tmp_path / "enc" / "model.ckpt"))
    hf_dir = str(tmp_path / "hf")
    _run(f"--input_checkpoint={prefix}", "--output_format=huggingface", f"--output_path={hf_dir}")
    tensors = load_file(os.path.join(hf_dir, "model.safetensors"))
    assert not [k for k in tensors if not k.startswith("albert.")]  # no random heads written
    native_out = str(tmp_path / "native")
    _run(f"--input_checkpoint={prefix}", "--output_format=native", f"--output_path={native_out}")
    result = load_checkpoint(AlbertModel(config), native_out)
    assert not result.missing and not result.unused
    assert not [n for n, _ in tf.train.list_variables(native_out) if "masked_lm" in n]


def test_keras_hub_preset_input(tmp_path):
    import keras_hub

    backbone = keras_hub.models.AlbertBackbone(vocabulary_size=60, num_layers=2, num_heads=2, embedding_dim=8,
                                               hidden_dim=16, intermediate_dim=32, max_sequence_length=16)
    preset = str(tmp_path / "preset")
    backbone.save_to_preset(preset)
    out = str(tmp_path / "hf")
    _run(f"--input_checkpoint={preset}", "--output_format=huggingface", f"--output_path={out}")
    config = AlbertConfig.from_json_file(os.path.join(out, "albert_config.json"))
    assert (config.vocab_size, config.hidden_size, config.num_hidden_layers) == (60, 16, 2)
    tensors = load_file(os.path.join(out, "model.safetensors"))
    np.testing.assert_array_equal(tensors["albert.embeddings.word_embeddings.weight"],
                                  backbone.token_embedding.embeddings.numpy())


def test_init_from_group0(tmp_path):
    one = _config(num_hidden_groups=1)
    prefix = str(tmp_path / "one" / "model.ckpt")
    save_checkpoint(_random_model(one), prefix, "original")
    two_file = str(tmp_path / "two_groups.json")
    _config(num_hidden_groups=2).to_json_file(two_file)
    out = str(tmp_path / "two" / "model.ckpt")
    with pytest.raises(CheckpointError, match="group_1"):
        _run(f"--input_checkpoint={prefix}", f"--albert_config_file={two_file}", "--output_format=original",
             f"--output_path={out}")
    with pytest.raises(CheckpointError, match="group_1"):  # the library's default too
        conversion.convert(prefix, out, "original", albert_config_file=two_file)
    _run(f"--input_checkpoint={prefix}", f"--albert_config_file={two_file}", "--output_format=original",
         f"--output_path={out}", "--init_from_group0")
    arrays = _tf1_arrays(out)
    group1 = [n for n in arrays if "/group_1/" in n]
    assert len(group1) == 16
    for name in group1:
        np.testing.assert_array_equal(arrays[name], arrays[name.replace("/group_1/", "/group_0/")])


def test_refuses_to_overwrite(original_checkpoint, tmp_path):
    _, _, prefix = original_checkpoint
    out = str(tmp_path / "hf")
    args = [f"--input_checkpoint={prefix}", "--output_format=huggingface", f"--output_path={out}"]
    _run(*args)
    stamp = os.path.getmtime(os.path.join(out, "model.safetensors"))
    with pytest.raises(app.UsageError, match="--overwrite"):
        _run(*args)
    assert os.path.getmtime(os.path.join(out, "model.safetensors")) == stamp
    _run(*args, "--overwrite")
    # Same for a checkpoint prefix, and for a directory given as the output of the original format.
    out_dir = tmp_path / "orig_dir"
    out_dir.mkdir()
    args = [f"--input_checkpoint={prefix}", "--output_format=original", f"--output_path={out_dir}"]
    _run(*args)
    assert os.path.exists(out_dir / "model.ckpt.index") and os.path.exists(out_dir / "albert_config.json")
    with pytest.raises(app.UsageError, match="model.ckpt.index"):
        _run(*args)
    _run(*args, "--overwrite")


def test_the_library_converts_as_the_script_and_refuses_an_output_over_its_own_input(original_checkpoint, tmp_path,
                                                                                      caplog):
    """`conversion.convert` called from Python (no script guard in front of it): it copies a checkpoint to its own
    format exactly and logs where the config came from; it names the files an existing output holds, and refuses
    an output replacing the input folder it reads or a prefix on one of its files; nothing is written."""
    _, _, prefix = original_checkpoint
    caplog.set_level(logging.INFO, logger="absl")  # the converter logs through absl, whose level other tests set
    copy = str(tmp_path / "copy" / "model.ckpt")
    os.makedirs(os.path.dirname(copy))
    result = conversion.convert(prefix, copy, "original")
    assert (result.missing, result.unused) == ([], [])  # the load's report
    expected = _tf1_arrays(prefix)
    assert any("/group_1/" in name for name in expected)
    assert _tf1_arrays(copy).keys() == expected.keys()
    for name, value in _tf1_arrays(copy).items():
        np.testing.assert_array_equal(value, expected[name], err_msg=name)
    config_path = os.path.join(os.path.dirname(prefix), "albert_config.json")
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith(f"Config from {config_path}: {{") for m in messages)
    assert f"Loaded {result} into AlbertForPretraining" in messages
    assert f"Wrote {copy} (original format, {len(expected)} weights) and {os.path.dirname(copy)}/albert_config.json" \
        in messages
    out = str(tmp_path / "hf")
    conversion.convert(prefix, out, "huggingface")
    with pytest.raises(UsageError, match=f"--output_path '{out}' already holds .*{out}/config.json, "
                                         f"{out}/model.safetensors; pass --overwrite"):
        conversion.convert(prefix, out, "huggingface")
    before = tree_snapshot(str(tmp_path))
    weights = os.path.join(out, "model.safetensors")
    for output_path, output_format in ((out, "huggingface"), (weights, "original")):
        with pytest.raises(UsageError, match=f"--output_path {output_path} would overwrite the input "
                                             f"--input_checkpoint {weights}; write the output elsewhere$"):
            conversion.convert(out, output_path, output_format, overwrite=True)
    assert tree_snapshot(str(tmp_path)) == before


def test_huggingface_output_caps_the_tokenizer_length_at_albert_s_512(tmp_path, caplog):
    """The Hugging Face tokenizer's `model_max_length` is the model's positions, up to ALBERT's 512; the log names
    the folder and its transformers class (and only for Hugging Face output)."""
    caplog.set_level(logging.INFO, logger="absl")  # the converter logs through absl, whose level other tests set
    for positions, expected in ((16, 16), (600, 512)):
        config = _config(max_position_embeddings=positions, vocab_size=30000)  # 30k-clean.model's
        prefix = _saved(_random_model(config), config, str(tmp_path / f"in{positions}" / "model.ckpt"))
        out = str(tmp_path / f"hf{positions}")
        caplog.clear()
        conversion.convert(prefix, out, "huggingface", spm_model_file=SPM)
        with open(os.path.join(out, "tokenizer_config.json"), encoding="utf-8") as f:
            assert json.load(f)["model_max_length"] == expected
        folders = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Hugging Face folder")]
        assert folders == [f"Hugging Face folder: {out} (AlbertForPreTraining)"]
    caplog.clear()
    conversion.convert(prefix, str(tmp_path / "copy.ckpt"), "original")
    assert not [r for r in caplog.records if r.getMessage().startswith("Hugging Face folder")]


def test_the_converter_names_what_the_input_lacks_and_what_it_leaves_unused(original_checkpoint, tmp_path, caplog):
    """A backbone-only input: the heads it lacks are named as left out of the output (and are not in it); a
    variable of the input the model has no use for is named too."""
    caplog.set_level(logging.WARNING, logger="absl")
    config = _config()
    backbone = _saved(_random_model(config, AlbertModel), config, str(tmp_path / "backbone" / "model.ckpt"))
    conversion.convert(backbone, str(tmp_path / "out.ckpt"), "original")
    left_out = [r.getMessage() for r in caplog.records
                if r.getMessage().startswith("Not in the input, so left out of the output: ")]
    assert len(left_out) == 1 and "cls/predictions/output_bias" in left_out[0]
    assert not [name for name in _tf1_arrays(str(tmp_path / "out.ckpt")) if name.startswith("cls/")]

    _, _, prefix = original_checkpoint
    arrays = {**_tf1_arrays(prefix), "bert/notes/extra": np.zeros(3, np.float32)}
    extra = str(tmp_path / "extra" / "model.ckpt")
    tf.raw_ops.SaveV2(prefix=extra, tensor_names=list(arrays), shape_and_slices=[""] * len(arrays),
                      tensors=list(arrays.values()))
    caplog.clear()
    conversion.convert(extra, str(tmp_path / "out2.ckpt"), "original",
                       albert_config_file=os.path.join(os.path.dirname(prefix), "albert_config.json"))
    assert "In the input but not used by the model: bert/notes/extra" in [r.getMessage() for r in caplog.records]


def test_refuses_a_different_config_beside_the_output(original_checkpoint, tmp_path):
    _, _, prefix = original_checkpoint
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    _config(intermediate_size=48).to_json_file(str(out_dir / "albert_config.json"))
    args = [f"--input_checkpoint={prefix}", "--output_format=original", f"--output_path={out_dir / 'new.ckpt'}"]
    with pytest.raises(app.UsageError, match="albert_config.json"):
        _run(*args)
    (out_dir / "albert_config.json").write_text("{not json")  # one it cannot read is not the same either
    with pytest.raises(app.UsageError, match=f"already holds {out_dir}/albert_config.json; pass --overwrite"):
        _run(*args)
    assert (out_dir / "albert_config.json").read_text() == "{not json"
    _run(*args, "--overwrite")  # replaced by the input's config
    assert AlbertConfig.from_json_file(str(out_dir / "albert_config.json")) == _config()
    # The config beside the output given as the input's: read, never declared as an output, kept as it is.
    stamp = os.stat(out_dir / "albert_config.json").st_mtime_ns
    _run(f"--input_checkpoint={prefix}", f"--albert_config_file={out_dir / 'albert_config.json'}",
         "--output_format=original", f"--output_path={out_dir / 'other.ckpt'}")
    assert os.stat(out_dir / "albert_config.json").st_mtime_ns == stamp and (out_dir / "other.ckpt.index").exists()


def test_usage_errors_name_the_flag(original_checkpoint, tmp_path):
    _, _, prefix = original_checkpoint
    out = str(tmp_path / "out")
    with pytest.raises(app.UsageError, match="--input_checkpoint"):
        _run("--output_format=original", f"--output_path={out}")
    with pytest.raises(app.UsageError, match="--output_path"):
        _run(f"--input_checkpoint={prefix}", "--output_format=original")
    with pytest.raises(app.UsageError, match="--output_format"):
        _run(f"--input_checkpoint={prefix}", f"--output_path={out}")
    with pytest.raises(Exception, match="output_format"):  # absl rejects values outside the enum
        _run(f"--input_checkpoint={prefix}", "--output_format=onnx", f"--output_path={out}")
    with pytest.raises(MissingDataError, match="--albert_config_file.*nope.json"):
        _run(f"--input_checkpoint={prefix}", f"--albert_config_file={tmp_path / 'nope.json'}",
             "--output_format=original", f"--output_path={out}")
    for output_format in ("original", "keras_hub"):  # label names go to Hugging Face's config.json only
        with pytest.raises(app.UsageError, match=f"--label_list applies to --output_format=huggingface only "
                                                 f"\\({output_format} stores no label names\\)$"):
            _run(f"--input_checkpoint={prefix}", f"--output_format={output_format}", f"--output_path={out}",
                 "--label_list=a,b")
    # A TF1 checkpoint with no config anywhere: --albert_config_file is required.
    bare = tmp_path / "bare"
    bare.mkdir()
    save_checkpoint(_random_model(_config(num_hidden_groups=1)), str(bare / "model.ckpt"), "original")
    with pytest.raises(app.UsageError, match="--albert_config_file is required"):
        _run(f"--input_checkpoint={bare / 'model.ckpt'}", "--output_format=original", f"--output_path={out}")
    # A missing input names the path.
    with pytest.raises((app.UsageError, CheckpointError), match="missing_ckpt"):
        _run(f"--input_checkpoint={tmp_path / 'missing_ckpt'}",
             f"--albert_config_file={os.path.join(os.path.dirname(prefix), 'albert_config.json')}",
             "--output_format=original", f"--output_path={out}")
    with pytest.raises((app.UsageError, CheckpointError), match="missing_ckpt"):
        _run(f"--input_checkpoint={tmp_path / 'missing_ckpt'}", "--output_format=original", f"--output_path={out}")
    # A config that does not fit the checkpoint names the variable.
    wrong = str(tmp_path / "wrong.json")
    _config(intermediate_size=48).to_json_file(wrong)
    with pytest.raises(CheckpointError, match="ffn_1/intermediate/dense/kernel"):
        _run(f"--input_checkpoint={prefix}", f"--albert_config_file={wrong}", "--output_format=original",
             f"--output_path={out}")
    assert not os.path.exists(out + ".index")
    with pytest.raises(app.UsageError, match="unexpected arguments"):
        _run(f"--input_checkpoint={prefix}", "--output_format=original", f"--output_path={out}", "extra")


def test_the_usage_lists_every_format_the_registry_holds():
    """--help's list of input formats is the registry's, in its order; --output_format's choices are the formats
    that can be written."""
    text = " ".join(convert.usage().split())
    listed = [text.index(f"* {f.name}: {f.description}") for f in registry.REGISTRY]
    assert listed == sorted(listed)
    assert "{" not in text
    assert sorted(convert.OUTPUT_FORMATS) == sorted(conversion.output_formats()) == \
        ["huggingface", "keras_hub", "native", "original"]


@pytest.mark.slow
def test_command_line(original_checkpoint, tmp_path):
    """The module runs as a script (error handling is tested in-process above)."""
    config, _, prefix = original_checkpoint
    out = str(tmp_path / "hf")
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    command = [sys.executable, "-m", "albert_tf.convert", f"--input_checkpoint={prefix}",
               "--output_format=huggingface", f"--output_path={out}"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
        assert AlbertConfig.from_hf_dict(json.load(f)) == config
    assert AlbertConfig.from_json_file(os.path.join(out, "albert_config.json")) == config
    assert "Wrote" in done.stderr  # absl logs the result
    done = subprocess.run([*command[:3], "--help"], env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 1 and "  * model_garden: " in done.stdout and "  --input_checkpoint:" in done.stdout
