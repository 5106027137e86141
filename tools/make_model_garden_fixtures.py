#!/usr/bin/env python3
"""Make test fixtures in the formats of TF Model Garden and of the original
ALBERT release, written by those projects' own code.

What
----
Users hold ALBERT weights that were written by TensorFlow Model Garden
(tensorflow/models, `official/nlp`, pip package `tf-models-official`) and by
the original google-research/albert release. albert_tf must read them. This
tool makes a tiny ALBERT in each of those formats, using the other projects'
own code wherever such code still runs, and records what their code computes
on fixed inputs, so that albert_tf's tests can check a loader against it:

  tf1/                   a TF1 name-based checkpoint with the original
                         release's variable names (`bert/...`, `cls/...`,
                         `global_step`), plus `albert_config.json`;
  tf2_encoder/           Model Garden's converter
                         (`official/nlp/tools/tf2_albert_encoder_checkpoint_converter.py`,
                         run as a program), `--converted_model=encoder`:
                         a TF2 object checkpoint with root key `encoder`;
  tf2_encoder_legacy/    the same with `--checkpoint_model_name=model` (the
                         legacy root key `model`, which the exporter still
                         accepts);
  tf2_pretrainer/        the converter with `--converted_model=pretrainer
                         --checkpoint_model_name=pretrainer`: a
                         `BertPretrainerV2` checkpoint (encoder + masked-LM
                         head);
  hub_encoder.tar.xz     Model Garden's exporter
                         (`official/nlp/tools/export_tfhub.py`, run as a
                         program), `--export_type=model_with_mlm`: a TF-Hub
                         style TF2 SavedModel with an `mlm` sub-object;
  hub_preprocess.tar.xz  the exporter, `--export_type=preprocessing` with
                         `data/30k-clean.model` (as `albert_en_preprocess`);
  tf1_hub_module.tar.xz  a TF1 TF-Hub module (`tfhub_module.pb`,
                         `saved_model.pb`, `variables/`, `assets/`) laid out
                         and signed as the original's `export_to_tfhub.py`
                         does, written by tensorflow_hub 0.15.0's own TF1
                         module exporter (`create_module_spec` /
                         `ModuleSpec.export`);
                         (the three SavedModel folders are shipped as
                         deterministic .tar.xz archives, 0.6 MB instead of
                         4.5 MB: extract them before loading)
  spm-1k.model           the weight fixtures' SentencePiece model;
  model_garden_outputs.npz, tf1_hub_outputs.npz, preprocess_outputs.npz
                         the fixed inputs and what Model Garden's Python
                         objects, the loaded SavedModels and the loaded TF1
                         module compute on them;
  README.md              written by this tool (from
                         tools/make_model_garden_fixtures_readme.md): files,
                         command, versions and the exact variable names,
                         object paths and shapes.

How (and what is not Model Garden's code)
----------------------------------------
* The TF1 checkpoint and the TF1 module's graph come from a small TF1-graph
  ALBERT written here (`_tf1_albert_graph`): the original release's code
  (`albert/modeling.py`) imports `tensorflow.contrib`, which no TF 2.x has, so
  it cannot run. The graph uses the original's variable scopes, shapes and
  math (einsum Q/K/V with 2-D kernels [H, H], additive mask -10000 on keys,
  tanh GELU, LayerNorm epsilon 1e-12, MLM head with tied decoder, SOP head).
  Its outputs are compared with Model Garden's: they agree to float32
  rounding, which checks the names and the math against Model Garden's
  independent implementation.
* Everything else is written by Model Garden's programs (converter,
  exporter) and Python classes (`AlbertEncoder`, `BertPretrainerV2`), or by
  tensorflow_hub's TF1 module exporter.
* tensorflow_hub 0.16 dropped TF1 modules, so the TF1 module is written by
  tensorflow_hub 0.15.0, installed (without dependencies) into its own
  folder and imported without its package `__init__` (which imports
  `tf.compat.v1.estimator`, gone from TF >= 2.16); see `_import_hub015`.

Weights: the weight fixtures use vocab_size 1000 (not 30000) to keep the
folder small (a 30000 x 16 float32 table is 1.9 MB per copy, and there are
six copies). Their SentencePiece model (`spm-1k.model`, an asset of the
SavedModel and of the TF1 module) is `data/30k-clean.model` cut to its first
1000 pieces, with the normalizer rule set to identity (the nmt_nfkc
charsmap alone is 237 kB). The preprocessing fixture uses the real
`data/30k-clean.model` (30000 pieces), as `albert_en_preprocess` does.

All random values come from fixed numpy seeds; float outputs are produced on
CPU with one thread and oneDNN off.

This tool is NOT run by CI, and its dependencies
(tools/requirements-model-garden.txt) are not installed by CI. It needs its
own virtual environment, OUTSIDE the repository (tf-models-official pins its
own TensorFlow 2.20):

  python3 -m venv /tmp/mg_venv
  /tmp/mg_venv/bin/pip install -r tools/requirements-model-garden.txt
  /tmp/mg_venv/bin/pip install --no-deps --target /tmp/hub015 tensorflow-hub==0.15.0

Usage (from the repository root)
-----
  /tmp/mg_venv/bin/python tools/make_model_garden_fixtures.py --hub015=/tmp/hub015
        write everything into tests/fixtures/model_garden/, then verify
  /tmp/mg_venv/bin/python tools/make_model_garden_fixtures.py --verify --hub015=/tmp/hub015
        only verify the files on disk with Model Garden's / tensorflow_hub's code
  python3 tools/make_model_garden_fixtures.py --inspect
        any TensorFlow, no Model Garden: list every checkpoint's and
        SavedModel's variables with plain tf.train / tf.saved_model, and
        check that the listing equals the one in README.md
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO, "tests", "fixtures", "model_garden")
SPM_30K = os.path.join(REPO, "data", "30k-clean.model")

# --------------------------------------------------------------------------
# The model and the inputs
# --------------------------------------------------------------------------

# The original release's albert_config.json format (keys as in the released
# albert_base v2 config).
ALBERT_CONFIG = {
    "attention_probs_dropout_prob": 0.0,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.0,
    "embedding_size": 16,
    "hidden_size": 32,
    "initializer_range": 0.02,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "num_hidden_groups": 1,
    "net_structure_type": 0,
    "gap_size": 0,
    "num_memory_blocks": 0,
    "inner_group_num": 1,
    "down_scale_factor": 1,
    "type_vocab_size": 2,
    "vocab_size": 1000,
}

# The same model as a Model Garden `encoders.EncoderConfig` (the exporter
# needs one: its --bert_config_file builds a BertEncoder, not an ALBERT).
ENCODER_YAML = """\
type: albert
albert:
  vocab_size: {vocab_size}
  embedding_width: {embedding_size}
  hidden_size: {hidden_size}
  num_layers: {num_hidden_layers}
  num_attention_heads: {num_attention_heads}
  hidden_activation: {hidden_act}
  intermediate_size: {intermediate_size}
  dropout_rate: {hidden_dropout_prob}
  attention_dropout_rate: {attention_probs_dropout_prob}
  max_position_embeddings: {max_position_embeddings}
  type_vocab_size: {type_vocab_size}
  initializer_range: {initializer_range}
""".format(**ALBERT_CONFIG)

WEIGHT_SEED = 2024
INPUT_SEED = 7
GLOBAL_STEP = 12345
BATCH, SEQ_LEN, NUM_MASKED = 3, 16, 4
CLS_ID, SEP_ID, MASK_ID = 2, 3, 4
SPM_1K_PIECES = 1000

# Fixed sentences for the preprocessing fixture (lower-casing, diacritics,
# punctuation, numbers, an empty string, a long one for truncation).
SENTENCES = [
    "Hello world!",
    "The quick brown fox jumps over the lazy dog.",
    "ALBERT: A Lite BERT for Self-supervised Learning of Language "
    "Representations.",
    "Na\u00efve caf\u00e9 cr\u00e8me br\u00fbl\u00e9e, \u00dcber-Stra\u00dfe "
    "\u2013 3.14159 and 12,345 \u20ac.",
    "",
    "  Multiple   spaces\tand a tab  ",
]
SENTENCES_B = [
    "How are you?",
    "It was not amused.",
    "Parameter sharing across layers reduces the number of parameters "
    "considerably.",
    "Deja vu.",
    "Empty first segment.",
    "x",
]
PACK_SEQ_LEN = 16
PREPROCESS_DEFAULT_SEQ_LEN = 128  # as in albert_en_preprocess


def make_inputs() -> dict:
    """batch 3, seq 16; row lengths 16, 11, 6 (rows 1, 2 padded at the end);
    [CLS] A [SEP] B [SEP] with segment 0 up to and including the first [SEP];
    4 masked positions per row, padded with 0 as original pretraining data."""
    rng = np.random.default_rng(INPUT_SEED)
    segment_lengths = [(6, 7), (4, 4), (2, 1)]
    masked_positions = [[1, 4, 9, 12], [2, 7, 9, 0], [1, 4, 0, 0]]
    ids = np.zeros((BATCH, SEQ_LEN), np.int32)
    mask = np.zeros((BATCH, SEQ_LEN), np.int32)
    types = np.zeros((BATCH, SEQ_LEN), np.int32)
    for row, (len_a, len_b) in enumerate(segment_lengths):
        a = rng.integers(5, ALBERT_CONFIG["vocab_size"], size=len_a)
        b = rng.integers(5, ALBERT_CONFIG["vocab_size"], size=len_b)
        row_ids = [CLS_ID, *a, SEP_ID, *b, SEP_ID]
        n = len(row_ids)
        ids[row, :n] = row_ids
        mask[row, :n] = 1
        types[row, len_a + 2 : n] = 1
    positions = np.asarray(masked_positions, np.int32)
    for row in range(BATCH):
        for pos in positions[row, :2]:
            ids[row, pos] = MASK_ID
    return dict(
        input_word_ids=ids,
        input_mask=mask,
        input_type_ids=types,
        masked_lm_positions=positions,
    )


def tf1_variable_shapes() -> list:
    """(name, shape) of every variable of the original release's checkpoint,
    in the order the values are drawn."""
    c = ALBERT_CONFIG
    V, E, H = c["vocab_size"], c["embedding_size"], c["hidden_size"]
    I, P, T = c["intermediate_size"], c["max_position_embeddings"], c["type_vocab_size"]
    blk = "bert/encoder/transformer/group_0/inner_group_0/"
    out = [
        ("bert/embeddings/word_embeddings", [V, E]),
        ("bert/embeddings/token_type_embeddings", [T, E]),
        ("bert/embeddings/position_embeddings", [P, E]),
        ("bert/embeddings/LayerNorm/gamma", [E]),
        ("bert/embeddings/LayerNorm/beta", [E]),
        ("bert/encoder/embedding_hidden_mapping_in/kernel", [E, H]),
        ("bert/encoder/embedding_hidden_mapping_in/bias", [H]),
    ]
    for part in ("query", "key", "value"):
        out += [(blk + f"attention_1/self/{part}/kernel", [H, H]),
                (blk + f"attention_1/self/{part}/bias", [H])]
    out += [
        (blk + "attention_1/output/dense/kernel", [H, H]),
        (blk + "attention_1/output/dense/bias", [H]),
        (blk + "LayerNorm/gamma", [H]),
        (blk + "LayerNorm/beta", [H]),
        (blk + "ffn_1/intermediate/dense/kernel", [H, I]),
        (blk + "ffn_1/intermediate/dense/bias", [I]),
        (blk + "ffn_1/intermediate/output/dense/kernel", [I, H]),
        (blk + "ffn_1/intermediate/output/dense/bias", [H]),
        (blk + "LayerNorm_1/gamma", [H]),
        (blk + "LayerNorm_1/beta", [H]),
        ("bert/pooler/dense/kernel", [H, H]),
        ("bert/pooler/dense/bias", [H]),
        ("cls/predictions/transform/dense/kernel", [H, E]),
        ("cls/predictions/transform/dense/bias", [E]),
        ("cls/predictions/transform/LayerNorm/gamma", [E]),
        ("cls/predictions/transform/LayerNorm/beta", [E]),
        ("cls/predictions/output_bias", [V]),
        ("cls/seq_relationship/output_weights", [2, H]),
        ("cls/seq_relationship/output_bias", [2]),
    ]
    return out


def make_tf1_weights() -> dict:
    """Random values far from any default: embedding tables N(0, 0.5^2),
    kernels and the SOP output weights N(0, 0.15^2), every bias / beta /
    output_bias N(0, 0.1^2), every gamma 1 + N(0, 0.2^2)."""
    rng = np.random.default_rng(WEIGHT_SEED)
    values = {}
    for name, shape in tf1_variable_shapes():
        leaf = name.rsplit("/", 1)[-1]
        if leaf == "gamma":
            v = 1.0 + 0.2 * rng.standard_normal(shape)
        elif leaf in ("beta", "bias", "output_bias"):
            v = 0.1 * rng.standard_normal(shape)
        elif "embeddings" in leaf:
            v = 0.5 * rng.standard_normal(shape)
        else:  # kernel, output_weights
            v = 0.15 * rng.standard_normal(shape)
        values[name] = v.astype(np.float32)
    return values


# --------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------


def _quiet_tf_env():
    env = dict(os.environ)
    env.update(
        TF_CPP_MIN_LOG_LEVEL="2",
        TF_ENABLE_ONEDNN_OPTS="0",
        CUDA_VISIBLE_DEVICES="",
        OMP_NUM_THREADS="1",
        TF_NUM_INTRAOP_THREADS="1",
        TF_NUM_INTEROP_THREADS="1",
        PYTHONHASHSEED="0",
    )
    return env


def _run(cmd, **kw):
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=_quiet_tf_env(), **kw)


def _stage(stage, work, extra=()):
    _run([sys.executable, os.path.abspath(__file__), "--_stage=" + stage,
          "--_work=" + work, *extra])


def save_npz(path, arrays):
    """np.savez, but byte-deterministic: sorted keys, fixed zip timestamps,
    no pickles (np.load reads it as any .npz)."""
    import zipfile
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for key in sorted(arrays):
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            with zf.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(arrays[key]), allow_pickle=False)


def _single_thread_tf():
    import tensorflow as tf
    try:
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:
        pass
    return tf


def make_spm_1k(path):
    """data/30k-clean.model cut to its first SPM_1K_PIECES pieces, identity
    normalizer (no charsmap); deterministic bytes."""
    from sentencepiece import sentencepiece_model_pb2 as spm_pb2
    proto = spm_pb2.ModelProto()
    with open(SPM_30K, "rb") as f:
        proto.ParseFromString(f.read())
    del proto.pieces[SPM_1K_PIECES:]
    proto.trainer_spec.vocab_size = SPM_1K_PIECES
    proto.normalizer_spec.name = "identity"
    proto.normalizer_spec.precompiled_charsmap = b""
    with open(path, "wb") as f:
        f.write(proto.SerializeToString(deterministic=True))
    # The original release ships a .vocab next to the .model: piece<TAB>score.
    with open(os.path.splitext(path)[0] + ".vocab", "w", encoding="utf-8") as f:
        for p in proto.pieces:
            f.write(f"{p.piece}\t{p.score:g}\n")


# --------------------------------------------------------------------------
# Stage tf1: the TF1 checkpoint (graph mode, own TF1 ALBERT graph)
# --------------------------------------------------------------------------


def _tf1_albert_graph(v1, cfg, input_ids, input_mask, segment_ids, mlm_positions):
    """The original release's ALBERT in TF1 graph code: same variable scopes
    and shapes as `albert/modeling.py` + `run_pretraining.py` (written here,
    not copied). Returns a dict of output tensors."""
    tf = v1
    V, E, H = cfg["vocab_size"], cfg["embedding_size"], cfg["hidden_size"]
    I, N = cfg["intermediate_size"], cfg["num_attention_heads"]
    D = H // N
    init = tf.truncated_normal_initializer(stddev=cfg["initializer_range"])
    zeros = tf.zeros_initializer()

    def gelu(x):  # the original's tanh approximation
        return 0.5 * x * (1.0 + tf.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * tf.pow(x, 3))))

    def layer_norm(x, scope):
        with tf.variable_scope(scope):
            width = x.shape[-1]
            beta = tf.get_variable("beta", [width], initializer=zeros)
            gamma = tf.get_variable("gamma", [width], initializer=tf.ones_initializer())
            mean, var = tf.nn.moments(x, [-1], keepdims=True)
            return tf.nn.batch_normalization(x, mean, var, beta, gamma, 1e-12)

    def dense(x, width, scope, act=None):
        with tf.variable_scope(scope):
            w = tf.get_variable("kernel", [x.shape[-1], width], initializer=init)
            b = tf.get_variable("bias", [width], initializer=zeros)
            y = tf.einsum("...h,ho->...o", x, w) + b
            return act(y) if act else y

    batch = tf.shape(input_ids)[0]
    seq = tf.shape(input_ids)[1]
    with tf.variable_scope("bert"):
        with tf.variable_scope("embeddings"):
            table = tf.get_variable("word_embeddings", [V, E], initializer=init)
            x = tf.gather(table, input_ids)
            types = tf.get_variable("token_type_embeddings",
                                    [cfg["type_vocab_size"], E], initializer=init)
            x += tf.einsum("bst,te->bse", tf.one_hot(segment_ids, cfg["type_vocab_size"]), types)
            pos = tf.get_variable("position_embeddings",
                                  [cfg["max_position_embeddings"], E], initializer=init)
            x += tf.slice(pos, [0, 0], [seq, -1])[tf.newaxis]
            x = layer_norm(x, "LayerNorm")
        with tf.variable_scope("encoder"):
            x = dense(x, H, "embedding_hidden_mapping_in")
            # additive key mask, as the original: (1 - mask) * -10000
            adder = (1.0 - tf.cast(input_mask, tf.float32))[:, tf.newaxis, tf.newaxis, :] * -10000.0
            layers = []
            with tf.variable_scope("transformer", reuse=tf.AUTO_REUSE):
                for layer_idx in range(cfg["num_hidden_layers"]):
                    group = int(layer_idx / cfg["num_hidden_layers"] * cfg["num_hidden_groups"])
                    with tf.variable_scope("group_%d" % group), tf.variable_scope("inner_group_0"):
                        with tf.variable_scope("attention_1"):
                            with tf.variable_scope("self"):
                                heads = {}
                                for part in ("query", "key", "value"):
                                    with tf.variable_scope(part):
                                        w = tf.get_variable("kernel", [H, N * D], initializer=init)
                                        b = tf.get_variable("bias", [N * D], initializer=zeros)
                                        heads[part] = (tf.einsum("bsh,hnd->bsnd", x, tf.reshape(w, [H, N, D]))
                                                       + tf.reshape(b, [N, D]))
                                scores = tf.einsum("bqnd,bknd->bnqk", heads["query"], heads["key"])
                                scores = scores / np.sqrt(float(D)) + adder
                                probs = tf.nn.softmax(scores)
                                ctx = tf.einsum("bnqk,bknd->bqnd", probs, heads["value"])
                            with tf.variable_scope("output"), tf.variable_scope("dense"):
                                w = tf.get_variable("kernel", [N * D, H], initializer=init)
                                b = tf.get_variable("bias", [H], initializer=zeros)
                                attn = tf.einsum("bqnd,ndh->bqh", ctx, tf.reshape(w, [N, D, H])) + b
                        attn = layer_norm(attn + x, "LayerNorm")
                        with tf.variable_scope("ffn_1"), tf.variable_scope("intermediate"):
                            inner = dense(attn, I, "dense", gelu)
                            with tf.variable_scope("output"):
                                ffn = dense(inner, H, "dense")
                        x = layer_norm(ffn + attn, "LayerNorm_1")
                        layers.append(x)
        with tf.variable_scope("pooler"):
            pooled = dense(x[:, 0], H, "dense", tf.tanh)
    with tf.variable_scope("cls/predictions"):
        flat = tf.reshape(x, [-1, H])
        offsets = (tf.range(batch) * seq)[:, tf.newaxis]
        picked = tf.gather(flat, tf.reshape(mlm_positions + offsets, [-1]))
        with tf.variable_scope("transform"):
            t = dense(picked, E, "dense", gelu)
            t = layer_norm(t, "LayerNorm")
        out_bias = tf.get_variable("output_bias", [V], initializer=zeros)
        mlm_logits = tf.matmul(t, table, transpose_b=True) + out_bias  # [B*P, V]
    with tf.variable_scope("cls/seq_relationship"):
        sw = tf.get_variable("output_weights", [2, H], initializer=init)
        sb = tf.get_variable("output_bias", [2], initializer=zeros)
        sop_logits = tf.matmul(pooled, sw, transpose_b=True) + sb
    return dict(
        sequence_output=x,
        pooled_output=pooled,
        encoder_outputs=layers,
        mlm_logits=mlm_logits,
        sop_log_probs=tf.nn.log_softmax(sop_logits, axis=-1),
        embedding_table=table,
    )


def stage_tf1(work):
    tf = _single_thread_tf()
    v1 = tf.compat.v1
    v1.disable_v2_behavior()
    d = os.path.join(work, "tf1")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "albert_config.json"), "w") as f:
        json.dump(ALBERT_CONFIG, f, indent=2)
        f.write("\n")
    make_spm_1k(os.path.join(work, "spm-1k.model"))
    values = make_tf1_weights()
    inputs = make_inputs()
    with tf.Graph().as_default():
        ph = {k: v1.placeholder(tf.int32, [None, None], k) for k in inputs}
        outs = _tf1_albert_graph(v1, ALBERT_CONFIG, ph["input_word_ids"], ph["input_mask"],
                                 ph["input_type_ids"], ph["masked_lm_positions"])
        step = v1.train.get_or_create_global_step()
        variables = {v.op.name: v for v in v1.global_variables()}
        expected = {n for n, _ in tf1_variable_shapes()} | {"global_step"}
        assert set(variables) == expected, sorted(set(variables) ^ expected)
        config = v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
        with v1.Session(config=config) as sess:
            for name, var in variables.items():
                if name != "global_step":
                    var.load(values[name], sess)
            step.load(GLOBAL_STEP, sess)
            saver = v1.train.Saver(var_list=variables)
            saver.save(sess, os.path.join(d, "model.ckpt-best"),
                       write_meta_graph=False, write_state=False)
            feed = {ph[k]: inputs[k] for k in inputs}
            got = sess.run({k: outs[k] for k in outs if k != "embedding_table"}, feed)
    rec = {"tf1_graph." + k: np.asarray(v) for k, v in got.items() if k != "encoder_outputs"}
    for i, layer in enumerate(got["encoder_outputs"]):
        rec[f"tf1_graph.encoder_outputs_{i}"] = layer
    rec["tf1_graph.mlm_logits"] = rec["tf1_graph.mlm_logits"].reshape(BATCH, NUM_MASKED, -1)
    save_npz(os.path.join(work, "tf1_graph_outputs.npz"), rec)


# --------------------------------------------------------------------------
# Stages convert / export: Model Garden's own programs
# --------------------------------------------------------------------------

CONVERSIONS = [
    # (folder, --converted_model, --checkpoint_model_name)
    ("tf2_encoder", "encoder", "encoder"),
    ("tf2_encoder_legacy", "encoder", "model"),
    ("tf2_pretrainer", "pretrainer", "pretrainer"),
]


def run_convert(work):
    for folder, model, key in CONVERSIONS:
        out = os.path.join(work, folder)
        os.makedirs(out, exist_ok=True)
        _run([sys.executable, "-m", "official.nlp.tools.tf2_albert_encoder_checkpoint_converter",
              "--albert_config_file=" + os.path.join(work, "tf1", "albert_config.json"),
              "--checkpoint_to_convert=" + os.path.join(work, "tf1", "model.ckpt-best"),
              "--converted_checkpoint_path=" + os.path.join(out, "ckpt"),
              "--converted_model=" + model,
              "--checkpoint_model_name=" + key], cwd=out)


def run_export(work):
    yaml_path = os.path.join(work, "albert_encoder.yaml")
    with open(yaml_path, "w") as f:
        f.write(ENCODER_YAML)
    ckpt = os.path.join(work, "tf2_pretrainer", "ckpt-1")
    _run([sys.executable, "-m", "official.nlp.tools.export_tfhub",
          "--export_type=model_with_mlm",
          "--encoder_config_file=" + yaml_path,
          "--model_checkpoint_path=" + ckpt,
          "--sp_model_file=" + os.path.join(work, "spm-1k.model"),
          "--export_path=" + os.path.join(work, "hub_encoder")], cwd=work)
    _run([sys.executable, "-m", "official.nlp.tools.export_tfhub",
          "--export_type=preprocessing",
          "--sp_model_file=" + SPM_30K,
          "--default_seq_length=%d" % PREPROCESS_DEFAULT_SEQ_LEN,
          "--export_path=" + os.path.join(work, "hub_preprocess")], cwd=work)


# --------------------------------------------------------------------------
# Stage tf1hub: the TF1 TF-Hub module (tensorflow_hub 0.15.0's exporter)
# --------------------------------------------------------------------------


def _import_hub015(hub015):
    """Import tensorflow_hub 0.15.0's TF1 module code from `hub015` (a
    `pip install --no-deps --target` folder) without running its package
    __init__, which imports tf.compat.v1.estimator (removed in TF 2.16)."""
    import types
    pkg_dir = os.path.join(hub015, "tensorflow_hub")
    if not os.path.isdir(pkg_dir):
        raise SystemExit(f"--hub015={hub015}: no tensorflow_hub folder there "
                         "(pip install --no-deps --target DIR tensorflow-hub==0.15.0)")
    for name in [m for m in sys.modules if m == "tensorflow_hub" or m.startswith("tensorflow_hub.")]:
        del sys.modules[name]
    pkg = types.ModuleType("tensorflow_hub")
    pkg.__path__ = [pkg_dir]
    sys.modules["tensorflow_hub"] = pkg
    from tensorflow_hub import config, module, native_module, version
    assert version.__version__ == "0.15.0", version.__version__
    config._run()  # registers the path resolvers and the module loaders
    return module, native_module


def stage_tf1hub(work, hub015):
    tf = _single_thread_tf()
    v1 = tf.compat.v1
    v1.disable_v2_behavior()
    module, native_module = _import_hub015(hub015)

    # The original's export_to_tfhub.py reads albert_directory/albert_config.json,
    # 30k-clean.model and 30k-clean.vocab, and adds them as assets.
    albert_dir = os.path.join(work, "albert_directory")
    os.makedirs(albert_dir, exist_ok=True)
    shutil.copy(os.path.join(work, "tf1", "albert_config.json"), albert_dir)
    shutil.copy(os.path.join(work, "spm-1k.model"), os.path.join(albert_dir, "30k-clean.model"))
    shutil.copy(os.path.join(work, "spm-1k.vocab"), os.path.join(albert_dir, "30k-clean.vocab"))
    cfg_path = os.path.join(albert_dir, "albert_config.json")

    def module_fn(is_training):
        del is_training  # dropout is 0 in this config: both graphs are the same
        with open(cfg_path) as f:
            cfg = json.load(f)
        input_ids = v1.placeholder(tf.int32, [None, None], "input_ids")
        input_mask = v1.placeholder(tf.int32, [None, None], "input_mask")
        segment_ids = v1.placeholder(tf.int32, [None, None], "segment_ids")
        mlm_positions = v1.placeholder(tf.int32, [None, None], "mlm_positions")
        o = _tf1_albert_graph(v1, cfg, input_ids, input_mask, segment_ids, mlm_positions)
        config_file = tf.constant(cfg_path, tf.string, name="config_file")
        vocab_model = tf.constant(os.path.join(albert_dir, "30k-clean.model"), tf.string,
                                  name="vocab_model")
        vocab_file = tf.constant(os.path.join(albert_dir, "30k-clean.vocab"), tf.string,
                                 name="vocab_file")
        for t in (config_file, vocab_model, vocab_file):
            v1.add_to_collection(v1.GraphKeys.ASSET_FILEPATHS, t)
        tok = dict(input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids)
        seq_pool = dict(sequence_output=o["sequence_output"], pooled_output=o["pooled_output"])
        native_module.add_signature("tokens", tok, seq_pool)
        native_module.add_signature("sop", tok, dict(seq_pool, sop_log_probs=o["sop_log_probs"]))
        native_module.add_signature("mlm", dict(tok, mlm_positions=mlm_positions),
                                    dict(seq_pool, mlm_logits=o["mlm_logits"]))
        native_module.add_signature("tokenization_info", {},
                                    dict(vocab_file=vocab_model,
                                         do_lower_case=tf.constant(True)))

    spec = native_module.create_module_spec(
        module_fn, tags_and_args=[({"train"}, dict(is_training=True)),
                                  (set(), dict(is_training=False))])
    export = os.path.join(work, "tf1_hub_module")
    spec.export(export, checkpoint_path=os.path.join(work, "tf1", "model.ckpt-best"))
    full = run_tf1_module(export, v1, module)
    save_npz(os.path.join(work, "tf1_hub_outputs.npz"), {k: full[k] for k in TF1_HUB_KEEP})


# What tf1_hub_outputs.npz keeps (the other signatures' sequence/pooled
# outputs and the {train} graph are checked to equal these, not stored).
TF1_HUB_KEEP = (
    "tf1_hub.tokens.sequence_output",
    "tf1_hub.tokens.pooled_output",
    "tf1_hub.mlm.mlm_logits",
    "tf1_hub.sop.sop_log_probs",
    "tf1_hub.tokenization_info.do_lower_case",
    "tf1_hub.tokenization_info.vocab_file_basename",
)


def run_tf1_module(path, v1, module):
    """Load the TF1 module with tensorflow_hub's hub.Module and run its
    signatures on the fixed inputs (both tag sets)."""
    import tensorflow as tf
    inp = make_inputs()
    feed_names = dict(input_ids="input_word_ids", input_mask="input_mask",
                      segment_ids="input_type_ids")
    rec = {}
    for tags, prefix in ((set(), "tf1_hub"), ({"train"}, "tf1_hub_train")):
        with tf.Graph().as_default():
            m = module.Module(path, tags=tags)
            tok = {k: tf.constant(inp[v]) for k, v in feed_names.items()}
            outs = {
                "tokens": m(tok, signature="tokens", as_dict=True),
                "sop": m(tok, signature="sop", as_dict=True),
                "mlm": m(dict(tok, mlm_positions=tf.constant(inp["masked_lm_positions"])),
                         signature="mlm", as_dict=True),
            }
            info = m(signature="tokenization_info", as_dict=True)
            config = v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
            with v1.Session(config=config) as sess:
                sess.run(v1.global_variables_initializer())
                got = sess.run(outs)
                got_info = sess.run(info)
        for sig, d in got.items():
            for k, v in d.items():
                if k == "mlm_logits":
                    v = v.reshape(BATCH, NUM_MASKED, -1)
                rec[f"{prefix}.{sig}.{k}"] = v
        if prefix == "tf1_hub":
            rec["tf1_hub.tokenization_info.do_lower_case"] = np.asarray(got_info["do_lower_case"])
            rec["tf1_hub.tokenization_info.vocab_file_basename"] = np.asarray(
                os.path.basename(got_info["vocab_file"].decode()))
    return rec


# --------------------------------------------------------------------------
# Stage record: Model Garden's Python objects and the loaded SavedModels
# --------------------------------------------------------------------------


def _mg_encoder():
    from official.modeling import tf_utils
    from official.nlp.modeling import networks
    c = ALBERT_CONFIG
    return networks.AlbertEncoder(
        vocab_size=c["vocab_size"], embedding_width=c["embedding_size"],
        hidden_size=c["hidden_size"], num_layers=c["num_hidden_layers"],
        num_attention_heads=c["num_attention_heads"],
        max_sequence_length=c["max_position_embeddings"],
        type_vocab_size=c["type_vocab_size"], intermediate_size=c["intermediate_size"],
        activation=tf_utils.get_activation(c["hidden_act"]),
        dropout_rate=c["hidden_dropout_prob"],
        attention_dropout_rate=c["attention_probs_dropout_prob"], dict_outputs=True)


def _mg_pretrainer():
    from official.modeling import tf_utils
    from official.nlp.modeling import models
    pt = models.BertPretrainerV2(encoder_network=_mg_encoder(),
                                 mlm_activation=tf_utils.get_activation(ALBERT_CONFIG["hidden_act"]))
    _ = pt(pt.inputs)
    return pt


def _latest(folder):
    import tensorflow as tf
    path = tf.train.latest_checkpoint(folder)
    assert path, folder
    return path


def _flatten(prefix, outputs):
    rec = {}
    for k, v in outputs.items():
        if k == "encoder_outputs":
            for i, layer in enumerate(v):
                rec[f"{prefix}.encoder_outputs_{i}"] = np.asarray(layer)
        else:
            rec[f"{prefix}.{k}"] = np.asarray(v)
    return rec


def mg_outputs(root):
    """Run Model Garden's objects restored from each checkpoint, and the loaded
    encoder SavedModel, on the fixed inputs."""
    tf = _single_thread_tf()
    inp = make_inputs()
    enc_in = {k: tf.constant(inp[k]) for k in ("input_word_ids", "input_mask", "input_type_ids")}
    mlm_in = dict(enc_in, masked_lm_positions=tf.constant(inp["masked_lm_positions"]))
    rec = {}
    for folder, key in (("tf2_encoder", "encoder"), ("tf2_encoder_legacy", "model")):
        enc = _mg_encoder()
        status = tf.train.Checkpoint(**{key: enc}).read(_latest(os.path.join(root, folder)))
        status.assert_existing_objects_matched().expect_partial()
        assert_all_restored(enc.variables, root)
        out = enc([enc_in["input_word_ids"], enc_in["input_mask"], enc_in["input_type_ids"]],
                  training=False)
        rec.update(_flatten(folder, out))
    pt = _mg_pretrainer()
    status = tf.train.Checkpoint(**pt.checkpoint_items).read(_latest(os.path.join(root, "tf2_pretrainer")))
    status.assert_existing_objects_matched().expect_partial()
    assert_all_restored(pt.variables, root)
    rec.update(_flatten("tf2_pretrainer", pt(mlm_in, training=False)))

    sm = tf.saved_model.load(os.path.join(root, "hub_encoder"))
    rec.update(_flatten("hub_encoder", sm(enc_in, training=False)))
    rec.update(_flatten("hub_encoder.mlm", sm.mlm(mlm_in, training=False)))
    return rec


def expected_mg_value(mg_name, tf1):
    """The value a Model Garden variable must hold, from the TF1 values and
    the converter's documented renaming/reshaping (an independent check that
    every variable was restored)."""
    c = ALBERT_CONFIG
    H, N = c["hidden_size"], c["num_attention_heads"]
    blk = "bert/encoder/transformer/group_0/inner_group_0/"
    n = mg_name.split(":")[0]
    table = {
        "word_embeddings/embeddings": "bert/embeddings/word_embeddings",
        "type_embeddings/embeddings": "bert/embeddings/token_type_embeddings",
        "position_embedding/embeddings": "bert/embeddings/position_embeddings",
        "embeddings/layer_norm/gamma": "bert/embeddings/LayerNorm/gamma",
        "embeddings/layer_norm/beta": "bert/embeddings/LayerNorm/beta",
        "embedding_projection/kernel": "bert/encoder/embedding_hidden_mapping_in/kernel",
        "embedding_projection/bias": "bert/encoder/embedding_hidden_mapping_in/bias",
        "transformer/self_attention_layer_norm/gamma": blk + "LayerNorm/gamma",
        "transformer/self_attention_layer_norm/beta": blk + "LayerNorm/beta",
        "transformer/intermediate/kernel": blk + "ffn_1/intermediate/dense/kernel",
        "transformer/intermediate/bias": blk + "ffn_1/intermediate/dense/bias",
        "transformer/output/kernel": blk + "ffn_1/intermediate/output/dense/kernel",
        "transformer/output/bias": blk + "ffn_1/intermediate/output/dense/bias",
        "transformer/output_layer_norm/gamma": blk + "LayerNorm_1/gamma",
        "transformer/output_layer_norm/beta": blk + "LayerNorm_1/beta",
        "pooler_transform/kernel": "bert/pooler/dense/kernel",
        "pooler_transform/bias": "bert/pooler/dense/bias",
        "transformer/self_attention/attention_output/kernel": blk + "attention_1/output/dense/kernel",
        "transformer/self_attention/attention_output/bias": blk + "attention_1/output/dense/bias",
    }
    for part in ("query", "key", "value"):
        table[f"transformer/self_attention/{part}/kernel"] = blk + f"attention_1/self/{part}/kernel"
        table[f"transformer/self_attention/{part}/bias"] = blk + f"attention_1/self/{part}/bias"
    for leaf in ("transform/dense/kernel", "transform/dense/bias",
                 "transform/LayerNorm/gamma", "transform/LayerNorm/beta"):
        table["cls/predictions/" + leaf] = "cls/predictions/" + leaf
    table["cls/predictions/output_bias/bias"] = "cls/predictions/output_bias"
    key = None
    for suffix, src in table.items():
        if n == suffix or n.endswith("/" + suffix):
            key = src
    if key is None:
        raise KeyError(mg_name)
    v = tf1[key]
    if n.endswith("self_attention/attention_output/kernel"):
        v = v.reshape(N, H // N, H)
    elif any(n.endswith(f"self_attention/{p}/kernel") for p in ("query", "key", "value")):
        v = v.reshape(H, N, H // N)
    elif any(n.endswith(f"self_attention/{p}/bias") for p in ("query", "key", "value")):
        v = v.reshape(N, H // N)
    return v


def assert_all_restored(variables, root):
    tf1 = tf1_values_from_disk(root)
    names = set()
    for var in variables:
        exp = expected_mg_value(var.name, tf1)
        np.testing.assert_array_equal(var.numpy(), exp, err_msg=var.name)
        names.add(var.name)
    assert len(names) == len(variables)


def tf1_values_from_disk(root):
    import tensorflow as tf
    path = os.path.join(root, "tf1", "model.ckpt-best")
    return {n: tf.train.load_variable(path, n) for n, _ in tf.train.list_variables(path)}


def preprocess_outputs(root):
    """Run the preprocessing SavedModel: tokenize, bert_pack_inputs, default."""
    tf = _single_thread_tf()
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)
    pre = tf.saved_model.load(os.path.join(root, "hub_preprocess"))
    rec = {"sentences": np.asarray(SENTENCES), "sentences_b": np.asarray(SENTENCES_B)}
    a = pre.tokenize(tf.constant(SENTENCES))
    b = pre.tokenize(tf.constant(SENTENCES_B))
    for name, r in (("tokenize", a), ("tokenize_b", b)):
        rec[f"{name}.flat_values"] = r.flat_values.numpy()
        for i, splits in enumerate(r.nested_row_splits):
            rec[f"{name}.row_splits_{i}"] = splits.numpy()
    special = pre.tokenize.get_special_tokens_dict()
    for k, v in special.items():
        rec[f"special_tokens.{k}"] = np.asarray(v)
    calls = {
        "pack_single": pre.bert_pack_inputs([a], seq_length=tf.constant(PACK_SEQ_LEN)),
        "pack_pair": pre.bert_pack_inputs([a, b], seq_length=tf.constant(PACK_SEQ_LEN)),
        "pack_pair_default_len": pre.bert_pack_inputs([a, b]),
        "default": pre(tf.constant(SENTENCES)),
    }
    for name, d in calls.items():
        for k, v in d.items():
            rec[f"{name}.{k}"] = v.numpy()
    return rec


# What model_garden_outputs.npz keeps, and under which name: the Model Garden
# objects restored from tf2_encoder / tf2_encoder_legacy give bit-identical
# numbers to those from tf2_pretrainer (checked), and the `.mlm` call's
# sequence/pooled outputs equal the root call's (checked).
MG_KEEP = {
    "tf2_pretrainer.": "mg_objects.",
    "hub_encoder.sequence_output": "hub_encoder.sequence_output",
    "hub_encoder.pooled_output": "hub_encoder.pooled_output",
    "hub_encoder.default": "hub_encoder.default",
    "hub_encoder.encoder_outputs_": "hub_encoder.encoder_outputs_",
    "hub_encoder.mlm.mlm_logits": "hub_encoder.mlm.mlm_logits",
}


def _mg_keep(full):
    out = {}
    for k, v in full.items():
        for src, dst in MG_KEEP.items():
            if k.startswith(src):
                out[dst + k[len(src):]] = v
                break
    return out


def stage_record(work):
    save_npz(os.path.join(work, "model_garden_outputs.npz"),
             dict(_inputs_rec(), **_mg_keep(mg_outputs(work))))
    save_npz(os.path.join(work, "preprocess_outputs.npz"), preprocess_outputs(work))


def _inputs_rec():
    return {"inputs." + k: v for k, v in make_inputs().items()}


# --------------------------------------------------------------------------
# Verify (Model Garden's venv): everything loads back, numbers agree
# --------------------------------------------------------------------------

TOL = 2e-5  # float32, different op orders (TF1 graph vs Model Garden)
SEQ_KEYS = ("sequence_output", "pooled_output", "encoder_outputs_0", "encoder_outputs_1")


def _close(a, b, what, tol=TOL):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    err = float(np.max(np.abs(a.astype(np.float64) - b)))
    assert err <= tol, f"{what}: max abs diff {err:.3g} > {tol}"
    return err


def stage_verify(root, hub015):
    """Load every fixture in `root` (archives already extracted) back with
    Model Garden's / tensorflow_hub's code and compare with the recorded
    numbers; one subprocess per mode (TF2 eager, TF1 graph)."""
    _stage("verify_tf2", root)
    _stage("verify_tf1", root, ["--hub015=" + hub015])


def stage_verify_tf2(root):
    tf = _single_thread_tf()
    import tensorflow_hub as hub
    rec = dict(np.load(os.path.join(root, "model_garden_outputs.npz")))
    inp = make_inputs()
    for k, v in inp.items():
        np.testing.assert_array_equal(rec["inputs." + k], v)
    # 1. Rerun every source (restores check every variable against tf1/).
    full = mg_outputs(root)
    kept = _mg_keep(full)
    assert set(kept) == {k for k in rec if not k.startswith("inputs.")}, sorted(set(kept) ^ set(rec))
    for k, v in kept.items():
        np.testing.assert_allclose(v, rec[k], rtol=0, atol=1e-6, err_msg=k)
    # 2. The sources agree with each other.
    errs = {}
    ref = "tf2_pretrainer"
    for src in ("tf2_encoder", "tf2_encoder_legacy"):
        for k in SEQ_KEYS:
            np.testing.assert_array_equal(full[f"{src}.{k}"], full[f"{ref}.{k}"], err_msg=src + k)
    for src in ("hub_encoder", "hub_encoder.mlm"):
        for k in SEQ_KEYS:
            errs[f"{src}.{k}"] = _close(full[f"{src}.{k}"], full[f"{ref}.{k}"], f"{src}.{k}")
    np.testing.assert_array_equal(full["hub_encoder.default"], full["hub_encoder.pooled_output"])
    np.testing.assert_array_equal(full["hub_encoder.encoder_outputs_1"], full["hub_encoder.sequence_output"])
    errs["hub_encoder.mlm.mlm_logits"] = _close(full["hub_encoder.mlm.mlm_logits"],
                                                full[f"{ref}.mlm_logits"], "mlm_logits")
    tf1g_path = os.path.join(root, "tf1_graph_outputs.npz")
    if os.path.exists(tf1g_path):  # only while building
        tf1g = dict(np.load(tf1g_path))
        for k in SEQ_KEYS + ("mlm_logits",):
            errs[f"tf1_graph.{k}"] = _close(tf1g[f"tf1_graph.{k}"], full[f"{ref}.{k}"], f"tf1_graph.{k}")
    # 3. The SavedModel: its variables, hub.KerasLayer, serving_default.
    enc_in = {k: tf.constant(inp[k]) for k in ("input_word_ids", "input_mask", "input_type_ids")}
    sm = tf.saved_model.load(os.path.join(root, "hub_encoder"))
    assert_all_restored(sm.variables, root)
    assert_all_restored(sm.mlm.variables, root)
    layer = hub.KerasLayer(os.path.join(root, "hub_encoder"), trainable=False)
    _close(layer(enc_in)["sequence_output"], full["hub_encoder.sequence_output"], "KerasLayer", 1e-6)
    serving_map = serving_default_map(sm, enc_in, full)
    assert os.path.basename(sm.sp_model_file.asset_path.numpy().decode()) == "spm-1k.model"
    # 4. The preprocessing model reruns identically.
    pre = dict(np.load(os.path.join(root, "preprocess_outputs.npz")))
    again = preprocess_outputs(root)
    assert set(again) == set(pre)
    for k, v in again.items():
        np.testing.assert_array_equal(v, pre[k], err_msg=k)
    # 5. Every converted checkpoint restores with assert_consumed (every
    #    value in the file is used) into the converter's own model classes.
    enc = _mg_encoder()
    tf.train.Checkpoint(encoder=enc).restore(_latest(os.path.join(root, "tf2_encoder"))).assert_consumed()
    enc = _mg_encoder()
    tf.train.Checkpoint(model=enc).restore(_latest(os.path.join(root, "tf2_encoder_legacy"))).assert_consumed()
    pt = _mg_pretrainer()
    tf.train.Checkpoint(pretrainer=pt, **pt.checkpoint_items).restore(
        _latest(os.path.join(root, "tf2_pretrainer"))).assert_consumed()
    # 6. For the README: which Keras layer each `layer_with_weights-N` is.
    enc = _mg_encoder()
    lww = [layer.name for layer in enc.layers if layer.weights]
    print("verify_tf2: OK; max |diff| vs the Model Garden objects: "
          + ", ".join(f"{k} {v:.2g}" for k, v in errs.items()))
    with open(os.path.join(root, ".verify_tf2.json"), "w") as f:
        json.dump(dict(errs=errs, serving_default=serving_map, layer_with_weights=lww), f)


def serving_default_map(sm, enc_in, full):
    """The Keras-made `serving_default` signature names its outputs after the
    model's output layers (`albert_encoder`, `albert_encoder_1`, ...), not by
    the dict keys; find which output each one is (by value)."""
    sig = sm.signatures["serving_default"](**enc_in)
    cands = ["sequence_output", "pooled_output", "default", "encoder_outputs_0", "encoder_outputs_1"]
    mapping = {}
    for name, value in sorted(sig.items()):
        hits = [c for c in cands if full[f"hub_encoder.{c}"].shape == tuple(value.shape)
                and np.max(np.abs(full[f"hub_encoder.{c}"] - value.numpy())) <= 1e-6]
        assert hits, name
        mapping[name] = hits
    return mapping


def stage_verify_tf1(root, hub015):
    tf = _single_thread_tf()
    v1 = tf.compat.v1
    v1.disable_v2_behavior()
    module, _ = _import_hub015(hub015)
    rec = dict(np.load(os.path.join(root, "tf1_hub_outputs.npz")))
    full = run_tf1_module(os.path.join(root, "tf1_hub_module"), v1, module)
    assert set(rec) == set(TF1_HUB_KEEP)
    for k in TF1_HUB_KEEP:
        if rec[k].dtype.kind == "f":
            np.testing.assert_allclose(full[k], rec[k], rtol=0, atol=1e-6, err_msg=k)
        else:
            np.testing.assert_array_equal(full[k], rec[k], err_msg=k)
    assert bool(rec["tf1_hub.tokenization_info.do_lower_case"])
    assert str(rec["tf1_hub.tokenization_info.vocab_file_basename"]) == "30k-clean.model"
    # The module's variables are the TF1 checkpoint's, unchanged.
    tf1 = tf1_values_from_disk(root)
    mod_vars = os.path.join(root, "tf1_hub_module", "variables", "variables")
    names = [n for n, _ in tf.train.list_variables(mod_vars)]
    assert set(names) == set(tf1) - {"global_step"}, sorted(set(names) ^ set(tf1))
    for n in names:
        np.testing.assert_array_equal(tf.train.load_variable(mod_vars, n), tf1[n], err_msg=n)
    mg = dict(np.load(os.path.join(root, "model_garden_outputs.npz")))
    errs = {}
    for prefix in ("tf1_hub", "tf1_hub_train"):
        for sig in ("tokens", "sop", "mlm"):
            for k in ("sequence_output", "pooled_output"):
                errs[f"{prefix}.{sig}.{k}"] = _close(full[f"{prefix}.{sig}.{k}"], mg[f"mg_objects.{k}"], k)
        errs[f"{prefix}.mlm.mlm_logits"] = _close(full[f"{prefix}.mlm.mlm_logits"],
                                                  mg["mg_objects.mlm_logits"], "mlm_logits")
        np.testing.assert_allclose(full[f"{prefix}.sop.sop_log_probs"], rec["tf1_hub.sop.sop_log_probs"],
                                   rtol=0, atol=1e-6)
    # SOP by hand from the TF1 weights and Model Garden's pooled output.
    logits = mg["mg_objects.pooled_output"].astype(np.float64) @ tf1["cls/seq_relationship/output_weights"].T \
        + tf1["cls/seq_relationship/output_bias"]
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    errs["tf1_hub.sop.sop_log_probs (numpy)"] = _close(rec["tf1_hub.sop.sop_log_probs"], logp, "sop")
    print("verify_tf1: OK; max |diff| vs Model Garden: "
          + ", ".join(f"{k} {v:.2g}" for k, v in errs.items()))
    with open(os.path.join(root, ".verify_tf1.json"), "w") as f:
        json.dump(dict(errs=errs), f)


# --------------------------------------------------------------------------
# Archives: the SavedModel folders are shipped as .tar.xz
# --------------------------------------------------------------------------

ARCHIVED = ("hub_encoder", "hub_preprocess", "tf1_hub_module")


def write_archive(src_dir, dest):
    """Deterministic tar.xz of `src_dir` (sorted, mtime 0, root-owned, 644/755)."""
    import io
    import lzma
    import tarfile
    base = os.path.basename(src_dir.rstrip("/"))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        entries = [(base, src_dir)]
        for dirpath, dirnames, files in os.walk(src_dir):
            dirnames.sort()
            rel = os.path.relpath(dirpath, os.path.dirname(src_dir.rstrip("/")))
            entries += [(os.path.join(rel, d), os.path.join(dirpath, d)) for d in dirnames]
            entries += [(os.path.join(rel, f), os.path.join(dirpath, f)) for f in sorted(files)]
        for name, path in sorted(entries):
            info = tar.gettarinfo(path, arcname=name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            info.mode = 0o755 if info.isdir() else 0o644
            if info.isfile():
                with open(path, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    with open(dest, "wb") as f:
        f.write(lzma.compress(buf.getvalue(), format=lzma.FORMAT_XZ,
                              check=lzma.CHECK_CRC64, preset=9 | lzma.PRESET_EXTREME))


def extract_fixtures(out, dest):
    """Copy the fixture folder `out` to `dest` and extract its archives there
    (what a test does before tf.saved_model.load)."""
    import tarfile
    shutil.copytree(out, dest, dirs_exist_ok=True)
    for name in ARCHIVED:
        with tarfile.open(os.path.join(dest, name + ".tar.xz")) as tar:
            tar.extractall(dest, filter="data")
    return dest


# --------------------------------------------------------------------------
# Inspect (any TensorFlow, no Model Garden): names, object paths, shapes
# --------------------------------------------------------------------------

INSPECT_BEGIN = "<!-- inspect:begin -->"
INSPECT_END = "<!-- inspect:end -->"


def _object_paths(reader):
    """checkpoint key -> every object path (from the root, through the
    object graph) that reaches the same variable, skipping Keras' duplicate
    `layer-N` and `_config` edges."""
    from tensorflow.core.protobuf import trackable_object_graph_pb2
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    paths = {}

    def walk(node_id, prefix, seen):
        node = graph.nodes[node_id]
        for attr in node.attributes:
            paths.setdefault(attr.checkpoint_key, []).append("/".join(prefix))
        for child in node.children:
            name = child.local_name
            if child.node_id in seen or name.startswith("layer-") or name == "_config":
                continue
            walk(child.node_id, prefix + [name], seen | {child.node_id})

    walk(0, [], {0})
    return {k: sorted(set(v)) for k, v in paths.items()}


def inspect_listing(root) -> str:
    """Markdown listing of every checkpoint's / SavedModel's variables, made
    with plain tf.train.list_variables and tf.saved_model.load only. `root`
    is the fixture folder with its archives extracted."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2
    lines = []

    def ckpt_table(title, path, aliases=False, names=None):
        reader = tf.train.load_checkpoint(path)
        dtypes = reader.get_variable_to_dtype_map()
        paths = _object_paths(reader) if aliases else {}
        lines.append(f"#### {title}\n")
        lines.append(f"`tf.train.list_variables('{os.path.relpath(path, root)}')`:\n")
        head = ["key", "shape", "dtype"]
        if names:
            head.append("variable (`var.name` after `tf.saved_model.load`)")
        if aliases:
            head.append("object paths to the same variable")
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + " --- |" * len(head))
        for name, shape in tf.train.list_variables(path):
            row = [f"`{name}`", str(list(shape)), dtypes[name].name]
            if names:
                row.append(f"`{names[name]}`" if name in names else "")
            if aliases:
                row.append(", ".join(f"`{p}`" for p in paths.get(name, [])))
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")

    ckpt_table("tf1/model.ckpt-best (original release, TF1 name-based)",
               os.path.join(root, "tf1", "model.ckpt-best"))
    for folder, model, key in CONVERSIONS:
        ckpt_table(f"{folder}/ckpt-1 (converter: --converted_model={model} "
                   f"--checkpoint_model_name={key})",
                   tf.train.latest_checkpoint(os.path.join(root, folder)), aliases=True)

    sm_dir = os.path.join(root, "hub_encoder")
    sm = tf.saved_model.load(sm_dir)
    sm_ckpt = os.path.join(sm_dir, "variables", "variables")
    # `variables/i` is the root's i-th variable; `mlm/variables/i` the mlm
    # sub-object's i-th (its first ones are the encoder's, stored once).
    # Checked by value.
    names = {}
    for prefix, obj in (("variables", sm), ("mlm/variables", sm.mlm)):
        for i, var in enumerate(obj.variables):
            key = f"{prefix}/{i}/.ATTRIBUTES/VARIABLE_VALUE"
            try:
                value = tf.train.load_variable(sm_ckpt, key)
            except Exception:  # noqa: BLE001 -- stored under the root's key
                continue
            np.testing.assert_array_equal(value, var.numpy(), err_msg=key)
            names[key] = var.name
    ckpt_table("hub_encoder/variables/variables (inside hub_encoder.tar.xz)", sm_ckpt, names=names)
    lines.append("`tf.saved_model.load('hub_encoder')`: "
                 f"{len(sm.variables)} variables at the root, {len(sm.mlm.variables)} in `.mlm` "
                 f"(the root's {len(sm.variables)} first, then the MLM head's "
                 f"{len(sm.mlm.variables) - len(sm.variables)}; the same objects: "
                 f"{all(a is b for a, b in zip(sm.variables, sm.mlm.variables))}); trainable "
                 f"{len(sm.trainable_variables)}.\n")
    lines.append("Signatures (`.signatures`):\n")
    for name, fn in sm.signatures.items():
        ins = fn.structured_input_signature[1]
        outs = fn.structured_outputs
        lines.append(f"- `{name}`: inputs " + ", ".join(
            f"`{k}` {v.dtype.name}{v.shape.as_list()}" for k, v in sorted(ins.items())) +
            "; outputs " + ", ".join(f"`{k}` {v.dtype.name}{v.shape.as_list()}"
                                     for k, v in sorted(outs.items())))
    lines.append(f"- `.sp_model_file`: asset `{os.path.basename(sm.sp_model_file.asset_path.numpy().decode())}`; "
                 f"has `.do_lower_case`: {hasattr(sm, 'do_lower_case')}; "
                 f"has `.vocab_file`: {hasattr(sm, 'vocab_file')}")
    lines.append(f"- assets: {sorted(os.listdir(os.path.join(sm_dir, 'assets')))}")
    lines.append("")

    pre_dir = os.path.join(root, "hub_preprocess")
    lines.append("#### hub_preprocess (inside hub_preprocess.tar.xz)\n")
    pre_ckpt = os.path.join(pre_dir, "variables", "variables")
    lines.append("`tf.train.list_variables`: " + ", ".join(
        f"`{n}` {list(s)}" for n, s in tf.train.list_variables(pre_ckpt)) + "\n")
    try:
        import tensorflow_text  # noqa: F401
        pre = tf.saved_model.load(pre_dir)
        lines.append("`tf.saved_model.load('hub_preprocess')` (with `import tensorflow_text`): "
                     f"{len(pre.variables)} variables; signatures {sorted(pre.signatures)}; "
                     f"`.tokenize`: {hasattr(pre, 'tokenize')}, "
                     f"`.bert_pack_inputs`: {hasattr(pre, 'bert_pack_inputs')}, "
                     f"`.tokenize.get_special_tokens_dict`: "
                     f"{hasattr(getattr(pre, 'tokenize', None), 'get_special_tokens_dict')}\n")
    except Exception as e:  # noqa: BLE001 -- report, do not fail, without tensorflow_text
        lines.append("`tf.saved_model.load('hub_preprocess')` without the tensorflow_text ops "
                     f"fails ({type(e).__name__}), as expected: it needs `import tensorflow_text`.\n")
    lines.append(f"assets: {sorted(os.listdir(os.path.join(pre_dir, 'assets')))} (the "
                 "SentencePiece model is a constant inside the graph's functions)\n")

    hub_dir = os.path.join(root, "tf1_hub_module")
    ckpt_table("tf1_hub_module/variables/variables (inside tf1_hub_module.tar.xz)",
               os.path.join(hub_dir, "variables", "variables"))
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(hub_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    with open(os.path.join(hub_dir, "tfhub_module.pb"), "rb") as f:
        module_pb = f.read()
    lines.append(f"`tfhub_module.pb`: {len(module_pb)} bytes, {module_pb.hex()} "
                 "(a serialized `ModuleDef`: format = FORMAT_V3, enum value 3)\n")
    lines.append("`saved_model.pb` meta graphs (parsed with `saved_model_pb2`):\n")
    for mg in proto.meta_graphs:
        tags = sorted(mg.meta_info_def.tags)
        lines.append(f"- tags {tags}: signatures " + "; ".join(
            f"`{k}` ({', '.join(sorted(s.inputs))} -> {', '.join(sorted(s.outputs))})"
            for k, s in sorted(mg.signature_def.items())))
    lines.append("")
    try:
        obj = tf.saved_model.load(hub_dir, tags=[])
        sig = obj.signatures["tokens"]
        lines.append("`tf.saved_model.load('tf1_hub_module', tags=[])` works: signatures "
                     f"{sorted(obj.signatures)}; `tokens` inputs "
                     f"{sorted(sig.structured_input_signature[1])}, outputs "
                     f"{sorted(sig.structured_outputs)}\n")
    except Exception as e:  # noqa: BLE001
        lines.append(f"`tf.saved_model.load('tf1_hub_module', tags=[])` fails: "
                     f"{type(e).__name__}: {str(e).splitlines()[0][:200]}\n")
    lines.append(f"assets: {sorted(os.listdir(os.path.join(hub_dir, 'assets')))}")
    return "\n".join(lines)


def check_inspect(out):
    """Extract the fixtures, list them with this TensorFlow, and compare with
    README.md."""
    import tensorflow as tf
    with tempfile.TemporaryDirectory() as tmp:
        listing = inspect_listing(extract_fixtures(out, os.path.join(tmp, "model_garden")))
    with open(os.path.join(out, "README.md"), encoding="utf-8") as f:
        text = f.read()
    stored = text.split(INSPECT_BEGIN, 1)[1].split(INSPECT_END, 1)[0].strip()
    if listing.strip() != stored:
        import difflib
        sys.stdout.writelines(difflib.unified_diff(
            stored.splitlines(True), listing.strip().splitlines(True), "README.md", "now"))
        raise SystemExit(f"inspect: the listing with TF {tf.__version__} differs from README.md")
    print(f"inspect: TF {tf.__version__} lists exactly what README.md says")


# --------------------------------------------------------------------------
# README
# --------------------------------------------------------------------------


def _versions():
    from importlib import metadata
    names = ["tf-models-official", "tensorflow", "tf-keras", "tensorflow-text",
             "tensorflow-hub", "sentencepiece", "numpy"]
    v = {n: metadata.version(n) for n in names}
    v["tensorflow-hub (TF1 module export only, --target folder)"] = "0.15.0"
    v["python"] = sys.version.split()[0]
    return v


def _sizes(out):
    rows, total = [], 0
    for dirpath, dirnames, files in os.walk(out):
        dirnames.sort()
        for name in sorted(files):
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, out)
            if rel == "README.md":
                continue
            size = os.path.getsize(p)
            total += size
            with open(p, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()[:16]
            rows.append((rel, size, digest))
    return rows, total


def _archive_members(out):
    import tarfile
    rows = []
    for name in ARCHIVED:
        with tarfile.open(os.path.join(out, name + ".tar.xz")) as tar:
            rows += [(m.name, m.size) for m in tar.getmembers() if m.isfile()]
    return rows


README_TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                               "make_model_garden_fixtures_readme.md")


def write_readme(out, work, listing):
    v = _versions()
    e2 = json.load(open(os.path.join(work, ".verify_tf2.json")))
    e1 = json.load(open(os.path.join(work, ".verify_tf1.json")))
    rows, total = _sizes(out)
    c = ALBERT_CONFIG

    def npz_table(path):
        d = np.load(os.path.join(out, path))
        lines = ["| key | dtype | shape |", "| --- | --- | --- |"]
        lines += [f"| `{k}` | {d[k].dtype} | {list(d[k].shape)} |" for k in sorted(d.files)]
        return "\n".join(lines)

    errs = dict(e2["errs"], **e1["errs"])
    fields = dict(
        versions="\n".join(f"| {k} | {val} |" for k, val in v.items()),
        files="\n".join(f"| `{r}` | {s} | {h} |" for r, s, h in rows),
        members="\n".join(f"| `{r}` | {s} |" for r, s in _archive_members(out)),
        total=total, total_kib=f"{total / 1024:.0f}",
        mg_table=npz_table("model_garden_outputs.npz"),
        hub_table=npz_table("tf1_hub_outputs.npz"),
        pre_table=npz_table("preprocess_outputs.npz"),
        maxerr=f"{max(errs.values()):.2g}", tol=TOL,
        errs="\n".join(f"| {k} | {val:.2g} |" for k, val in errs.items()),
        serving="\n".join(f"  | `{k}` | {' = '.join(f'`{x}`' for x in val)} |"
                          for k, val in e2["serving_default"].items()),
        lww="\n".join(f"| `layer_with_weights-{i}` | `{n}` |" for i, n in enumerate(e2["layer_with_weights"])),
        listing=listing, inspect_begin=INSPECT_BEGIN, inspect_end=INSPECT_END,
        weight_seed=WEIGHT_SEED, input_seed=INPUT_SEED, global_step=GLOBAL_STEP,
        pack_seq_len=PACK_SEQ_LEN, pre_seq_len=PREPROCESS_DEFAULT_SEQ_LEN,
        heads=c["num_attention_heads"], head_size=c["hidden_size"] // c["num_attention_heads"],
        **c,
    )
    with open(README_TEMPLATE, encoding="utf-8") as f:
        template = f.read()
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write(template.format(**fields))


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------

KEEP = ["tf1", "tf2_encoder", "tf2_encoder_legacy", "tf2_pretrainer", "albert_encoder.yaml",
        "spm-1k.model", "model_garden_outputs.npz", "tf1_hub_outputs.npz", "preprocess_outputs.npz"]


def build(out, hub015, keep_work=None):
    work = keep_work or tempfile.mkdtemp(prefix="mg_fixtures_")
    try:
        _stage("tf1", work)
        run_convert(work)
        run_export(work)
        _stage("tf1hub", work, ["--hub015=" + hub015])
        _stage("record", work)
        if os.path.exists(out):
            readme = os.path.join(out, "README.md")
            if os.listdir(out) and not (os.path.exists(readme) and "(generated -- do not edit"
                                        in open(readme, encoding="utf-8").readline()):
                raise SystemExit(f"--out={out} exists and is not a folder this tool wrote")
            shutil.rmtree(out)
        os.makedirs(out)
        for name in KEEP:
            src = os.path.join(work, name)
            (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, os.path.join(out, name))
        for name in ARCHIVED:
            write_archive(os.path.join(work, name), os.path.join(out, name + ".tar.xz"))
        # Verify what will be committed: extracted from `out`, as a test does;
        # the tool's own TF1 graph outputs join in only here.
        check = os.path.join(work, "check")
        extract_fixtures(out, check)
        shutil.copy(os.path.join(work, "tf1_graph_outputs.npz"), check)
        stage_verify(check, hub015)
        listing = _capture_inspect(check)
        write_readme(out, check, listing)
        _run([sys.executable, os.path.abspath(__file__), "--inspect", "--out=" + out])
    finally:
        if not keep_work:
            shutil.rmtree(work, ignore_errors=True)


def _capture_inspect(root):
    res = subprocess.run([sys.executable, os.path.abspath(__file__), "--_stage=inspect_print",
                          "--_work=" + root], check=True, env=_quiet_tf_env(),
                         stdout=subprocess.PIPE, text=True)
    return res.stdout.strip()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=DEFAULT_OUT)
    p.add_argument("--hub015", default="/tmp/hub015",
                   help="folder with tensorflow-hub 0.15.0 (pip install --no-deps --target)")
    p.add_argument("--verify", action="store_true", help="only verify the files in --out")
    p.add_argument("--inspect", action="store_true",
                   help="plain TF: list the variables and compare with README.md")
    p.add_argument("--keep_work", default=None, help="build in this folder and keep it")
    p.add_argument("--_stage", default=None, help=argparse.SUPPRESS)
    p.add_argument("--_work", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a._stage:
        {
            "tf1": lambda: stage_tf1(a._work),
            "tf1hub": lambda: stage_tf1hub(a._work, a.hub015),
            "record": lambda: stage_record(a._work),
            "verify_tf2": lambda: stage_verify_tf2(a._work),
            "verify_tf1": lambda: stage_verify_tf1(a._work, a.hub015),
            "inspect_print": lambda: print(inspect_listing(a._work)),
        }[a._stage]()
        return
    if a.inspect:
        check_inspect(a.out)
        return
    if a.verify:
        with tempfile.TemporaryDirectory() as tmp:
            stage_verify(extract_fixtures(a.out, os.path.join(tmp, "model_garden")), a.hub015)
        return
    build(a.out, a.hub015, a.keep_work)


if __name__ == "__main__":
    main()
