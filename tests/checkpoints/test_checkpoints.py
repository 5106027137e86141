"""Checkpoint formats: the original TF1 release, Hugging Face, this project's native TF2 checkpoints and
keras-hub; round trips, the original's variable names, init_from_group0 and the error cases."""

import json
import os
import shutil

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file, save_file

from albert_tf import fileio
from albert_tf.checkpoints import (
    CheckpointError,
    detect_format,
    huggingface,
    load_checkpoint,
    model_arrays,
    name_table,
    native,
    original,
    save_checkpoint,
)
from albert_tf.config import AlbertConfig
from albert_tf.errors import UsageError
from albert_tf.model import AlbertForMultipleChoice, AlbertForPretraining, AlbertModel, dummy_inputs
from tests.helpers import FIXTURES_DIR, randomize

REFERENCE = os.path.join(FIXTURES_DIR, "reference")


# ----------------------------------------------------------------- helpers
def _config(**overrides):
    values = dict(vocab_size=60, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=32, max_position_embeddings=16)
    values.update(overrides)
    return AlbertConfig(**values)


def _built(cls, config, seed=0):
    model = cls(config)
    model(dummy_inputs(num_predictions=1 if cls is AlbertForPretraining else None), training=False)
    if seed is not None:
        randomize(model, seed)
    return model


def _inputs(config, batch=2, seq=7, positions=3):
    rng = np.random.RandomState(1)
    ids = rng.randint(0, config.vocab_size, (batch, seq)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, seq - 2:] = 0
    segments = np.zeros_like(ids)
    segments[:, seq // 2:] = 1
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments,
            "masked_lm_positions": rng.randint(0, seq, (batch, positions)).astype("int32")}


def _outputs(model, inputs):
    out = model(inputs, training=False)
    return {k: (v.numpy() if k != "encoder_outputs" else np.stack([x.numpy() for x in v])) for k, v in out.items()}


def _assert_same_outputs(a, b, inputs, keys=None):
    out_a, out_b = _outputs(a, inputs), _outputs(b, inputs)
    for key in keys or set(out_a) & set(out_b):
        np.testing.assert_array_equal(out_a[key], out_b[key], err_msg=key)


def _assert_same_weights(a, b):
    arrays_a, arrays_b = model_arrays(a), model_arrays(b)
    assert sorted(arrays_a) == sorted(arrays_b)
    for name in arrays_a:
        np.testing.assert_array_equal(arrays_a[name], arrays_b[name], err_msg=name)


def _write_tf1(arrays, prefix):
    """A TF1 name-based checkpoint written by hand (no object graph), as the original release's are."""
    original.write_tf1(arrays, prefix)
    return prefix


def _reference_model(name="groups2_inner2"):
    directory = os.path.join(REFERENCE, name)
    config = AlbertConfig.from_json_file(os.path.join(directory, "albert_config.json"))
    model = AlbertForPretraining(config)
    load_checkpoint(model, directory)
    reference = dict(np.load(os.path.join(directory, "reference.npz")))
    inputs = {k: reference[k] for k in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")}
    return config, model, inputs, reference


def _expected_tf1_names(config, heads=True):
    """The original release's variable names and shapes for `config` (from the issue's list)."""
    v, e, h, i = config.vocab_size, config.embedding_size, config.hidden_size, config.intermediate_size
    names = {
        "bert/embeddings/word_embeddings": [v, e],
        "bert/embeddings/position_embeddings": [config.max_position_embeddings, e],
        "bert/embeddings/token_type_embeddings": [config.type_vocab_size, e],
        "bert/embeddings/LayerNorm/gamma": [e], "bert/embeddings/LayerNorm/beta": [e],
        "bert/encoder/embedding_hidden_mapping_in/kernel": [e, h],
        "bert/encoder/embedding_hidden_mapping_in/bias": [h],
        "bert/pooler/dense/kernel": [h, h], "bert/pooler/dense/bias": [h],
    }
    for g in range(config.num_hidden_groups):
        for n in range(config.inner_group_num):
            scope = f"bert/encoder/transformer/group_{g}/inner_group_{n}/"
            for part in ("query", "key", "value"):
                names[scope + f"attention_1/self/{part}/kernel"] = [h, h]
                names[scope + f"attention_1/self/{part}/bias"] = [h]
            names[scope + "attention_1/output/dense/kernel"] = [h, h]
            names[scope + "attention_1/output/dense/bias"] = [h]
            names[scope + "LayerNorm/gamma"] = [h]
            names[scope + "LayerNorm/beta"] = [h]
            names[scope + "ffn_1/intermediate/dense/kernel"] = [h, i]
            names[scope + "ffn_1/intermediate/dense/bias"] = [i]
            names[scope + "ffn_1/intermediate/output/dense/kernel"] = [i, h]
            names[scope + "ffn_1/intermediate/output/dense/bias"] = [h]
            names[scope + "LayerNorm_1/gamma"] = [h]
            names[scope + "LayerNorm_1/beta"] = [h]
    if heads:
        names.update({
            "cls/predictions/transform/dense/kernel": [h, e], "cls/predictions/transform/dense/bias": [e],
            "cls/predictions/transform/LayerNorm/gamma": [e], "cls/predictions/transform/LayerNorm/beta": [e],
            "cls/predictions/output_bias": [v],
            "cls/seq_relationship/output_weights": [2, h], "cls/seq_relationship/output_bias": [2],
        })
    return names


# ------------------------------------------------------------ original TF1
@pytest.mark.slow
@pytest.mark.parametrize("groups,inner", [(1, 1), (2, 2)])
def test_original_round_trip_and_names(groups, inner, tmp_path):
    config = _config(num_hidden_layers=4, num_hidden_groups=groups, inner_group_num=inner)
    model = _built(AlbertForPretraining, config)
    prefix = str(tmp_path / "model.ckpt")
    save_checkpoint(model, prefix, "original")
    written = dict(tf.train.list_variables(prefix))
    assert written == _expected_tf1_names(config), sorted(set(written) ^ set(_expected_tf1_names(config)))
    assert sorted(os.listdir(tmp_path)) == ["model.ckpt.data-00000-of-00001", "model.ckpt.index"]
    assert detect_format(prefix) == "original" and detect_format(str(tmp_path)) == "original"

    fresh = _built(AlbertForPretraining, config, seed=1)
    result = load_checkpoint(fresh, prefix)
    assert result.format == "original"
    assert sorted(result.loaded) == sorted(written) and not result.missing and not result.unused
    _assert_same_weights(model, fresh)
    _assert_same_outputs(model, fresh, _inputs(config))
    # The directory works as well as the prefix.
    again = _built(AlbertForPretraining, config, seed=2)
    load_checkpoint(again, str(tmp_path))
    _assert_same_weights(model, again)


def test_original_layout_of_sop_and_attention_weights(tmp_path):
    """The TF1 arrays are laid out as the original's: [2, H] SOP weights, [H, H] attention kernels."""
    config, model, inputs, _ = _reference_model()
    prefix = str(tmp_path / "ckpt")
    save_checkpoint(model, prefix, "original")
    reader = tf.train.load_checkpoint(prefix)
    hf = load_file(os.path.join(REFERENCE, "groups2_inner2", "model.safetensors"))
    np.testing.assert_array_equal(reader.get_tensor("cls/seq_relationship/output_weights"),
                                  hf["sop_classifier.classifier.weight"])  # both [2, H]
    for g in range(2):
        for i in range(2):
            scope = f"bert/encoder/transformer/group_{g}/inner_group_{i}/attention_1/"
            hf_scope = f"albert.encoder.albert_layer_groups.{g}.albert_layers.{i}.attention."
            for part in ("query", "key", "value"):
                np.testing.assert_array_equal(reader.get_tensor(scope + f"self/{part}/kernel"),
                                              hf[hf_scope + part + ".weight"].T)
                np.testing.assert_array_equal(reader.get_tensor(scope + f"self/{part}/bias"),
                                              hf[hf_scope + part + ".bias"])
            np.testing.assert_array_equal(reader.get_tensor(scope + "output/dense/kernel"),
                                          hf[hf_scope + "dense.weight"].T)
    # ... and a model loaded from it reproduces the reference.
    fresh = AlbertForPretraining(config)
    load_checkpoint(fresh, prefix)
    _assert_same_outputs(model, fresh, inputs)


def test_a_multiple_choice_head_is_the_originals_one_output(tmp_path):
    """run_race's head: `output_weights` [1, H] (our kernel transposed) and `output_bias` [1], read from a model
    not yet built and written back into a fresh one."""
    config = _config()
    model = AlbertForMultipleChoice(config, dropout_prob=0.0)
    arrays = model_arrays(model)
    kernel = model.output_layer.kernel.numpy()
    assert arrays["output_weights"].shape == (1, config.hidden_size) and arrays["output_bias"].shape == (1,)
    np.testing.assert_array_equal(arrays["output_weights"], kernel.T)
    randomize(model, 3)
    prefix = str(tmp_path / "race")
    save_checkpoint(model, prefix, "original")
    again = AlbertForMultipleChoice(config, dropout_prob=0.0)
    assert not load_checkpoint(again, prefix).missing
    np.testing.assert_array_equal(again.output_layer.kernel.numpy(), model.output_layer.kernel.numpy())
    np.testing.assert_array_equal(again.output_layer.bias.numpy(), model.output_layer.bias.numpy())
    weights = name_table.Entry("output_weights", model.output_layer.kernel, (1, config.hidden_size), transpose=True)
    np.testing.assert_array_equal(weights.to_keras([list(range(config.hidden_size))]),  # array-likes too
                                  np.arange(config.hidden_size).reshape(config.hidden_size, 1))


def test_hand_built_tf1_with_module_prefix_global_step_and_slots(tmp_path):
    config = _config()
    source = _built(AlbertForPretraining, config)
    arrays = model_arrays(source)
    rng = np.random.RandomState(3)
    handmade = {}
    for name, array in arrays.items():
        handmade["module/" + name] = array
        handmade[f"module/{name}/adam_m"] = rng.normal(size=array.shape).astype(np.float32)
        handmade[f"module/{name}/adam_v"] = rng.normal(size=array.shape).astype(np.float32)
    handmade["global_step"] = np.array(125000, np.int64)
    prefix = _write_tf1(handmade, str(tmp_path / "model.ckpt-125000"))
    names = {n for n, _ in tf.train.list_variables(prefix)}
    assert "module/bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel/adam_m" in names

    model = _built(AlbertForPretraining, config, seed=5)
    result = load_checkpoint(model, prefix)
    assert sorted(result.loaded) == sorted(arrays)
    assert not result.missing
    assert not result.unused  # slots and global_step are neither loaded nor unused
    assert not [n for n in result.loaded if "adam" in n or "global_step" in n]
    _assert_same_weights(source, model)
    _assert_same_outputs(source, model, _inputs(config))


def test_init_from_group0(tmp_path):
    one_group = _config(num_hidden_layers=4)
    source = _built(AlbertForPretraining, one_group)
    prefix = str(tmp_path / "one_group")
    save_checkpoint(source, prefix, "original")

    two_groups = _config(num_hidden_layers=4, num_hidden_groups=2)
    model = _built(AlbertForPretraining, two_groups, seed=7)
    with pytest.raises(CheckpointError, match="group_1"):  # without the flag, group_1 is missing
        load_checkpoint(model, prefix)
    _, result = name_table.assign_by_name(model, model_arrays(source), "huggingface")  # no flag: no filling in
    assert result.missing and all("/group_1/" in name for name in result.missing)
    _, _, encoder_missing = original.FORMAT.load(model, prefix)  # a format's own load: no filling in either
    assert encoder_missing == result.missing
    result = load_checkpoint(model, prefix, init_from_group0=True)
    assert not result.missing and not result.unused
    assert any("group_1" in name for name in result.loaded)
    arrays = model_arrays(model)
    for name, value in arrays.items():
        if "/group_1/" in name:
            np.testing.assert_array_equal(value, arrays[name.replace("/group_1/", "/group_0/")], err_msg=name)
    # With both groups equal to the single group, the 2-group model computes what the 1-group one does.
    inputs = _inputs(one_group)
    out_one, out_two = _outputs(source, inputs), _outputs(model, inputs)
    for key in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
        np.testing.assert_allclose(out_two[key], out_one[key], atol=1e-6, err_msg=key)


def test_shape_mismatch_names_the_variable(tmp_path):
    model = _built(AlbertForPretraining, _config())
    prefix = str(tmp_path / "wide")
    arrays = model_arrays(model)
    name = "bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/dense/kernel"
    arrays[name] = np.zeros((16, 48), np.float32)
    _write_tf1(arrays, prefix)
    target = _built(AlbertForPretraining, _config(), seed=3)
    before = [v.numpy().copy() for v in target.weights]
    with pytest.raises(CheckpointError, match=name) as err:
        load_checkpoint(target, prefix)
    assert "[16, 48]" in str(err.value) and "[16, 32]" in str(err.value)
    # Nothing was half-loaded.
    for variable, value in zip(target.weights, before):
        np.testing.assert_array_equal(variable.numpy(), value)


def test_vocabulary_mismatch_names_the_variable(tmp_path):
    prefix = str(tmp_path / "ckpt")
    save_checkpoint(_built(AlbertModel, _config(vocab_size=70)), prefix, "original")
    with pytest.raises(CheckpointError, match="bert/embeddings/word_embeddings"):
        load_checkpoint(_built(AlbertModel, _config(vocab_size=60)), prefix)


def test_missing_encoder_weights_raise(tmp_path):
    model = _built(AlbertForPretraining, _config())
    arrays = model_arrays(model)
    missing = "bert/encoder/transformer/group_0/inner_group_0/LayerNorm_1/gamma"
    del arrays[missing]
    prefix = _write_tf1(arrays, str(tmp_path / "partial"))
    with pytest.raises(CheckpointError, match=missing):
        load_checkpoint(_built(AlbertForPretraining, _config(), seed=1), prefix)
    # A checkpoint of something else altogether.
    other = _write_tf1({"dense/kernel": np.zeros((3, 3), np.float32)}, str(tmp_path / "other"))
    with pytest.raises(CheckpointError, match="encoder"):
        load_checkpoint(_built(AlbertModel, _config()), other)


def test_encoder_only_checkpoint_into_pretraining_reports_heads_missing(tmp_path):
    config = _config()
    encoder = _built(AlbertModel, config)
    prefix = str(tmp_path / "encoder")
    save_checkpoint(encoder, prefix, "original")
    assert not [n for n, _ in tf.train.list_variables(prefix) if n.startswith("cls/")]
    model = _built(AlbertForPretraining, config, seed=4)
    head_before = model.masked_lm.output_bias.numpy().copy()
    result = load_checkpoint(model, prefix)
    assert sorted(result.missing) == sorted(n for n in _expected_tf1_names(config) if n.startswith("cls/"))
    assert not result.unused
    np.testing.assert_array_equal(model.masked_lm.output_bias.numpy(), head_before)
    inputs = _inputs(config)
    np.testing.assert_array_equal(_outputs(model.albert, inputs)["sequence_output"],
                                  _outputs(encoder, inputs)["sequence_output"])
    # The other way round: the heads of a pretraining checkpoint are unused by an encoder.
    full = str(tmp_path / "full")
    save_checkpoint(model, full, "original")
    result = load_checkpoint(_built(AlbertModel, config, seed=6), full)
    assert not result.missing
    assert sorted(result.unused) == sorted(n for n in _expected_tf1_names(config) if n.startswith("cls/"))


def test_missing_path_names_the_path(tmp_path):
    path = str(tmp_path / "does" / "not" / "exist")
    with pytest.raises(CheckpointError, match="does/not/exist"):
        load_checkpoint(_built(AlbertModel, _config()), path)
    with pytest.raises(CheckpointError, match="does/not/exist"):
        detect_format(path)
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    with pytest.raises(CheckpointError, match="empty_dir"):
        load_checkpoint(_built(AlbertModel, _config()), str(empty))


# ------------------------------------------------------------ Hugging Face

def _assert_loads_whole(model, cls, config, path, fmt):
    """`path` (written from `model` in format `fmt`) loads into a fresh `cls` with nothing missing or unused, and
    the fresh model has `model`'s weights and outputs."""
    fresh = _built(cls, config, seed=1)
    result = load_checkpoint(fresh, path)
    assert result.format == fmt and not result.missing and not result.unused
    _assert_same_weights(model, fresh)
    _assert_same_outputs(model, fresh, _inputs(config))


@pytest.mark.slow
@pytest.mark.parametrize("cls", [AlbertForPretraining, AlbertModel])
def test_huggingface_round_trip(cls, tmp_path):
    config = _config(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2, hidden_act="gelu_exact")
    model = _built(cls, config)
    directory = str(tmp_path / "hf")
    save_checkpoint(model, directory, "huggingface")
    assert {"config.json", "model.safetensors"} <= set(os.listdir(directory))
    with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
        hf_config = json.load(f)
    assert hf_config["hidden_act"] == "gelu" and hf_config["model_type"] == "albert"
    assert AlbertConfig.from_hf_dict(hf_config) == config
    assert detect_format(directory) == "huggingface"
    assert detect_format(os.path.join(directory, "model.safetensors")) == "huggingface"

    _assert_loads_whole(model, cls, config, directory, "huggingface")
    # The bare safetensors file loads too.
    again = _built(cls, config, seed=2)
    load_checkpoint(again, os.path.join(directory, "model.safetensors"))
    _assert_same_weights(model, again)


def test_huggingface_reference_save_reload(tmp_path):
    config, model, inputs, reference = _reference_model()
    directory = str(tmp_path / "resaved")
    assert save_checkpoint(model, directory, "huggingface") == directory
    ours = load_file(os.path.join(directory, "model.safetensors"))
    theirs = load_file(os.path.join(REFERENCE, "groups2_inner2", "model.safetensors"))
    assert set(ours) == set(theirs)  # the tied decoder weight and bias left out, as transformers leaves them
    for key, value in theirs.items():
        np.testing.assert_array_equal(ours[key], value, err_msg=key)
    fresh = AlbertForPretraining(config)
    load_checkpoint(fresh, directory)
    _assert_same_outputs(model, fresh, inputs)
    out = _outputs(fresh, inputs)
    for key in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
        np.testing.assert_allclose(out[key], reference[key], atol=1e-5, err_msg=key)


def test_huggingface_tensors_are_taken_for_the_names_they_map_to_only():
    """`to_tf1_arrays`: a TF1 name Hugging Face has no tensor for, or whose tensor the file lacks, is left out;
    kernels come transposed, the rest as they are; `used` names the tensors taken."""
    kernel, bias = np.arange(6.0).reshape(2, 3), np.arange(3.0)
    tensors = {"albert.pooler.weight": kernel, "albert.pooler.bias": bias, "predictions.bias": bias}
    arrays, used = huggingface.to_tf1_arrays(tensors, ["bert/pooler/dense/kernel", "bert/pooler/dense/bias",
                                                       "cls/squad/output_bias", "bert/not/a/variable"])
    assert sorted(arrays) == ["bert/pooler/dense/bias", "bert/pooler/dense/kernel"]
    np.testing.assert_array_equal(arrays["bert/pooler/dense/kernel"], kernel.T)
    np.testing.assert_array_equal(arrays["bert/pooler/dense/bias"], bias)
    assert used == {"albert.pooler.weight", "albert.pooler.bias"}


def test_huggingface_weights_are_a_folders_model_safetensors_or_such_a_file(tmp_path):
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"")
    (tmp_path / "other.bin").write_bytes(b"")
    (tmp_path / "empty").mkdir()
    assert huggingface.weights_file(str(tmp_path)) == str(weights)
    assert huggingface.weights_file(str(weights)) == str(weights)
    for path in (tmp_path / "empty", tmp_path / "other.bin", tmp_path / "absent.safetensors"):
        assert huggingface.weights_file(str(path)) is None, path


def test_huggingface_folder_takes_an_export_only_when_empty_or_an_earlier_export(tmp_path):
    problem = huggingface.folder_problem
    (tmp_path / "file").write_text("x")
    for name in ("empty", "earlier", "partial", "other"):
        (tmp_path / name).mkdir()
    for name in huggingface.MODEL_FILES:
        (tmp_path / "earlier" / name).write_text("{}")
    for name in huggingface.MODEL_FILES[:2]:
        (tmp_path / "partial" / name).write_text("{}")
    (tmp_path / "other" / "notes.txt").write_text("x")
    assert [problem(str(tmp_path / name)) for name in ("missing", "empty", "earlier")] == [None, None, None]
    assert problem(str(tmp_path / "file")) == "it is a file"
    for name in ("partial", "other"):
        assert problem(str(tmp_path / name)).startswith("it holds files that are not a Hugging Face export")
    with pytest.raises(UsageError, match=f"^--output_path {tmp_path}/file: it is a file$"):
        huggingface.check_export_folder(str(tmp_path / "file"), f"--output_path {tmp_path}/file")
    huggingface.check_export_folder(str(tmp_path / "earlier"), "--output_path")


def test_huggingface_folder_by_default_and_the_format_object(tmp_path):
    """`write_folder` with its defaults (lowercasing, 512 positions, no regression, no overwrite) and the
    format's own write (weights and config.json only), read_config, read and load (unused tensors reported)."""
    config = _config(max_position_embeddings=512)
    model = _built(AlbertModel, config)
    arrays = model_arrays(model)
    vocab = tmp_path / "vocab.txt"  # a WordPiece vocabulary of the model's size
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] +
                               [f"w{i}" for i in range(config.vocab_size - 5)]) + "\n", encoding="utf-8")
    folder = str(tmp_path / "hf")
    assert huggingface.write_folder(folder, config, arrays, vocab_file=str(vocab)) == folder
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        assert f.read() == json.dumps(huggingface.hf_config(config, arrays), indent=2, sort_keys=True)
    with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as f:
        tokenizer = json.load(f)
    assert (tokenizer["do_lower_case"], tokenizer["model_max_length"]) == (True, 512)
    with pytest.raises(fileio.OutputError):
        huggingface.write_folder(folder, config, arrays)
    one_output = {"output_weights": np.zeros([1, config.hidden_size], np.float32),
                  "output_bias": np.zeros([1], np.float32)}
    huggingface.write_folder(str(tmp_path / "classifier"), config, {**arrays, **one_output})
    with open(os.path.join(tmp_path, "classifier", "config.json"), encoding="utf-8") as f:
        assert "problem_type" not in json.load(f)  # one output, not said to be a regression
    fmt = huggingface.FORMAT
    assert fmt.read_config(folder) == config
    read = fmt.read(folder, list(arrays))
    assert sorted(read) == sorted(arrays)
    for name, value in arrays.items():
        np.testing.assert_array_equal(read[name], value, err_msg=name)

    written = str(tmp_path / "weights")
    assert fmt.write(model, written) == written and sorted(os.listdir(written)) == ["config.json",
                                                                                     "model.safetensors"]
    tensors = load_file(os.path.join(written, "model.safetensors"))
    tensors["albert.extra.weight"] = np.zeros([2], np.float32)
    save_file(tensors, os.path.join(written, "model.safetensors"))
    _, result, _ = fmt.load(_built(AlbertModel, config, seed=1), written)
    assert result.unused == ["albert.extra.weight"]


def test_huggingface_encoder_only_file_loads(tmp_path):
    """An `AlbertModel` file (no `albert.` prefix, no heads) loads into the encoder."""
    tensors = load_file(os.path.join(REFERENCE, "single_group", "model.safetensors"))
    from safetensors.numpy import save_file

    directory = tmp_path / "bare"
    directory.mkdir()
    save_file({k[len("albert."):]: v for k, v in tensors.items() if k.startswith("albert.")},
              str(directory / "model.safetensors"))
    shutil.copy(os.path.join(REFERENCE, "single_group", "config.json"), directory / "config.json")
    config = AlbertConfig.from_json_file(os.path.join(REFERENCE, "single_group", "albert_config.json"))
    encoder = AlbertModel(config)
    result = load_checkpoint(encoder, str(directory))
    assert not result.missing and not result.unused
    reference = dict(np.load(os.path.join(REFERENCE, "single_group", "reference.npz")))
    out = _outputs(encoder, {k: reference[k] for k in ("input_ids", "input_mask", "segment_ids")})
    np.testing.assert_allclose(out["sequence_output"], reference["sequence_output"], atol=1e-5)


@pytest.mark.parametrize("field,value", [("num_hidden_layers", 6), ("hidden_act", "gelu"),
                                         ("hidden_size", 64), ("num_hidden_groups", 1)])
def test_huggingface_config_mismatch_raises(field, value, tmp_path):
    directory = tmp_path / "hf"
    shutil.copytree(os.path.join(REFERENCE, "groups2_inner2"), directory)
    with open(directory / "config.json", encoding="utf-8") as f:
        hf = json.load(f)
    hf[field] = value
    if field == "hidden_size":
        hf["num_attention_heads"] = 4
    (directory / "config.json").write_text(json.dumps(hf))
    config = AlbertConfig.from_json_file(os.path.join(REFERENCE, "groups2_inner2", "albert_config.json"))
    with pytest.raises(CheckpointError, match=f"'{field}'"):
        load_checkpoint(AlbertForPretraining(config), str(directory))


# ------------------------------------------------------------------ native
def test_native_round_trip_into_pretraining_and_encoder(tmp_path):
    config = _config(num_hidden_layers=4, num_hidden_groups=2)
    model = _built(AlbertForPretraining, config)
    prefix = str(tmp_path / "native")
    save_checkpoint(model, prefix, "native")
    assert detect_format(prefix) == "native"
    _assert_loads_whole(model, AlbertForPretraining, config, prefix, "native")

    encoder = _built(AlbertModel, config, seed=2)
    result = load_checkpoint(encoder, prefix)
    assert not result.missing
    assert result.unused and all("/albert/" not in k for k in result.unused)  # the heads
    _assert_same_outputs(model.albert, encoder, _inputs(config))

    # An encoder-only native checkpoint loads into a pretraining model, reporting the heads missing.
    encoder_prefix = str(tmp_path / "encoder_native")
    save_checkpoint(encoder, encoder_prefix, "native")
    pretraining = _built(AlbertForPretraining, config, seed=3)
    result = load_checkpoint(pretraining, encoder_prefix)
    assert result.missing and all("/albert/" not in k for k in result.missing)
    _assert_same_outputs(encoder, pretraining.albert, _inputs(config))


def test_native_keys_are_tf_checkpoints_own_and_an_excluded_head_is_not_written(tmp_path):
    """`object_keys` names each weight once, as `tf.train.Checkpoint(model=...)` does; writing with `exclude_ids`
    (the heads a converted input lacked) leaves exactly those out, under the same keys for the rest."""
    config = _config()
    model = _built(AlbertForPretraining, config)
    keys = native.object_keys(model)
    whole = tf.train.Checkpoint(model=model).write(str(tmp_path / "whole"))
    stored = {k for k, _ in tf.train.list_variables(whole)} - {"_CHECKPOINTABLE_OBJECT_GRAPH"}
    assert set(keys) == stored and len(keys) == len(model.weights)

    class Shared(keras.Model):  # one layer under two attributes: TF stores it once, by the first
        def __init__(self):
            super().__init__()
            self.first = keras.layers.Dense(2)
            self.second = self.first

        def call(self, x):
            return self.second(self.first(x))

    shared = Shared()
    shared(np.zeros((1, 2), np.float32))
    written = tf.train.Checkpoint(model=shared).write(str(tmp_path / "shared"))
    assert set(native.object_keys(shared)) == {k for k, _ in tf.train.list_variables(written)} - {
        "_CHECKPOINTABLE_OBJECT_GRAPH"}
    head = {id(v) for v in model.seq_relationship.weights}
    prefix = native.FORMAT.write(model, str(tmp_path / "partial"), exclude_ids=head)
    save_checkpoint(model, str(tmp_path / "tf1"), "original")
    unbuilt = native.FORMAT.write(AlbertForPretraining(config), str(tmp_path / "unbuilt"))  # built to be written
    assert {k for k, _ in tf.train.list_variables(unbuilt)} - {"_CHECKPOINTABLE_OBJECT_GRAPH"} == set(keys)
    assert native.is_native(prefix) is True and native.is_native(str(tmp_path / "tf1")) is False  # no object graph
    assert native.is_native(str(tmp_path / "missing")) is False
    written = {k for k, _ in tf.train.list_variables(prefix)} - {"_CHECKPOINTABLE_OBJECT_GRAPH"}
    assert written == {k for k, v in keys.items() if id(v) not in head} and len(written) == len(keys) - 2
    again = _built(AlbertForPretraining, config, seed=4)
    result = load_checkpoint(again, prefix)
    assert sorted(result.missing) == sorted(k for k, v in keys.items() if id(v) in head) and not result.unused
    assert sorted(result.loaded) == sorted(k for k, v in keys.items() if id(v) not in head)
    for key, variable in native.object_keys(again).items():
        if key not in result.missing:
            np.testing.assert_array_equal(variable.numpy(), keys[key].numpy(), err_msg=key)


def test_native_training_checkpoint_with_optimizer(tmp_path):
    """A checkpoint as training writes it: model, optimizer state and step, through a CheckpointManager.

    The saver files each variable under the first path it meets, which for most weights is the optimizer's
    `optimizer/_trainable_variables/N`, so loading must go through the object graph."""
    config = _config()
    model = _built(AlbertForPretraining, config)
    optimizer = keras.optimizers.Adam(1e-2)
    inputs = _inputs(config)
    with tf.GradientTape() as tape:
        out = model(inputs, training=True)
        loss = tf.reduce_mean(tf.square(out["mlm_logits"])) + tf.reduce_mean(tf.square(out["sop_logits"]))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    step = tf.Variable(1, dtype=tf.int64)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model, optimizer=optimizer, step=step),
                                         str(tmp_path / "train"), max_to_keep=2)
    manager.save()
    keys = [n for n, _ in tf.train.list_variables(manager.latest_checkpoint)]
    assert any(k.startswith("optimizer/") for k in keys)
    assert detect_format(str(tmp_path / "train")) == "native"

    fresh = _built(AlbertForPretraining, config, seed=1)
    result = load_checkpoint(fresh, str(tmp_path / "train"))
    assert not result.missing and not result.unused
    _assert_same_weights(model, fresh)
    _assert_same_outputs(model, fresh, inputs)
    encoder = _built(AlbertModel, config, seed=2)
    result = load_checkpoint(encoder, manager.latest_checkpoint)
    assert not result.missing and len(result.loaded) == len(encoder.weights)
    # The heads, unused, are named by their place in the model, not by the optimizer's key they were stored under.
    heads = {k for k in native.object_keys(model) if not k.startswith("model/albert/")}
    assert set(result.unused) == heads
    _assert_same_outputs(model.albert, encoder, inputs)


def test_native_shape_mismatch_names_the_variable(tmp_path):
    prefix = str(tmp_path / "native")
    save_checkpoint(_built(AlbertModel, _config(intermediate_size=48)), prefix, "native")
    with pytest.raises(CheckpointError, match="feedforward_intermediate_dense"):
        load_checkpoint(_built(AlbertModel, _config()), prefix)


# --------------------------------------------------------------- keras-hub
@pytest.fixture(scope="module")
def keras_hub_backbone():
    """A small keras-hub ALBERT (2 groups) with every weight random, and its outputs on padded inputs."""
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=60, num_layers=4, num_heads=2, embedding_dim=8, hidden_dim=16, intermediate_dim=32,
        num_groups=2, max_sequence_length=16)
    randomize(backbone, seed=11)
    config = _config(num_hidden_layers=4, num_hidden_groups=2)
    inputs = _inputs(config)
    outputs = backbone({"token_ids": inputs["input_ids"], "segment_ids": inputs["segment_ids"],
                        "padding_mask": inputs["input_mask"]})
    return backbone, config, inputs, {k: v.numpy() for k, v in outputs.items()}


def _check_against_keras_hub(model, inputs, expected):
    out = _outputs(model, inputs)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(out[key], expected[key], rtol=0, atol=1e-5, err_msg=key)


def test_keras_hub_backbone_object(keras_hub_backbone):
    backbone, config, inputs, expected = keras_hub_backbone
    assert detect_format(backbone) == "keras_hub"
    model = AlbertModel(config)
    result = load_checkpoint(model, backbone)
    assert result.format == "keras_hub" and not result.missing and not result.unused
    _check_against_keras_hub(model, {k: v for k, v in inputs.items() if k != "masked_lm_positions"}, expected)
    # Into a pretraining model: the encoder loads, the heads (keras-hub has none here) are reported.
    pretraining = AlbertForPretraining(config)
    result = load_checkpoint(pretraining, backbone)
    assert result.missing and all(name.startswith("cls/") for name in result.missing)
    _check_against_keras_hub(pretraining, inputs, expected)


def test_keras_hub_preset_directory(keras_hub_backbone, tmp_path):
    backbone, config, inputs, expected = keras_hub_backbone
    preset = str(tmp_path / "albert_preset")
    backbone.save_to_preset(preset)
    assert detect_format(preset) == "keras_hub"
    model = AlbertModel(config)
    result = load_checkpoint(model, preset)
    assert not result.missing and not result.unused
    _check_against_keras_hub(model, inputs, expected)
