"""AlbertConfig: JSON round trips, presets, exact parameter counts, errors, Hugging Face mapping."""

import json
import os

import pytest

from albert_tf.config import AlbertConfig, ConfigError

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
REFERENCE = os.path.join(FIXTURES, "reference")
REFERENCE_NAMES = ("single_group", "groups2_inner2", "exact_gelu")
# The released albert_config.json of ALBERT-base v2 (copied from the original release's tarball).
BASE_V2_JSON = os.path.join(FIXTURES, "albert_config_base_v2.json")

# The original's parameter counts (encoder + pooler; with the MLM and SOP heads), from the issue.
ENCODER_PARAMS = {"base": 11_683_584, "large": 17_683_968, "xlarge": 58_724_864, "xxlarge": 222_595_584}
PRETRAINING_PARAMS = {"base": 11_813_810, "large": 17_847_474, "xlarge": 59_021_490, "xxlarge": 223_158_450}
SHAPES = {"base": (768, 12, 12, 3072), "large": (1024, 24, 16, 4096), "xlarge": (2048, 24, 16, 8192),
          "xxlarge": (4096, 12, 64, 16384)}


def _tiny(**overrides):
    values = dict(vocab_size=100, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=32, max_position_embeddings=32)
    values.update(overrides)
    return values


def _read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


# ------------------------------------------------------------------ round trips
@pytest.mark.parametrize("path", [BASE_V2_JSON] + [os.path.join(REFERENCE, n, "albert_config.json")
                                                   for n in REFERENCE_NAMES],
                         ids=["base_v2"] + list(REFERENCE_NAMES))
def test_json_round_trip(path, tmp_path):
    config = AlbertConfig.from_json_file(path)
    out = tmp_path / "albert_config.json"
    config.to_json_file(str(out))
    # Same keys and values as the file we read (every field of the original format, nothing added).
    assert _read_json(str(out)) == _read_json(path)
    assert AlbertConfig.from_json_file(str(out)) == config
    assert not [p for p in os.listdir(tmp_path) if p != "albert_config.json"], "temporary file left behind"


def test_released_base_v2_file_is_the_preset():
    config = AlbertConfig.from_json_file(BASE_V2_JSON)
    assert config == AlbertConfig.preset("base_v2")
    assert config.hidden_act == "gelu"
    assert config.num_parameters() == ENCODER_PARAMS["base"]


def test_every_original_field_is_carried():
    fields = {"vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_hidden_groups",
              "inner_group_num", "num_attention_heads", "intermediate_size", "hidden_act", "hidden_dropout_prob",
              "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size", "initializer_range",
              "net_structure_type", "gap_size", "num_memory_blocks", "down_scale_factor"}
    assert set(AlbertConfig().to_dict()) == fields
    assert set(_read_json(BASE_V2_JSON)) == fields


def test_dict_round_trip_keeps_types():
    config = AlbertConfig.from_dict(_tiny(hidden_dropout_prob=0, initializer_range=1))
    assert isinstance(config.hidden_dropout_prob, float) and isinstance(config.initializer_range, float)
    assert AlbertConfig.from_dict(config.to_dict()) == config
    assert AlbertConfig.from_dict(json.loads(config.to_json_string())) == config


# --------------------------------------------------------------------- presets
@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("size", ["base", "large", "xlarge", "xxlarge"])
def test_presets_shapes_and_exact_parameter_counts(size, version):
    config = AlbertConfig.preset(f"{size}_{version}")
    hidden, layers, heads, inner = SHAPES[size]
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads,
            config.intermediate_size) == (hidden, layers, heads, inner)
    assert (config.vocab_size, config.embedding_size, config.max_position_embeddings) == (30000, 128, 512)
    assert (config.num_hidden_groups, config.inner_group_num, config.hidden_act) == (1, 1, "gelu")
    dropout = 0.1 if version == "v1" else 0.0
    assert config.hidden_dropout_prob == dropout and config.attention_probs_dropout_prob == dropout
    assert config.num_parameters() == ENCODER_PARAMS[size]
    assert config.num_parameters(with_heads=True) == PRETRAINING_PARAMS[size]


def test_preset_names_and_unknown_preset():
    assert sorted(AlbertConfig.preset_names()) == sorted(
        f"{s}_{v}" for s in SHAPES for v in ("v1", "v2"))
    with pytest.raises(ConfigError, match="huge_v2"):
        AlbertConfig.preset("huge_v2")
    with pytest.raises(ConfigError, match="base_v3"):
        AlbertConfig.preset("base_v3")


@pytest.mark.parametrize("size", ["base", "large"])
def test_built_model_parameter_count_equals_formula(size):
    """The built Keras models hold exactly num_parameters() weights (xlarge/xxlarge use the formula only)."""
    from albert_tf.model import AlbertForPretraining, dummy_inputs

    config = AlbertConfig.preset(f"{size}_v2")
    model = AlbertForPretraining(config)
    model(dummy_inputs(num_predictions=1), training=False)
    assert model.albert.count_params() == config.num_parameters() == ENCODER_PARAMS[size]
    assert model.count_params() == config.num_parameters(with_heads=True) == PRETRAINING_PARAMS[size]


def test_flops_per_token_base():
    # 2*E*H for the projection, then per layer 2*(4H^2 + 2HI) for the matmuls and 4*T*H for attention.
    config = AlbertConfig.preset("base_v2")
    assert config.flops_per_token(128) == 2 * 128 * 768 + 12 * (2 * (4 * 768**2 + 2 * 768 * 3072) + 4 * 128 * 768)
    assert config.flops_per_token(128) == 174_784_512
    # Sharing saves parameters, not compute: groups do not change the FLOPs.
    grouped = AlbertConfig.from_dict({**config.to_dict(), "num_hidden_groups": 2})
    assert grouped.flops_per_token(128) == config.flops_per_token(128)


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize("field", ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                   "intermediate_size"])
def test_missing_field_is_named(field, tmp_path):
    values = _tiny()
    del values[field]
    with pytest.raises(ConfigError, match=f"'{field}'"):
        AlbertConfig.from_dict(values)
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps(values))
    with pytest.raises(ConfigError, match=f"'{field}'") as err:
        AlbertConfig.from_json_file(str(path))
    assert str(path) in str(err.value)


@pytest.mark.parametrize("field,value", [
    ("hidden_size", "768"), ("vocab_size", 30000.0), ("num_hidden_layers", True), ("embedding_size", None),
    ("hidden_dropout_prob", "0.1"), ("initializer_range", False), ("max_position_embeddings", [512]),
])
def test_mistyped_field_is_named(field, value, tmp_path):
    with pytest.raises(ConfigError, match=f"'{field}'"):
        AlbertConfig.from_dict(_tiny(**{field: value}))
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_tiny(**{field: value})))
    with pytest.raises(ConfigError, match=f"'{field}'") as err:
        AlbertConfig.from_json_file(str(path))
    assert "bad.json" in str(err.value)


@pytest.mark.parametrize("overrides,field", [
    (dict(hidden_size=30, num_attention_heads=4), "hidden_size"),  # not divisible by heads
    (dict(num_hidden_layers=0), "num_hidden_layers"),
    (dict(inner_group_num=0), "inner_group_num"),
    (dict(hidden_dropout_prob=1.0), "hidden_dropout_prob"),
    (dict(attention_probs_dropout_prob=-0.1), "attention_probs_dropout_prob"),
    (dict(initializer_range=0.0), "initializer_range"),
    (dict(hidden_act="swish"), "hidden_act"),
    (dict(hidden_act="gelu_new"), "hidden_act"),  # a Hugging Face name is not an original one
    (dict(net_structure_type=1), "net_structure_type"),
    (dict(down_scale_factor=2), "down_scale_factor"),
])
def test_inconsistent_value_is_named(overrides, field):
    with pytest.raises(ConfigError, match=f"'{field}'"):
        AlbertConfig.from_dict(_tiny(**overrides))
    with pytest.raises(ConfigError, match=f"'{field}'"):
        AlbertConfig(**_tiny(**overrides))  # the constructor validates too


@pytest.mark.parametrize("layers,groups,table", [
    (6, 4, [0, 0, 1, 2, 2, 3]),  # not divisible, as the original accepts
    (2, 3, [0, 1]),  # more groups than layers: group 2 is never run and has no weights
    (22, 22, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 14, 16, 17, 18, 19, 20, 21]),  # 15/22*22 < 15
])
def test_any_layer_and_group_counts_are_accepted(layers, groups, table):
    config = AlbertConfig(**_tiny(num_hidden_layers=layers, num_hidden_groups=groups))
    assert config.layer_groups() == table
    assert config.used_groups() == sorted(set(table))
    one_group = AlbertConfig(**_tiny(num_hidden_layers=layers))
    two_blocks = AlbertConfig(**_tiny(num_hidden_layers=layers, inner_group_num=2))
    block = two_blocks.num_parameters() - one_group.num_parameters()
    assert config.num_parameters() == one_group.num_parameters() + (len(set(table)) - 1) * block


def test_unknown_field_is_named():
    with pytest.raises(ConfigError, match="'hidden_layers'"):
        AlbertConfig.from_dict(_tiny(hidden_layers=3))


def test_unreadable_files(tmp_path):
    with pytest.raises(ConfigError, match="not found") as err:
        AlbertConfig.from_json_file(str(tmp_path / "nope.json"))
    assert "nope.json" in str(err.value)
    bad = tmp_path / "broken.json"
    bad.write_text("{\"vocab_size\": 3")
    with pytest.raises(ConfigError, match="broken.json"):
        AlbertConfig.from_json_file(str(bad))
    array = tmp_path / "array.json"
    array.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="JSON object"):
        AlbertConfig.from_json_file(str(array))


# ---------------------------------------------------------------- Hugging Face
@pytest.mark.parametrize("name", REFERENCE_NAMES)
def test_hf_config_json_matches_albert_config_json(name):
    directory = os.path.join(REFERENCE, name)
    ours = AlbertConfig.from_json_file(os.path.join(directory, "albert_config.json"))
    hf = _read_json(os.path.join(directory, "config.json"))
    assert AlbertConfig.from_hf_dict(hf) == ours
    # from_json_file recognises a Hugging Face config.json by its keys.
    assert AlbertConfig.from_json_file(os.path.join(directory, "config.json")) == ours


def test_hf_activation_names_map_both_ways():
    # Hugging Face "gelu_new" (and its other tanh spellings) is the original's "gelu" (tanh approximation);
    # Hugging Face "gelu" is the exact erf form, "gelu_exact" here.
    for hf_act, ours in (("gelu_new", "gelu"), ("gelu_pytorch_tanh", "gelu"), ("gelu_fast", "gelu"),
                         ("gelu", "gelu_exact"), ("relu", "relu")):
        assert AlbertConfig.from_hf_dict({"model_type": "albert", **_tiny(), "hidden_act": hf_act}).hidden_act \
            == ours
    assert AlbertConfig(**_tiny(hidden_act="gelu")).to_hf_dict()["hidden_act"] == "gelu_new"
    assert AlbertConfig(**_tiny(hidden_act="gelu_exact")).to_hf_dict()["hidden_act"] == "gelu"


@pytest.mark.parametrize("act", ["gelu", "gelu_exact", "relu"])
def test_to_hf_dict_round_trip(act, tmp_path):
    config = AlbertConfig(**_tiny(hidden_act=act, num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2,
                                  hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.05))
    hf = config.to_hf_dict()
    assert hf["model_type"] == "albert" and hf["architectures"] == ["AlbertForPreTraining"]
    assert hf["layer_norm_eps"] == 1e-12
    assert AlbertConfig.from_hf_dict(hf) == config
    path = tmp_path / "config.json"
    path.write_text(json.dumps(hf))
    assert AlbertConfig.from_json_file(str(path)) == config


def test_hf_errors_name_the_problem():
    with pytest.raises(ConfigError, match="'hidden_act'"):
        AlbertConfig.from_hf_dict({"model_type": "albert", **_tiny(), "hidden_act": "silu"})
    with pytest.raises(ConfigError, match="bert"):
        AlbertConfig.from_hf_dict({"model_type": "bert", **_tiny()})
    values = {"model_type": "albert", **_tiny()}
    del values["hidden_size"]
    with pytest.raises(ConfigError, match="'hidden_size'"):
        AlbertConfig.from_hf_dict(values)
