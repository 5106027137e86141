"""TF Model Garden's ALBERT formats and the TF1 TF-Hub module, against the fixtures Model Garden's own code wrote
(tests/fixtures/model_garden/): each loads and reproduces Model Garden's recorded outputs, holds exactly the TF1
checkpoint it was converted from, converts to TF1 / Hugging Face / native and back unchanged; bad shapes name the
variable, a missing config says where it must be."""

import os
import shutil
import types

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import checkpoints, cli
from albert_tf.checkpoints import (CheckpointError, CorruptCheckpointError, conversion, detect_format, load_checkpoint,
                                   model_arrays)
from albert_tf.checkpoints import model_garden as mg
from albert_tf.config import AlbertConfig
from albert_tf.errors import UsageError
from albert_tf.model import AlbertForPretraining, AlbertModel
from albert_tf.scripts import convert

SOP = ["cls/seq_relationship/output_bias", "cls/seq_relationship/output_weights"]
MLM = ["cls/predictions/output_bias", "cls/predictions/transform/LayerNorm/beta",
       "cls/predictions/transform/LayerNorm/gamma", "cls/predictions/transform/dense/bias",
       "cls/predictions/transform/dense/kernel"]
ATOL = 1e-5


def _config(mg_fixtures, **overrides):
    return AlbertConfig(**{**AlbertConfig.from_json_file(mg_fixtures["config"]).to_dict(), **overrides})


def _inputs(recorded):
    return {"input_ids": recorded["inputs.input_word_ids"], "input_mask": recorded["inputs.input_mask"],
            "segment_ids": recorded["inputs.input_type_ids"],
            "masked_lm_positions": recorded["inputs.masked_lm_positions"]}


def _tf1_arrays(mg_fixtures):
    reader = tf.train.load_checkpoint(os.path.join(mg_fixtures["tf1"], "model.ckpt-best"))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map() if name != "global_step"}


# (fixture, format, the recorded outputs it must give, whether it has the MLM head)
SOURCES = [("tf2_encoder", "model_garden", "mg_objects", False),
           ("tf2_encoder_legacy", "model_garden", "mg_objects", False),
           ("tf2_pretrainer", "model_garden", "mg_objects", True),
           ("hub_encoder", "model_garden", "hub_encoder", True),
           ("tf1_hub_module", "original", "tf1_hub", True)]


@pytest.mark.parametrize("name,fmt,reference,has_mlm", SOURCES)
def test_each_format_loads_and_reproduces_model_garden(mg_fixtures, name, fmt, reference, has_mlm):
    recorded = np.load(mg_fixtures["outputs"])
    assert detect_format(mg_fixtures[name]) == fmt
    model = AlbertForPretraining(_config(mg_fixtures))
    result = load_checkpoint(model, mg_fixtures[name])
    expected_missing = ([] if fmt == "original" else SOP) + ([] if has_mlm else MLM)
    assert sorted(result.missing) == sorted(expected_missing)
    assert len(result.loaded) == 32 - len(expected_missing) and result.unused == []
    outputs = model(_inputs(recorded), training=False)
    if reference == "tf1_hub":  # the TF1 module, run by tensorflow_hub 0.15 (its own recorded outputs)
        hub = np.load(mg_fixtures["tf1_hub_outputs"])
        np.testing.assert_allclose(outputs["sequence_output"], hub["tf1_hub.tokens.sequence_output"], atol=ATOL)
        np.testing.assert_allclose(outputs["pooled_output"], hub["tf1_hub.tokens.pooled_output"], atol=ATOL)
        np.testing.assert_allclose(outputs["mlm_logits"], hub["tf1_hub.mlm.mlm_logits"], atol=ATOL)
        np.testing.assert_allclose(tf.nn.log_softmax(outputs["sop_logits"]), hub["tf1_hub.sop.sop_log_probs"],
                                   atol=ATOL)
        return
    np.testing.assert_allclose(outputs["sequence_output"], recorded[f"{reference}.sequence_output"], atol=ATOL)
    np.testing.assert_allclose(outputs["pooled_output"], recorded[f"{reference}.pooled_output"], atol=ATOL)
    for i, layer in enumerate(outputs["encoder_outputs"]):
        np.testing.assert_allclose(layer, recorded[f"{reference}.encoder_outputs_{i}"], atol=ATOL)
    if has_mlm:
        key = "hub_encoder.mlm.mlm_logits" if reference == "hub_encoder" else "mg_objects.mlm_logits"
        np.testing.assert_allclose(outputs["mlm_logits"], recorded[key], atol=ATOL)


@pytest.mark.parametrize("name", ["tf2_encoder", "tf2_encoder_legacy", "tf2_pretrainer", "hub_encoder"])
def test_model_garden_weights_are_the_tf1_checkpoint_exactly(mg_fixtures, name):
    """Model Garden's converter wrote these from tf1/model.ckpt-best: read back in the original's layout they
    are its arrays, bit for bit (the attention kernels reshaped per head and back)."""
    tf1 = _tf1_arrays(mg_fixtures)
    arrays = checkpoints.read_arrays(mg_fixtures[name], "model_garden", None, config=_config(mg_fixtures))
    wanted = {n for n in tf1 if not n.startswith("cls/seq_relationship/")
              and (name in ("tf2_pretrainer", "hub_encoder") or not n.startswith("cls/"))}
    assert set(arrays) == wanted
    for n in wanted:
        np.testing.assert_array_equal(arrays[n], tf1[n], err_msg=n)


def test_pretrainer_word_table_is_found_through_the_object_graph(mg_fixtures):
    # The pretrainer stores the shared word table once, under the MLM head's path, not the encoder's.
    keys = [k for k, _ in tf.train.list_variables(mg_fixtures["tf2_pretrainer"])]
    assert "masked_lm/embedding_table/.ATTRIBUTES/VARIABLE_VALUE" in keys
    assert not any(k.startswith("encoder/layer_with_weights-0/") for k in keys)
    reader = tf.train.load_checkpoint(checkpoints.resolve(mg_fixtures["tf2_pretrainer"]))
    found = mg.variable_keys(reader)
    assert found["word_embeddings/embeddings"] == "masked_lm/embedding_table/.ATTRIBUTES/VARIABLE_VALUE"


def test_a_damaged_model_garden_checkpoint_given_by_its_folder_names_the_prefix_read(mg_fixtures, tmp_path):
    run = shutil.copytree(mg_fixtures["tf2_encoder"], tmp_path / "run")
    with open(run / "ckpt-1.data-00000-of-00001", "r+b") as f:  # a weight's bytes, not the object graph's
        f.seek(64)
        byte = f.read(1)
        f.seek(64)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(CorruptCheckpointError, match=f"^checkpoint {run / 'ckpt-1'} is corrupt"):
        load_checkpoint(AlbertModel(_config(mg_fixtures)), str(run))


def test_only_a_readable_model_garden_encoder_is_one(mg_fixtures, tmp_path):
    assert mg.is_model_garden(checkpoints.resolve(mg_fixtures["tf2_pretrainer"])) is True
    assert mg.is_model_garden(os.path.join(mg_fixtures["tf1"], "model.ckpt-best")) is False  # no object graph
    assert mg.is_model_garden(str(tmp_path / "missing")) is False


def test_per_head_kernels_are_checked_and_name_the_variable(mg_fixtures):
    # 8 heads of 4 in the config, 4 heads of 8 in the checkpoint: refused, naming the variable.
    model = AlbertModel(_config(mg_fixtures, num_attention_heads=8))
    with pytest.raises(CheckpointError, match=r"transformer/self_attention/query/kernel.*4 heads.*"
                                              r"num_attention_heads 8"):
        load_checkpoint(model, mg_fixtures["tf2_encoder"])
    # Another hidden size: the TF1 shape check names the variable.
    model = AlbertModel(_config(mg_fixtures, hidden_size=48, num_attention_heads=4))
    with pytest.raises(CheckpointError, match="shape mismatch for bert/"):
        load_checkpoint(model, mg_fixtures["hub_encoder"])
    # The layouts themselves: every rank and product is checked.
    with pytest.raises(ValueError, match=r"shape mismatch for q: .*\[H, heads, H/heads\].*\[32, 32\]"):
        mg.to_tf1("q", mg.HEADS_IN, np.zeros((32, 32)))
    with pytest.raises(ValueError, match=r"shape mismatch for o: .*heads x head size = 30, hidden size 32"):
        mg.to_tf1("o", mg.HEADS_OUT, np.zeros((5, 6, 32)))
    with pytest.raises(ValueError, match=r"shape mismatch for b: .*\[heads, H/heads\]"):
        mg.to_tf1("b", mg.HEADS_BIAS, np.zeros((32,)))
    with pytest.raises(ValueError, match=r"shape mismatch for b: .*\[heads, H/heads\].*\(rank 3\)"):
        mg.to_tf1("b", mg.HEADS_BIAS, np.zeros((4, 8, 32)))  # a kernel's rank where a bias belongs
    np.testing.assert_array_equal(mg.to_tf1("b", mg.HEADS_BIAS, [[1.0, 2.0], [3.0, 4.0]]), [1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="does not split into 5 attention heads"):
        mg.from_tf1("k", mg.HEADS_IN, np.zeros((32, 32)), 5)
    kernel = np.arange(32 * 32, dtype="float32").reshape(32, 32)
    per_head = mg.from_tf1("k", mg.HEADS_IN, kernel, 4)
    assert per_head.shape == (32, 4, 8) and per_head[3, 2, 5] == kernel[3, 2 * 8 + 5]  # column n*8+d: head n
    out = mg.from_tf1("o", mg.HEADS_OUT, kernel, 4)
    assert out.shape == (4, 8, 32) and out[2, 5, 3] == kernel[2 * 8 + 5, 3]  # row n*8+d: head n
    np.testing.assert_array_equal(mg.to_tf1("o", mg.HEADS_OUT, out, 4), kernel)
    bias = mg.from_tf1("b", mg.HEADS_BIAS, list(range(32)), 4)
    assert bias.shape == (4, 8) and bias[3, 5] == 3 * 8 + 5
    np.testing.assert_array_equal(mg.to_tf1("b", mg.HEADS_BIAS, bias, 4), np.arange(32))
    assert mg.from_tf1("w", mg.SAME, kernel, 4) is kernel
    for layout, shape in [(mg.HEADS_BIAS, (32, 32)), (mg.HEADS_IN, (32,)), (mg.HEADS_OUT, (32, 4, 8)),
                          (mg.HEADS_IN, (32, 16)), (mg.HEADS_OUT, (30, 30))]:
        with pytest.raises(ValueError, match=rf"shape mismatch for t: \[{', '.join(map(str, shape))}\] does not "
                                             rf"split into 4 attention heads of a hidden size {shape[0]}$"):
            mg.from_tf1("t", layout, np.zeros(shape), 4)


def test_config_comes_from_the_flag_or_beside_the_weights(mg_fixtures, tmp_path):
    # Model Garden's checkpoints carry no config: the error says where one must be.
    with pytest.raises(UsageError, match=r"--albert_config_file is required.*number of layers and heads.*"
                                         r"albert_config.json beside it"):
        conversion.resolve_config(mg_fixtures["tf2_pretrainer"])
    config, source = conversion.resolve_config(mg_fixtures["tf2_pretrainer"], mg_fixtures["config"])
    assert config == _config(mg_fixtures) and source == mg_fixtures["config"]
    # The original's TF-Hub module keeps it in assets/ (also found from its variables prefix).
    module = mg_fixtures["tf1_hub_module"]
    assert conversion.resolve_config(module)[1] == os.path.join(module, "assets", "albert_config.json")
    assert mg.config_file_beside(checkpoints.resolve(module)) == conversion.resolve_config(module)[1]
    assert checkpoints.resolve(module) == os.path.join(module, "variables", "variables")
    # The variables directory as a shell completes it (a trailing slash) is still recognised.
    assert mg.config_file_beside(os.path.join(module, "variables") + os.sep) == conversion.resolve_config(module)[1]
    # A copy of a Model Garden checkpoint with the config beside it needs no flag.
    copy = tmp_path / "tf2_encoder"
    copy.mkdir()
    for f in os.listdir(mg_fixtures["tf2_encoder"]):
        shutil.copy(os.path.join(mg_fixtures["tf2_encoder"], f), copy / f)
    shutil.copy(mg_fixtures["config"], copy / "albert_config.json")
    assert conversion.resolve_config(str(copy))[0] == _config(mg_fixtures)


def test_hub_module_handle_takes_local_model_garden_and_tf1_modules(mg_fixtures):
    for name in ("hub_encoder", "tf1_hub_module"):
        flags = types.SimpleNamespace(albert_hub_module_handle=mg_fixtures[name], init_checkpoint=None)
        path = cli.init_checkpoint(flags)
        result = load_checkpoint(AlbertModel(_config(mg_fixtures)), path)
        assert not result.missing and len(result.loaded) == 25


def test_init_from_group0_grows_model_garden_into_groups(mg_fixtures):
    recorded = np.load(mg_fixtures["outputs"])
    model = AlbertModel(_config(mg_fixtures, num_hidden_groups=2))
    with pytest.raises(CheckpointError, match="lacks 16 encoder weight"):
        load_checkpoint(model, mg_fixtures["tf2_encoder"])
    load_checkpoint(model, mg_fixtures["tf2_encoder"], init_from_group0=True)
    outputs = model(_inputs(recorded), training=False)  # both groups hold the one shared block: same model
    np.testing.assert_allclose(outputs["sequence_output"], recorded["mg_objects.sequence_output"], atol=ATOL)


def test_other_model_garden_weights_are_reported_unused(mg_fixtures, tmp_path):
    """A pretrainer with a classification head (Model Garden's trainer keeps its sentence-order head so): the
    encoder loads, the head is reported unused, the counter is left out."""
    reader = tf.train.load_checkpoint(checkpoints.resolve(mg_fixtures["tf2_encoder"]))
    keys = mg.variable_keys(reader)
    root = tf.__internal__.tracking.AutoTrackable()
    root.weights = [tf.Variable(reader.get_tensor(key), name=name) for name, key in keys.items()
                    if name != "save_counter"]
    root.head = tf.Variable(np.ones((32, 2), "float32"), name="sentence_order/out_proj/kernel")
    root.step = tf.Variable(7, dtype=tf.int64, name="global_step")
    prefix = tf.train.Checkpoint(encoder=root).write(str(tmp_path / "ckpt"))
    assert detect_format(prefix) == "model_garden"
    result = load_checkpoint(AlbertModel(_config(mg_fixtures)), prefix)
    assert len(result.loaded) == 25 and result.unused == ["sentence_order/out_proj/kernel"]
    # Two variables of one name (two models in one checkpoint) are refused, naming it.
    root.other = tf.Variable(np.zeros((2, 16), "float32"), name="type_embeddings/embeddings")
    prefix = tf.train.Checkpoint(encoder=root).write(str(tmp_path / "two"))
    with pytest.raises(CheckpointError, match="two variables are named type_embeddings/embeddings"):
        load_checkpoint(AlbertModel(_config(mg_fixtures)), prefix)


@pytest.mark.slow
def test_conversions_round_trip_exactly(mg_fixtures, tmp_path):
    """Model Garden -> original TF1 -> Hugging Face -> native, with the converter: the arrays never change, and
    are the TF1 checkpoint Model Garden's converter started from."""
    tf1 = _tf1_arrays(mg_fixtures)
    heads_of = {n: a for n, a in tf1.items() if not n.startswith("cls/seq_relationship/")}
    original = str(tmp_path / "original" / "model.ckpt")
    os.makedirs(os.path.dirname(original))
    convert.convert_argv(["convert", f"--input_checkpoint={mg_fixtures['tf2_pretrainer']}",
                          f"--albert_config_file={mg_fixtures['config']}", "--output_format=original",
                          f"--output_path={original}"])
    hf = str(tmp_path / "hf")
    convert.convert_argv(["convert", f"--input_checkpoint={original}", "--output_format=huggingface",
                          f"--output_path={hf}"])
    native = str(tmp_path / "native" / "model.ckpt")
    os.makedirs(os.path.dirname(native))
    convert.convert_argv(["convert", f"--input_checkpoint={hf}", "--output_format=native", f"--output_path={native}"])
    assert (AlbertConfig.from_json_file(os.path.join(hf, "albert_config.json"))
            == AlbertConfig.from_json_file(mg_fixtures["config"]))
    for fmt, path in (("original", original), ("huggingface", hf), ("native", native)):
        assert detect_format(path) == fmt
        model = AlbertForPretraining(_config(mg_fixtures))
        result = load_checkpoint(model, path)
        # Model Garden never had the sentence-order head; nothing else is missing (native names it by its key).
        assert len(result.missing) == 2 and all("seq_relationship" in n for n in result.missing), fmt
        arrays = model_arrays(model)
        for n, value in heads_of.items():
            np.testing.assert_array_equal(arrays[n], value, err_msg=f"{fmt}: {n}")
    assert sorted(checkpoints.original.read_tf1(original)) == sorted(heads_of)
