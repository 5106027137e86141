#!/usr/bin/env python3
"""Make the independent numerical reference that albert_tf's tests compare against.

What
----
For each fixture below this script builds a small Hugging Face
`AlbertForPreTraining` model (PyTorch, CPU, float32, eval mode, dropout 0) in
which EVERY parameter is random -- word/position/token-type embeddings, every
Linear kernel and bias, every LayerNorm gamma and beta, the MLM output bias --
with a fixed seed. It runs the model on fixed inputs (batch 3, sequence length
16, padding at the end of two rows, two segments) and writes into
`tests/fixtures/reference/<fixture>/`:

  config.json          the HF config, written by `save_pretrained`
  model.safetensors    the HF weights, written by `save_pretrained` (always
                       safetensors in transformers 5)
  albert_config.json   the same model in the original google-research/albert
                       `albert_config.json` format
  reference.npz        the fixed inputs and the model's outputs (see
                       `_run_hf` for the exact keys and shapes)

plus `tests/fixtures/reference/README.md`, which documents the files, the
command, the versions and the HF tensor names.

Why
---
albert_tf is a TensorFlow/Keras reimplementation of ALBERT. Its tests need
numbers produced by a separate implementation so that a wrong weight mapping,
a transposed kernel, a forgotten bias or LayerNorm parameter, a wrong GELU
variant or a wrong attention mask shows up as a clear numerical difference.
The weights are therefore drawn far from HF's defaults (LayerNorm gamma
1 +- 0.2, all biases ~0.1, kernels ~0.15), and the script checks (in its
verify pass) that replacing any single parameter by a neutral value, or
transposing any square kernel, changes the recorded outputs by much more than
a test tolerance.

As a third, independent check, the verify pass also recomputes every output
with a small float64 numpy forward pass that reads only `albert_config.json`
and the weights -- confirming the original-format config and the HF
semantics (group index, additive key mask, GELU variant, tied decoder).

This tool is NOT run by CI and its dependencies (tools/requirements.txt:
torch, transformers, safetensors, numpy) are not installed by CI; the tests
only read the committed fixture files.

Usage (from the repository root)
-----
  python3 tools/make_reference_outputs.py           # write all fixtures, then verify
  python3 tools/make_reference_outputs.py --verify  # only verify the files on disk
  python3 tools/make_reference_outputs.py --fixtures=single_group --print_tensors=single_group
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys

import numpy as np

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT_DIR = REPO_ROOT / "tests" / "fixtures" / "reference"
COMMAND = "python3 tools/make_reference_outputs.py"

# Shared by all fixtures.
COMMON = dict(
    vocab_size=120,
    embedding_size=16,
    hidden_size=32,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
    type_vocab_size=2,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
    initializer_range=0.02,
)

# name -> (per-fixture HF config fields, torch seed)
FIXTURES = {
    "single_group": (
        dict(num_hidden_layers=3, num_hidden_groups=1, inner_group_num=1, hidden_act="gelu_new"),
        1001,
    ),
    "groups2_inner2": (
        dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2, hidden_act="gelu_new"),
        1002,
    ),
    "exact_gelu": (
        dict(num_hidden_layers=2, num_hidden_groups=1, inner_group_num=1, hidden_act="gelu"),
        1003,
    ),
}

# HF hidden_act -> original albert_config.json hidden_act.
#   HF "gelu_new" = 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)))  == the original's "gelu"
#   HF "gelu"     = x * Phi(x) = 0.5x(1+erf(x/sqrt 2))        == our "gelu_exact"
HF_TO_ORIGINAL_ACT = {"gelu_new": "gelu", "gelu": "gelu_exact"}

BATCH, SEQ_LEN, NUM_MASKED = 3, 16, 5
INPUT_SEED = 20240601
PAD_ID, CLS_ID, SEP_ID, MASK_ID = 0, 2, 3, 4  # ALBERT's SentencePiece ids

# Verify pass: a missed/transposed parameter must move some output by more than
# SENSITIVITY_MIN_DIFF; HF (float32) and the float64 numpy pass must agree to HF_VS_NUMPY_ATOL.
SENSITIVITY_MIN_DIFF = 1e-3
HF_VS_NUMPY_ATOL = 2e-5


# --------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------


def make_inputs() -> dict[str, np.ndarray]:
    """The fixed inputs shared by every fixture.

    Row lengths 16, 11, 6 (rows 1 and 2 end with padding: input_mask 0,
    token id 0, segment id 0). Each row is [CLS] A... [SEP] B... [SEP], with
    segment id 0 up to and including the first [SEP] and 1 after it.
    masked_lm_positions are padded with 0 (as original pretraining data is);
    some of the masked positions hold the [MASK] id.
    """
    rng = np.random.default_rng(INPUT_SEED)
    # (number of A tokens, number of B tokens) per row; length = a + b + 3.
    segment_lengths = [(6, 7), (4, 4), (2, 1)]
    masked_positions = [[1, 4, 9, 12, 14], [2, 7, 9, 0, 0], [1, 4, 0, 0, 0]]

    input_ids = np.zeros((BATCH, SEQ_LEN), np.int32)
    input_mask = np.zeros((BATCH, SEQ_LEN), np.int32)
    segment_ids = np.zeros((BATCH, SEQ_LEN), np.int32)
    for row, (len_a, len_b) in enumerate(segment_lengths):
        tokens_a = rng.integers(5, COMMON["vocab_size"], size=len_a)
        tokens_b = rng.integers(5, COMMON["vocab_size"], size=len_b)
        ids = [CLS_ID, *tokens_a, SEP_ID, *tokens_b, SEP_ID]
        n = len(ids)
        input_ids[row, :n] = ids
        input_mask[row, :n] = 1
        segment_ids[row, len_a + 2 : n] = 1
    positions = np.asarray(masked_positions, np.int32)
    # Replace the first two real masked positions of each row by [MASK].
    for row in range(BATCH):
        for pos in positions[row, :2]:
            input_ids[row, pos] = MASK_ID
    assert positions.shape == (BATCH, NUM_MASKED)
    for row in range(BATCH):
        assert np.all(input_mask[row, positions[row]] == 1)
    return dict(
        input_ids=input_ids,
        input_mask=input_mask,
        segment_ids=segment_ids,
        masked_lm_positions=positions,
    )


# --------------------------------------------------------------------------
# Model building (torch / transformers imported lazily so --help works anywhere)
# --------------------------------------------------------------------------


def hf_config(name: str):
    from transformers import AlbertConfig

    fields, _ = FIXTURES[name]
    return AlbertConfig(
        **COMMON,
        **fields,
        classifier_dropout_prob=0.0,
        layer_norm_eps=1e-12,
        attn_implementation="eager",
    )


def original_albert_config(config) -> dict:
    """The model in google-research/albert's albert_config.json format."""
    return {
        "attention_probs_dropout_prob": config.attention_probs_dropout_prob,
        "down_scale_factor": 1,
        "embedding_size": config.embedding_size,
        "gap_size": 0,
        "hidden_act": HF_TO_ORIGINAL_ACT[config.hidden_act],
        "hidden_dropout_prob": config.hidden_dropout_prob,
        "hidden_size": config.hidden_size,
        "initializer_range": config.initializer_range,
        "inner_group_num": config.inner_group_num,
        "intermediate_size": config.intermediate_size,
        "max_position_embeddings": config.max_position_embeddings,
        "net_structure_type": 0,
        "num_attention_heads": config.num_attention_heads,
        "num_hidden_groups": config.num_hidden_groups,
        "num_hidden_layers": config.num_hidden_layers,
        "num_memory_blocks": 0,
        "type_vocab_size": config.type_vocab_size,
        "vocab_size": config.vocab_size,
    }


def _param_kind(model, name: str) -> str:
    """Classifies a parameter by the module that owns it."""
    import torch.nn as nn
    from transformers.models.albert.modeling_albert import AlbertMLMHead

    module_name, _, attr = name.rpartition(".")
    module = model.get_submodule(module_name)
    if isinstance(module, nn.LayerNorm):
        return "ln_gamma" if attr == "weight" else "ln_beta"
    if isinstance(module, nn.Embedding):
        return "embedding"
    if isinstance(module, nn.Linear):
        return "kernel" if attr == "weight" else "bias"
    if isinstance(module, AlbertMLMHead) and attr == "bias":
        return "bias"  # MLM output bias (tied to predictions.decoder.bias)
    raise ValueError(f"unclassified parameter {name} on {type(module).__name__}")


def build_model(name: str, stds: dict[str, float]):
    """A float32 eval-mode AlbertForPreTraining with every parameter random."""
    import torch
    from transformers import AlbertForPreTraining

    _, seed = FIXTURES[name]
    torch.manual_seed(seed)
    model = AlbertForPreTraining(hf_config(name)).to(torch.float32).eval()
    gen = torch.Generator().manual_seed(seed)
    seen = 0
    with torch.no_grad():
        # named_parameters() yields each shared (tied) tensor once, in a fixed order.
        for pname, param in model.named_parameters():
            kind = _param_kind(model, pname)
            noise = torch.randn(param.shape, generator=gen, dtype=torch.float32)
            if kind == "ln_gamma":
                value = 1.0 + stds["ln_gamma"] * noise
            elif kind == "ln_beta":
                value = stds["bias"] * noise
            else:
                value = stds[kind] * noise
            param.copy_(value)
            seen += 1
    total = len(list(model.parameters()))
    assert seen == total, (seen, total)
    # The MLM decoder must still be tied to the (randomised) word embeddings.
    assert model.predictions.decoder.weight is model.albert.embeddings.word_embeddings.weight
    assert model.predictions.decoder.bias is model.predictions.bias
    return model


def _run_hf(model, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Runs the model; returns inputs + outputs, all as numpy arrays.

    Keys and shapes (B=3, S=16, H=hidden, L=num_hidden_layers, V=vocab, P=5):
      input_ids, input_mask, segment_ids  int32 [B, S]
      masked_lm_positions                 int32 [B, P]
      embedding_output   [B, S, H]  after the E->H projection (HF hidden_states[0])
      encoder_outputs    [L, B, S, H] output of each of the L layers (one
                         inner-group pass of inner_group_num AlbertLayers each)
      sequence_output    [B, S, H]  == encoder_outputs[-1]
      pooled_output      [B, H]     tanh(dense(sequence_output[:, 0]))
      mlm_logits         [B, P, V]  prediction logits at masked_lm_positions
      sop_logits         [B, 2]
    """
    import torch

    cfg = model.config
    ids = torch.from_numpy(inputs["input_ids"].astype(np.int64))
    mask = torch.from_numpy(inputs["input_mask"].astype(np.int64))
    seg = torch.from_numpy(inputs["segment_ids"].astype(np.int64))

    group_outputs = []
    hooks = [
        g.register_forward_hook(lambda _m, _a, out: group_outputs.append(out))
        for g in model.albert.encoder.albert_layer_groups
    ]
    try:
        with torch.no_grad():
            base = model.albert(
                input_ids=ids,
                attention_mask=mask,
                token_type_ids=seg,
                output_hidden_states=True,
                return_dict=True,
            )
    finally:
        for h in hooks:
            h.remove()
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=mask, token_type_ids=seg, return_dict=True)
        # The heads applied by hand must give exactly what the full model gives.
        mlm_all = model.predictions(base.last_hidden_state)
        sop = model.sop_classifier(base.pooler_output)
    assert torch.equal(mlm_all, full.prediction_logits)
    assert torch.equal(sop, full.sop_logits)

    n_layers, inner = cfg.num_hidden_layers, cfg.inner_group_num
    hidden_states = base.hidden_states
    # HF records one hidden state per AlbertLayer call (num_hidden_layers *
    # inner_group_num of them) plus the encoder input.
    assert len(hidden_states) == 1 + n_layers * inner, len(hidden_states)
    assert len(group_outputs) == n_layers, len(group_outputs)
    for layer in range(n_layers):
        assert torch.equal(group_outputs[layer], hidden_states[inner * (layer + 1)])
    assert torch.equal(group_outputs[-1], base.last_hidden_state)

    positions = torch.from_numpy(inputs["masked_lm_positions"].astype(np.int64))
    mlm = torch.gather(
        full.prediction_logits, 1, positions[:, :, None].expand(-1, -1, cfg.vocab_size)
    )

    def f32(t):
        return t.detach().cpu().numpy().astype(np.float32)

    out = {k: v.astype(np.int32) for k, v in inputs.items()}
    out.update(
        embedding_output=f32(hidden_states[0]),
        encoder_outputs=np.stack([f32(t) for t in group_outputs]),
        sequence_output=f32(base.last_hidden_state),
        pooled_output=f32(base.pooler_output),
        mlm_logits=f32(mlm),
        sop_logits=f32(full.sop_logits),
    )
    return out


# --------------------------------------------------------------------------
# Independent float64 numpy forward pass from albert_config.json + weights
# --------------------------------------------------------------------------


def _gelu(x: np.ndarray, act: str) -> np.ndarray:
    if act == "gelu":  # original ALBERT/BERT: tanh approximation
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    if act == "gelu_exact":
        from math import erf

        return 0.5 * x * (1.0 + np.vectorize(erf)(x / math.sqrt(2.0)))
    raise ValueError(act)


def _layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def numpy_forward(w: dict[str, np.ndarray], cfg: dict, inputs: dict, act=None) -> dict:
    """ALBERT forward pass written from the paper/original semantics.

    `w` uses HF names; HF Linear weights are [out, in], so y = x @ W.T + b.
    `cfg` is an original-format albert_config.json dict.
    """
    w = {k: v.astype(np.float64) for k, v in w.items()}
    act = act or cfg["hidden_act"]
    ids, mask, seg = inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"]
    b, s = ids.shape
    n_heads = cfg["num_attention_heads"]
    d_head = cfg["hidden_size"] // n_heads
    e = "albert.embeddings."

    def dense(x, prefix):
        return x @ w[prefix + ".weight"].T + w[prefix + ".bias"]

    def ln(x, prefix):
        return _layer_norm(x, w[prefix + ".weight"], w[prefix + ".bias"])

    x = w[e + "word_embeddings.weight"][ids]
    x = x + w[e + "token_type_embeddings.weight"][seg]
    x = x + w[e + "position_embeddings.weight"][np.arange(s)][None]
    x = ln(x, e + "LayerNorm")
    h = dense(x, "albert.encoder.embedding_hidden_mapping_in")
    embedding_output = h
    # Additive mask on the keys only; padded query rows are still computed.
    key_bias = (1.0 - mask[:, None, None, :].astype(np.float64)) * -10000.0

    def split(t):  # [B, S, H] -> [B, heads, S, d]
        return t.reshape(b, s, n_heads, d_head).transpose(0, 2, 1, 3)

    layer_outputs = []
    n_layers, n_groups = cfg["num_hidden_layers"], cfg["num_hidden_groups"]
    for layer in range(n_layers):
        group = int(layer / n_layers * n_groups)
        for inner in range(cfg["inner_group_num"]):
            p = f"albert.encoder.albert_layer_groups.{group}.albert_layers.{inner}."
            q = split(dense(h, p + "attention.query"))
            k = split(dense(h, p + "attention.key"))
            v = split(dense(h, p + "attention.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d_head) + key_bias
            scores = scores - scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs = probs / probs.sum(-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, -1)
            attn = ln(h + dense(ctx, p + "attention.dense"), p + "attention.LayerNorm")
            ffn = dense(_gelu(dense(attn, p + "ffn"), act), p + "ffn_output")
            h = ln(attn + ffn, p + "full_layer_layer_norm")
        layer_outputs.append(h)

    pooled = np.tanh(dense(h[:, 0], "albert.pooler"))
    positions = inputs["masked_lm_positions"]
    gathered = np.take_along_axis(h, positions[:, :, None].astype(np.int64), axis=1)
    t = ln(_gelu(dense(gathered, "predictions.dense"), act), "predictions.LayerNorm")
    mlm = t @ w[e + "word_embeddings.weight"].T + w["predictions.bias"]
    sop = dense(pooled, "sop_classifier.classifier")
    return dict(
        embedding_output=embedding_output,
        encoder_outputs=np.stack(layer_outputs),
        sequence_output=h,
        pooled_output=pooled,
        mlm_logits=mlm,
        sop_logits=sop,
    )


OUTPUT_KEYS = (
    "embedding_output",
    "encoder_outputs",
    "sequence_output",
    "pooled_output",
    "mlm_logits",
    "sop_logits",
)
INPUT_KEYS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")


def _max_diff(a: dict, b: dict) -> float:
    return max(float(np.max(np.abs(np.asarray(a[k], np.float64) - b[k]))) for k in OUTPUT_KEYS)


# --------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------


def _write_json(path: pathlib.Path, obj: dict) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def write_fixture(name: str, out_dir: pathlib.Path, stds: dict) -> None:
    model = build_model(name, stds)
    fdir = out_dir / name
    fdir.mkdir(parents=True, exist_ok=True)
    # transformers 5 always writes model.safetensors (the old safe_serialization
    # flag is gone; passing it is silently ignored).
    model.save_pretrained(fdir)
    _write_json(fdir / "albert_config.json", original_albert_config(model.config))
    arrays = _run_hf(model, make_inputs())
    np.savez(fdir / "reference.npz", **arrays)
    size = sum(p.stat().st_size for p in fdir.iterdir())
    print(f"[{name}] wrote {fdir} ({size / 1024:.1f} KiB)")


def tensor_table(fdir: pathlib.Path) -> list[tuple[str, str, tuple]]:
    from safetensors import safe_open

    rows = []
    with safe_open(str(fdir / "model.safetensors"), framework="np") as f:
        for key in f.keys():
            t = f.get_tensor(key)
            rows.append((key, str(t.dtype), tuple(t.shape)))
    return rows


def format_tensor_table(rows) -> str:
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{n:<{width}}  {d}  {list(s)}" for n, d, s in rows)


# --------------------------------------------------------------------------
# Verification
# --------------------------------------------------------------------------


def verify_fixture(name: str, out_dir: pathlib.Path, stds: dict) -> tuple[list[str], dict]:
    """Checks the files on disk; returns (failures, observed differences)."""
    import torch
    from safetensors.numpy import load_file
    from transformers import AlbertForPreTraining

    failures = []
    fdir = out_dir / name

    def check(ok, msg):
        if not ok:
            failures.append(f"[{name}] {msg}")

    with np.load(fdir / "reference.npz") as z:
        ref = {k: z[k] for k in z.files}
    expected_keys = set(INPUT_KEYS) | set(OUTPUT_KEYS)
    check(set(ref) == expected_keys, f"npz keys {sorted(ref)}")
    for k in INPUT_KEYS:
        check(ref[k].dtype == np.int32, f"{k} dtype {ref[k].dtype}")
    for k in OUTPUT_KEYS:
        check(ref[k].dtype == np.float32, f"{k} dtype {ref[k].dtype}")
    inputs = make_inputs()
    for k in INPUT_KEYS:
        check(np.array_equal(ref[k], inputs[k]), f"{k} differs from make_inputs()")

    # 1. Determinism: rebuild from scratch and re-run -> bit-identical numbers.
    model = build_model(name, stds)
    cfg = model.config
    h, l, v = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size
    shapes = dict(
        embedding_output=(BATCH, SEQ_LEN, h),
        encoder_outputs=(l, BATCH, SEQ_LEN, h),
        sequence_output=(BATCH, SEQ_LEN, h),
        pooled_output=(BATCH, h),
        mlm_logits=(BATCH, NUM_MASKED, v),
        sop_logits=(BATCH, 2),
    )
    for k, shape in shapes.items():
        check(ref[k].shape == shape, f"{k} shape {ref[k].shape} != {shape}")
    rerun = _run_hf(model, make_inputs())
    for k in ref:
        check(np.array_equal(rerun[k], ref[k]), f"re-run differs in {k}")
    check(np.array_equal(ref["sequence_output"], ref["encoder_outputs"][-1]),
          "sequence_output != encoder_outputs[-1]")

    # 2. Saved weights == rebuilt weights; reloading the saved dir reproduces the outputs.
    saved = load_file(str(fdir / "model.safetensors"))
    state = {k: t.numpy() for k, t in model.state_dict().items()}
    for k, arr in saved.items():
        check(k in state and np.array_equal(arr, state[k]), f"saved tensor {k} differs")
    missing = sorted(set(state) - set(saved))
    check(missing == ["predictions.decoder.bias", "predictions.decoder.weight"],
          f"unexpected tensors missing from safetensors: {missing}")
    reloaded = AlbertForPreTraining.from_pretrained(fdir, attn_implementation="eager").eval()
    check(reloaded.predictions.decoder.weight is reloaded.albert.embeddings.word_embeddings.weight,
          "reloaded decoder not tied")
    re_out = _run_hf(reloaded, make_inputs())
    for k in OUTPUT_KEYS:
        check(np.array_equal(re_out[k], ref[k]), f"from_pretrained output differs in {k}")
    with open(fdir / "config.json") as f:
        saved_cfg = json.load(f)
    for key, val in {**COMMON, **FIXTURES[name][0]}.items():
        check(saved_cfg.get(key) == val, f"config.json {key}={saved_cfg.get(key)} != {val}")
    with open(fdir / "albert_config.json") as f:
        orig_cfg = json.load(f)
    check(orig_cfg == original_albert_config(cfg), "albert_config.json differs")

    # 3. Independent numpy forward pass from albert_config.json + safetensors weights.
    weights = dict(saved)
    npy = numpy_forward(weights, orig_cfg, inputs)
    diff = _max_diff(npy, ref)
    check(diff < HF_VS_NUMPY_ATOL, f"numpy forward differs from HF by {diff:.3g}")
    other_act = "gelu_exact" if orig_cfg["hidden_act"] == "gelu" else "gelu"
    act_diff = _max_diff(numpy_forward(weights, orig_cfg, inputs, act=other_act), ref)
    check(act_diff > 10 * HF_VS_NUMPY_ATOL, f"GELU variant barely matters ({act_diff:.3g})")
    unmasked = dict(inputs, input_mask=np.ones_like(inputs["input_mask"]))
    mask_diff = _max_diff(numpy_forward(weights, orig_cfg, unmasked), ref)
    check(mask_diff > SENSITIVITY_MIN_DIFF, f"attention mask barely matters ({mask_diff:.3g})")

    # 4. Sensitivity: a missed (neutral) or transposed parameter must change outputs clearly.
    weakest = (math.inf, "")
    key_bias_diff = 0.0
    with torch.no_grad():
        for pname, param in model.named_parameters():
            kind = _param_kind(model, pname)
            original = param.detach().clone()
            trials = [("neutral", torch.ones_like(original) if kind == "ln_gamma"
                       else torch.zeros_like(original))]
            if original.ndim == 2 and original.shape[0] == original.shape[1]:
                trials.append(("transposed", original.T.contiguous()))
            for label, value in trials:
                param.copy_(value)
                d = _max_diff(_run_hf(model, inputs), ref)
                param.copy_(original)
                if pname.endswith("attention.key.bias"):
                    # softmax(q.(k + b)) == softmax(q.k + q.b): q.b is the same for
                    # every key, so the key bias cancels exactly. Only float
                    # rounding is left; a converter test must check it directly.
                    key_bias_diff = max(key_bias_diff, d)
                    check(d < HF_VS_NUMPY_ATOL, f"{pname} {label} unexpectedly matters ({d:.3g})")
                    continue
                weakest = min(weakest, (d, f"{pname} {label}"))
                check(d > SENSITIVITY_MIN_DIFF, f"{pname} {label} changes outputs by only {d:.3g}")

    print(f"[{name}] verify: rerun bit-identical; from_pretrained bit-identical; "
          f"numpy float64 max|diff|={diff:.2e}; other GELU changes outputs by {act_diff:.2e}; "
          f"ignoring the mask by {mask_diff:.2e}; weakest single-parameter change "
          f"{weakest[0]:.2e} ({weakest[1]}); zeroing attention.key.bias (a no-op in exact "
          f"arithmetic) changes them by {key_bias_diff:.1e} -> {'OK' if not failures else 'FAILED'}")
    stats = dict(numpy=diff, gelu=act_diff, mask=mask_diff, weakest=weakest[0],
                 key_bias=key_bias_diff)
    return failures, stats


# --------------------------------------------------------------------------
# README
# --------------------------------------------------------------------------


def write_readme(out_dir: pathlib.Path, stds: dict, table_fixture: str, stats: list[dict]) -> None:
    import safetensors
    import torch
    import transformers

    table = format_tensor_table(tensor_table(out_dir / table_fixture))
    fixture_lines = []
    for name, (fields, seed) in FIXTURES.items():
        fixture_lines.append(
            f"| `{name}` | {fields['num_hidden_layers']} | {fields['num_hidden_groups']} | "
            f"{fields['inner_group_num']} | `{fields['hidden_act']}` | "
            f"`{HF_TO_ORIGINAL_ACT[fields['hidden_act']]}` | {seed} |"
        )
    fixture_table = "\n".join(fixture_lines)
    numpy_diff = max(st["numpy"] for st in stats)
    weakest = min(st["weakest"] for st in stats)
    gelu_lo, gelu_hi = min(st["gelu"] for st in stats), max(st["gelu"] for st in stats)
    mask_diff = min(st["mask"] for st in stats)
    key_bias = max(st["key_bias"] for st in stats)
    text = f"""# Reference outputs for ALBERT (generated -- do not edit by hand)

These fixtures are the independent numerical reference that the albert_tf
tests compare our Keras ALBERT against. They were produced by the Hugging Face
PyTorch implementation of ALBERT (`AlbertForPreTraining`) with

    pip install -r tools/requirements.txt
    {COMMAND}

Versions: torch {torch.__version__}, transformers {transformers.__version__}, safetensors {safetensors.__version__}, numpy {np.__version__}, Python {sys.version.split()[0]}
(CPU, float32, `torch.set_num_threads(1)`). The files are byte-identical when
the command is run again; `{COMMAND} --verify` re-checks the files on disk
without writing.

**The tool is not run by CI**, and torch/transformers are not CI
dependencies: the tests only read the files in this folder. This README is
written by the tool, so edit the tool rather than this file.

## Models

All fixtures: vocab_size {COMMON['vocab_size']}, embedding_size {COMMON['embedding_size']}, hidden_size {COMMON['hidden_size']}, {COMMON['num_attention_heads']} heads,
intermediate_size {COMMON['intermediate_size']}, max_position_embeddings {COMMON['max_position_embeddings']}, type_vocab_size {COMMON['type_vocab_size']},
all dropout 0, layer_norm_eps 1e-12 (as in the original; note that Keras'
`LayerNormalization` defaults to 1e-3), eager attention, eval mode.

| fixture | layers | groups | inner | HF hidden_act | albert_config.json hidden_act | seed |
| --- | --- | --- | --- | --- | --- | --- |
{fixture_table}

Activation names: the original ALBERT/BERT `gelu` is the tanh approximation
`0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)))`, which HF calls `gelu_new`. HF's
`gelu` is the exact erf form `0.5x(1+erf(x/sqrt(2)))`, which our
albert_config.json calls `gelu_exact`. The activation is used both in the FFN
and in the MLM head's transform.

Every parameter is random (torch seed per fixture above):
embedding tables N(0, {stds['embedding']}^2), Linear kernels N(0, {stds['kernel']}^2),
every bias (including LayerNorm beta and the MLM output bias) N(0, {stds['bias']}^2),
LayerNorm gamma 1 + N(0, {stds['ln_gamma']}^2). The word-embedding row of the pad id 0
is random too (HF's `padding_idx` only matters for training).

## What the verify pass checks

- Rebuilding from the seed and re-running gives bit-identical numbers, and so
  does `AlbertForPreTraining.from_pretrained(<fixture dir>)`.
- A float64 numpy forward pass written in the tool, which reads only
  `albert_config.json` and `model.safetensors`, reproduces every output to
  < {HF_VS_NUMPY_ATOL:g} (observed at most {numpy_diff:.1e}).
- Setting any single parameter to a neutral value (gamma 1, anything else 0),
  or transposing any square kernel, changes the outputs by more than
  {SENSITIVITY_MIN_DIFF:g} (observed at least {weakest:.2g}).
  **Exception: `attention.key.bias`.** It cancels exactly:
  softmax(q.(k+b)) = softmax(q.k + q.b), and q.b is the same for every key. No
  output can detect a missing or wrong key bias (zeroing it changed the
  outputs by at most {key_bias:.1e}, float rounding), so test that part of the
  converter by comparing weights directly.
- Swapping the GELU variant changes the outputs by {gelu_lo:.1e} to {gelu_hi:.1e},
  and ignoring the attention mask by at least {mask_diff:.2g}. A test tolerance
  of about atol 1e-4 therefore covers float32 noise and still catches the
  wrong GELU.

## Files per fixture

- `config.json`, `model.safetensors`: written by HF `save_pretrained`
  (transformers 5 always writes safetensors). **The tied
  `predictions.decoder.weight` (= `albert.embeddings.word_embeddings.weight`)
  and `predictions.decoder.bias` (= `predictions.bias`) are NOT saved.** A
  converter must take the MLM output embedding from the word embeddings and the
  output bias from `predictions.bias`.
- `albert_config.json`: the same model in google-research/albert's format.
- `reference.npz` (inputs int32, outputs float32):
  - `input_ids`, `input_mask`, `segment_ids` [3, 16]: row lengths 16, 11, 6.
    Rows 1 and 2 are padded at the end (mask 0, id 0, segment 0). Each row is
    `[CLS] A [SEP] B [SEP]`, with segment 0 up to and including the first
    `[SEP]` and segment 1 after it. Some tokens are `[MASK]` (id 4).
  - `masked_lm_positions` [3, 5]: padded with position 0, as the original
    pretraining data is (the logits at position 0 are recorded anyway).
  - `embedding_output` [3, 16, H]: after the embedding LayerNorm and the
    E->H projection (`embedding_hidden_mapping_in`) = HF `hidden_states[0]`.
  - `encoder_outputs` [L, 3, 16, H]: the output of each of the
    `num_hidden_layers` layers, where one layer is a pass through its group's
    `inner_group_num` AlbertLayers. For inner_group_num 1 this is HF
    `hidden_states[1:]`. With inner_group_num > 1 it is not: HF's
    `hidden_states` has one entry per AlbertLayer call (1 + L*inner = 9 for
    `groups2_inner2`), and `encoder_outputs[l]` = `hidden_states[inner*(l+1)]`.
  - `sequence_output` [3, 16, H] (= `encoder_outputs[-1]`);
    `pooled_output` [3, H] = tanh(pooler(sequence_output[:, 0])).
  - `mlm_logits` [3, 5, V]: MLM logits gathered at `masked_lm_positions`
    (dense -> activation -> LayerNorm -> word_embeddings^T + predictions.bias).
  - `sop_logits` [3, 2].

Outputs at padded positions are recorded too. The mask only hides padded
*keys*: HF adds the float32 minimum (about -3.4e38) to their attention
scores before the softmax, and the original adds -10000; in float32 both give
exactly 0 probability. Padded query rows are computed like any other row.
Layer l uses group `int(l / num_hidden_layers * num_hidden_groups)`.

## HF tensor names (`{table_fixture}/model.safetensors`)

```
{table}
```

`single_group` and `exact_gelu` have only `albert_layer_groups.0.albert_layers.0.*`.
With num_hidden_groups G and inner_group_num I the names run over
`albert_layer_groups.{{0..G-1}}.albert_layers.{{0..I-1}}`. HF Linear weights are
stored [out, in]; a Keras Dense kernel is the transpose.
"""
    (out_dir / "README.md").write_text(text)
    print(f"wrote {out_dir / 'README.md'}")


# --------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", default=str(DEFAULT_OUTPUT_DIR))
    parser.add_argument("--fixtures", default=",".join(FIXTURES),
                        help="comma-separated subset of: " + ", ".join(FIXTURES))
    parser.add_argument("--verify", action="store_true",
                        help="do not write; only verify the files on disk")
    parser.add_argument("--print_tensors", default="groups2_inner2",
                        help="fixture whose safetensors names/shapes to print ('' for none)")
    parser.add_argument("--kernel_std", type=float, default=0.15)
    parser.add_argument("--embedding_std", type=float, default=0.5)
    parser.add_argument("--bias_std", type=float, default=0.1)
    parser.add_argument("--ln_gamma_std", type=float, default=0.2)
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(1)  # identical numbers regardless of the machine's cores
    torch.use_deterministic_algorithms(True)

    out_dir = pathlib.Path(args.output_dir)
    names = [n for n in args.fixtures.split(",") if n]
    unknown = set(names) - set(FIXTURES)
    if unknown:
        parser.error(f"unknown fixtures {sorted(unknown)}")
    stds = dict(kernel=args.kernel_std, embedding=args.embedding_std,
                bias=args.bias_std, ln_gamma=args.ln_gamma_std)

    if not args.verify:
        for name in names:
            write_fixture(name, out_dir, stds)

    failures, stats = [], []
    for name in names:
        fixture_failures, fixture_stats = verify_fixture(name, out_dir, stds)
        failures += fixture_failures
        stats.append(fixture_stats)

    if not args.verify and not failures and set(names) == set(FIXTURES):
        write_readme(out_dir, stds, "groups2_inner2", stats)

    if args.print_tensors:
        rows = tensor_table(out_dir / args.print_tensors)
        print(f"\nsafetensors tensors of {args.print_tensors} ({len(rows)}):")
        print(format_tensor_table(rows))

    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures))
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
