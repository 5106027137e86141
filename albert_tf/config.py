"""`AlbertConfig`: the hyperparameters of an ALBERT model.

The fields and their JSON spelling are exactly those of the original release's `albert_config.json`, so a
user's file loads as it is and `to_json_file` writes one the original code reads back. Hugging Face
`config.json` files map onto the same fields (`from_hf_dict` / `to_hf_dict`).

Activation names follow the original: `"gelu"` is the tanh approximation (Hugging Face calls it `"gelu_new"`);
the exact erf form, Hugging Face's `"gelu"`, is `"gelu_exact"` here.
"""

import copy
import dataclasses
import json
import os

from albert_tf.errors import AlbertError, UsageError

ACTIVATIONS = ("gelu", "gelu_exact", "relu", "tanh", "linear")

# Hugging Face activation name -> ours, and back.
_HF_TO_ACT = {"gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "gelu_fast": "gelu", "gelu": "gelu_exact",
              "relu": "relu", "tanh": "tanh", "linear": "linear"}
_ACT_TO_HF = {"gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu", "tanh": "tanh", "linear": "linear"}

_INT_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_hidden_groups",
               "inner_group_num", "num_attention_heads", "intermediate_size", "max_position_embeddings",
               "type_vocab_size", "net_structure_type", "gap_size", "num_memory_blocks", "down_scale_factor")
_FLOAT_FIELDS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range")

# Released shapes: (hidden_size, num_hidden_layers, num_attention_heads, intermediate_size).
_PRESET_SHAPES = {
    "base": (768, 12, 12, 3072),
    "large": (1024, 24, 16, 4096),
    "xlarge": (2048, 24, 16, 8192),
    "xxlarge": (4096, 12, 64, 16384),
}


def layer_group(layer_index, num_hidden_layers, num_hidden_groups):
    """The group whose blocks compute layer `layer_index` (0-based): the original's
    `int(layer_idx / num_hidden_layers * num_hidden_groups)`, in the same float arithmetic.

    It accepts any layer and group counts. Float rounding makes it differ from the exact floor(l * G / L) for a
    few shapes: with 22 layers in 22 groups, 15 / 22 * 22 is 14.999..., so layer 15 runs group 14 and group 15
    is never used (the original creates no weights for it). Hugging Face computes `int(l / (L / G))`, which
    differs again (18 layers in 14 groups: layer 9 runs group 6 there, group 7 here and in the original).
    """
    return int(layer_index / num_hidden_layers * num_hidden_groups)


class ConfigError(AlbertError):
    """A config value is missing, mistyped or inconsistent; the message names the field (and file)."""


@dataclasses.dataclass
class AlbertConfig:
    """Hyperparameters of ALBERT, one field per key of the original `albert_config.json`.

    `net_structure_type`, `gap_size`, `num_memory_blocks` and `down_scale_factor` are carried for round
    trips; the original release never used values other than 0, 0, 0, 1 and neither do we (other values are
    rejected). `validate()` runs on construction.
    """

    vocab_size: int = 30000
    embedding_size: int = 128
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_hidden_groups: int = 1
    inner_group_num: int = 1
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    net_structure_type: int = 0
    gap_size: int = 0
    num_memory_blocks: int = 0
    down_scale_factor: int = 1

    def __post_init__(self):
        self.validate()

    # ----------------------------------------------------------------- checks
    def validate(self, source=None):
        """Raises `ConfigError` naming the field (and `source`, a file name) for any bad value."""
        where = f" in {source}" if source else ""

        def fail(field, msg):
            raise ConfigError(f"albert config{where}: field '{field}' {msg}")

        for name in _INT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                fail(name, f"must be an integer, got {value!r} ({type(value).__name__})")
        for name in _FLOAT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                fail(name, f"must be a number, got {value!r} ({type(value).__name__})")
            setattr(self, name, float(value))
        for name in ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_hidden_groups",
                     "inner_group_num", "num_attention_heads", "intermediate_size", "max_position_embeddings",
                     "type_vocab_size", "down_scale_factor"):
            if getattr(self, name) < 1:
                fail(name, f"must be at least 1, got {getattr(self, name)}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            if not 0.0 <= getattr(self, name) < 1.0:
                fail(name, f"must be in [0, 1), got {getattr(self, name)}")
        if self.initializer_range <= 0:
            fail("initializer_range", f"must be positive, got {self.initializer_range}")
        if self.hidden_act not in ACTIVATIONS:
            fail("hidden_act", f"is {self.hidden_act!r}; known: {', '.join(ACTIVATIONS)}")
        if self.hidden_size % self.num_attention_heads:
            fail("hidden_size", f"({self.hidden_size}) is not divisible by num_attention_heads "
                                f"({self.num_attention_heads})")
        for name, expected in (("net_structure_type", 0), ("gap_size", 0), ("num_memory_blocks", 0),
                               ("down_scale_factor", 1)):
            if getattr(self, name) != expected:
                fail(name, f"is {getattr(self, name)}; only {expected} is supported (as in every released "
                           "ALBERT model)")
        return self

    def check_sequence_length(self, length, flag="--max_seq_length"):
        """Refuses a sequence length the position embeddings do not cover (the one place this is checked)."""
        if length is not None and int(length) > self.max_position_embeddings:
            raise UsageError(f"Cannot use sequence length {length} because the ALBERT model was only trained up to "
                             f"sequence length {self.max_position_embeddings}: {flag} {length} exceeds "
                             f"max_position_embeddings {self.max_position_embeddings} of the albert config")

    # ----------------------------------------------------------- derived sizes
    @property
    def head_size(self):
        return self.hidden_size // self.num_attention_heads

    def layer_groups(self):
        """The group of each layer, [num_hidden_layers] ints (`layer_group`, the original's rule)."""
        return [layer_group(l, self.num_hidden_layers, self.num_hidden_groups)
                for l in range(self.num_hidden_layers)]

    def used_groups(self):
        """The groups some layer runs, ascending; the others have no weights (as in the original)."""
        return sorted(set(self.layer_groups()))

    def num_parameters(self, with_heads=False):
        """Exact trainable parameter count: encoder + pooler, plus MLM and SOP heads when `with_heads`."""
        v, e, h, i = self.vocab_size, self.embedding_size, self.hidden_size, self.intermediate_size
        embeddings = (v + self.max_position_embeddings + self.type_vocab_size) * e + 2 * e + e * h + h
        block = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
        blocks = len(self.used_groups()) * self.inner_group_num * block
        pooler = h * h + h
        total = embeddings + blocks + pooler
        if with_heads:
            total += (h * e + e) + 2 * e + v + (2 * h + 2)
        return total

    def flops_per_token(self, seq_length):
        """Forward multiply-adds x2 per token of the encoder (all layers run, sharing saves no compute)."""
        h, i = self.hidden_size, self.intermediate_size
        per_layer = 2 * (4 * h * h + 2 * h * i) + 2 * 2 * seq_length * h
        return 2 * self.embedding_size * h + self.num_hidden_layers * self.inner_group_num * per_layer

    # ------------------------------------------------------------ (de)serialise
    def to_dict(self):
        return dataclasses.asdict(self)

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path):
        """Writes the original `albert_config.json` format (atomically)."""
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(self.to_json_string())
        os.replace(tmp, path)

    @classmethod
    def from_dict(cls, values, source=None):
        """Builds a config from a dict in the original format; unknown keys and missing keys are errors."""
        where = f" in {source}" if source else ""
        if not isinstance(values, dict):
            raise ConfigError(f"albert config{where}: expected a JSON object, got {type(values).__name__}")
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - fields)
        if unknown:
            raise ConfigError(f"albert config{where}: unknown field(s) {', '.join(map(repr, unknown))}")
        required = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size")
        missing = [name for name in required if name not in values]
        if missing:
            raise ConfigError(f"albert config{where}: missing field(s) {', '.join(map(repr, missing))}")
        obj = cls.__new__(cls)
        for f in dataclasses.fields(cls):
            setattr(obj, f.name, copy.deepcopy(values.get(f.name, f.default)))
        return obj.validate(source)

    @classmethod
    def from_json_file(cls, path):
        """Reads an original `albert_config.json` (or a Hugging Face `config.json`, detected by its keys)."""
        try:
            with open(path, encoding="utf-8") as f:
                values = json.load(f)
        except FileNotFoundError:
            raise ConfigError(f"albert config file not found: {path}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ConfigError(f"albert config {path} is not valid JSON: {err}") from None
        if isinstance(values, dict) and ("model_type" in values or "architectures" in values):
            return cls.from_hf_dict(values, source=path)
        return cls.from_dict(values, source=path)

    # ---------------------------------------------------------- Hugging Face
    @classmethod
    def from_hf_dict(cls, values, source=None):
        """Builds a config from a Hugging Face ALBERT `config.json` dict."""
        where = f" in {source}" if source else ""
        model_type = values.get("model_type", "albert")
        if model_type != "albert":
            raise ConfigError(f"config{where}: model_type is {model_type!r}, not 'albert'")
        act = values.get("hidden_act", "gelu_new")
        if act not in _HF_TO_ACT:
            raise ConfigError(f"config{where}: field 'hidden_act' {act!r} has no equivalent here; known: "
                              f"{', '.join(_HF_TO_ACT)}")
        mapped = {f.name: values[f.name] for f in dataclasses.fields(cls)
                  if f.name in values and f.name != "hidden_act"}
        mapped["hidden_act"] = _HF_TO_ACT[act]
        for name in ("net_structure_type", "gap_size", "num_memory_blocks"):
            mapped.setdefault(name, 0)
        mapped.setdefault("down_scale_factor", 1)
        return cls.from_dict(mapped, source)

    def to_hf_dict(self):
        """The Hugging Face `config.json` contents for this model (`AlbertForPreTraining`)."""
        values = self.to_dict()
        values["hidden_act"] = _ACT_TO_HF[self.hidden_act]
        values.update(model_type="albert", architectures=["AlbertForPreTraining"], layer_norm_eps=1e-12,
                      classifier_dropout_prob=0.1, pad_token_id=0, bos_token_id=2, eos_token_id=3,
                      position_embedding_type="absolute")
        return values

    # ---------------------------------------------------------------- presets
    @classmethod
    def preset(cls, name):
        """A released configuration: `base|large|xlarge|xxlarge` + `_v1|_v2` (v1: dropout 0.1, v2: 0)."""
        size, _, version = name.partition("_")
        if size not in _PRESET_SHAPES or version not in ("v1", "v2"):
            known = [f"{s}_{v}" for s in _PRESET_SHAPES for v in ("v1", "v2")]
            raise ConfigError(f"unknown preset {name!r}; known: {', '.join(known)}")
        hidden, layers, heads, inner = _PRESET_SHAPES[size]
        dropout = 0.1 if version == "v1" else 0.0
        return cls(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                   intermediate_size=inner, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)

    @classmethod
    def preset_names(cls):
        return [f"{s}_{v}" for s in _PRESET_SHAPES for v in ("v1", "v2")]
