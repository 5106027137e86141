"""The WordPiece path end to end, with the real BERT Chinese vocabulary (`data/vocab_chinese.txt`):
pretraining data from a Chinese / mixed corpus, the Chinese model layout, `run_pretraining.py --vocab_file` and
its export served without this code, and in-graph / Python tokenizer agreement."""

import json
import os
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.data import pretraining as pdata
from albert_tf.data import records
from albert_tf.text.tokenization import FullTokenizer, encode_pair

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCAB = os.path.join(REPO, "data", "vocab_chinese.txt")
ZH_TINY_CONFIG = os.path.join(REPO, "data", "albert_config_zh_tiny.json")
CORPUS = os.path.join(REPO, "tests", "fixtures", "zh_corpus.txt")
SEQ, PREDS = 32, 5  # short rows: many pairs are truncated, so segments often begin with an orphaned "##" piece
CLS, SEP, MASK = 101, 102, 103

# Chinese, mixed Chinese-English, full-width, accented Latin, zero-width / control characters and emoji.
TEXTS = [
    "我爱北京天安门。",
    "我们用TensorFlow训练ALBERT模型，loss从5.2降到了1.8！",
    "ＡＢＣ１２３，ｘｙｚ　ＷｉＦｉ密码：１２０８。",
    "Amélie和François在Café里喝咖啡，naïve Ångström。",
    "零宽\u200b空格\u200d与控制\x07字符\ufeff都会被删掉",
    "今天天气很好😀👍🏽，我们去爬山吧☕",
    "  \t  ",
]


def _env():
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env.update(PYTHONPATH=REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
               TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="-1")
    return env


def _run(args, timeout=300):
    return subprocess.run([sys.executable, *args], cwd=REPO, env=_env(), capture_output=True, text=True,
                          timeout=timeout)


def _log_tail(result):
    return f"exit {result.returncode}\n--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-6000:]}"


@pytest.fixture(scope="module")
def zh():
    return FullTokenizer(vocab_file=VOCAB, do_lower_case=True)


@pytest.fixture(scope="module")
def zh_records(tmp_path_factory):
    """`create_pretraining_data.py --vocab_file` (no SentencePiece model) on the Chinese test corpus."""
    path = str(tmp_path_factory.mktemp("zh_records") / "zh.tfrecord")
    result = _run(["create_pretraining_data.py", f"--input_file={CORPUS}", f"--output_file={path}",
                   f"--vocab_file={VOCAB}", f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDS}",
                   "--dupe_factor=20", "--random_seed=7", "--num_workers=1", "--progress_interval=0"])
    assert result.returncode == 0, _log_tail(result)
    return path


def _parse(path):
    spec = records.pretraining_feature_spec(SEQ, PREDS)
    dataset = tf.data.TFRecordDataset(path).batch(1 << 16).map(lambda s: tf.io.parse_example(s, spec))
    return {k: v.numpy() for k, v in next(iter(dataset)).items()}


def _corpus_documents(tokenizer):
    """Each document of the corpus as one string of token ids, " 12 34 56 " (for substring search)."""
    docs, current = [], []
    with open(CORPUS, encoding="utf-8") as f:
        for line in f.read().split("\n"):
            if not line.strip():
                if current:
                    docs.append(" " + " ".join(map(str, current)) + " ")
                current = []
            else:
                current += tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line))
    if current:
        docs.append(" " + " ".join(map(str, current)) + " ")
    return docs


# ------------------------------------------------------------------------------------------------------------------
# Pretraining data


def test_records_have_the_original_features(zh_records):
    raw = next(iter(tf.data.TFRecordDataset(zh_records))).numpy()
    example = tf.train.Example.FromString(raw)
    features = example.features.feature
    assert set(features) == set(pdata.FEATURE_ORDER)
    for name in pdata.FEATURE_ORDER:
        kind = "float_list" if name == "masked_lm_weights" else "int64_list"
        assert features[name].WhichOneof("kind") == kind, name
    records.check_record_lengths([zh_records], SEQ, PREDS)  # the reader run_pretraining.py uses accepts them


def test_masked_spans_keep_wordpiece_words_whole(zh_records, zh):
    data = _parse(zh_records)
    n_rows = len(data["input_ids"])
    assert n_rows > 300
    documents = _corpus_documents(zh)
    stats = {"continuations": 0, "masked_continuations": 0, "orphans": 0, "masked": 0}
    for n in range(n_rows):
        k = int(data["masked_lm_weights"][n].sum())
        positions = data["masked_lm_positions"][n, :k]
        assert k >= 1 and (data["masked_lm_weights"][n, k:] == 0).all()
        ids = data["input_ids"][n].copy()
        ids[positions] = data["masked_lm_ids"][n, :k]  # the text before masking
        length = int(data["input_mask"][n].sum())
        tokens = zh.convert_ids_to_tokens(ids[:length])
        masked = set(positions.tolist())
        seps = [p for p, t in enumerate(tokens) if t == "[SEP]"]
        assert tokens[0] == "[CLS]" and len(seps) == 2 and seps[1] == length - 1
        assert not masked & {0, *seps}, "[CLS]/[SEP] masked"
        assert not set(data["masked_lm_ids"][n, :k].tolist()) & {CLS, SEP}
        assert (ids[length:] == 0).all() and (data["token_boundary"][n, length:] == 0).all()
        for p, token in enumerate(tokens):
            special = token in ("[CLS]", "[SEP]")
            continuation = token.startswith("##")
            assert data["token_boundary"][n, p] == (1 if special else int(not continuation)), (n, p, token)
            if not continuation:
                continue
            if tokens[p - 1] in ("[CLS]", "[SEP]"):
                # An orphan (its word's head was truncated away): a masked span must not start on it.
                stats["orphans"] += 1
                assert p not in masked, (n, p, tokens)
            else:
                # A continuation is masked exactly when the piece before it (same word) is.
                stats["continuations"] += 1
                stats["masked_continuations"] += p in masked
                assert (p in masked) == (p - 1 in masked), (n, p, tokens)
        stats["masked"] += k
        # Decoded, each segment is a contiguous run of one document's tokens.
        for segment in (ids[1:seps[0]], ids[seps[0] + 1:seps[1]]):
            run = " " + " ".join(map(str, segment.tolist())) + " "
            assert any(run in doc for doc in documents), zh.convert_ids_to_tokens(segment)
    # The corpus exercises what is checked: many "##" words, some masked, and orphans after truncation.
    assert stats["continuations"] > 500 and stats["masked_continuations"] > 30 and stats["orphans"] > 20, stats


def test_orphaned_continuations_are_not_mask_candidates():
    """Unit check of the fix: A = "##x ##y word", B = "##z word ##w"; the orphans are never chosen."""
    tokenizer = FullTokenizer(vocab_file=VOCAB)
    tables = pdata.TokenTables(tokenizer)
    pieces = ["##ns", "##or", "te", "##ns", "##or", "##flow", "##ing", "我", "em", "##be", "我", "们"]
    ids = np.asarray(tokenizer.convert_tokens_to_ids(pieces), np.int32)
    docs = pdata.ShardDocuments(tokens=ids, word_start=tables.word_start[ids], bounds=[[0, 6, 12]], skipped=0,
                                text_bytes=0)
    config = pdata.PretrainingConfig(max_seq_length=16, max_predictions_per_seq=13, masked_lm_prob=1.0)
    instance = (0, 6, 6, 12, 0)  # A = pieces[0:6], B = pieces[6:12]
    cdf = pdata.ngram_cdf(config.ngram)
    seen = set()
    for seed in range(30):
        positions, _ = pdata.mask_instance(docs, instance, config, tables, random.Random(seed), cdf)
        seen.update(positions)
        # Positions in [CLS] A [SEP] B [SEP]: A = 1..6, B = 8..13. Orphans: 1, 2 (A) and 8 (B).
        assert not {1, 2, 8} & set(positions)
        assert ({3, 4, 5, 6} <= set(positions)) or not {3, 4, 5, 6} & set(positions)  # te ##ns ##or ##flow
        assert ({10, 11} <= set(positions)) or not {10, 11} & set(positions)  # em ##be
    assert seen == {3, 4, 5, 6, 9, 10, 11, 12, 13}


# ------------------------------------------------------------------------------------------------------------------
# The Chinese model layout


def test_zh_tiny_config_runs_on_wordpiece_ids(zh):
    from albert_tf.model import AlbertForPretraining  # pylint: disable=import-outside-toplevel

    config = AlbertConfig.from_json_file(ZH_TINY_CONFIG)
    assert config.vocab_size == len(zh.vocab) == 21128
    model = AlbertForPretraining(config)
    rows = [encode_pair(zh, TEXTS[1], TEXTS[0], 40), encode_pair(zh, TEXTS[2], None, 40)]
    inputs = {name: tf.constant([row[i] for row in rows], tf.int32)
              for i, name in enumerate(("input_ids", "input_mask", "segment_ids"))}
    assert int(tf.reduce_max(inputs["input_ids"])) < config.vocab_size
    inputs["masked_lm_positions"] = tf.constant([[1, 2, 3], [4, 5, 0]], tf.int32)
    outputs = model(inputs, training=False)
    assert outputs["sequence_output"].shape == (2, 40, 312)
    assert outputs["pooled_output"].shape == (2, 312)
    assert outputs["mlm_logits"].shape == (2, 3, 21128)
    assert outputs["sop_logits"].shape == (2, 2)
    assert all(np.isfinite(outputs[k].numpy()).all() for k in ("sequence_output", "mlm_logits", "sop_logits"))


# ------------------------------------------------------------------------------------------------------------------
# run_pretraining.py --vocab_file, and its export served without this code

SERVE = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the text ops of the preprocessing SavedModel)

    encoder_dir, preprocess_dir, texts_file, out_file = sys.argv[1:]
    encoder = tf.saved_model.load(encoder_dir)
    preprocess = tf.saved_model.load(preprocess_dir)
    texts = json.load(open(texts_file, encoding="utf-8"))
    info = encoder.signatures["tokenization_info"]()
    inputs = preprocess.signatures["serving_default"](text=tf.constant(texts))
    served = encoder.signatures["serving_default"](**inputs)
    mlm = encoder.signatures["mlm"](masked_lm_positions=tf.constant([[1, 2]] * len(texts), tf.int32), **inputs)
    np.savez(out_file, mlm_logits=mlm["mlm_logits"].numpy(),
             **{k: v.numpy() for k, v in inputs.items()}, **{k: v.numpy() for k, v in served.items()})
    print(json.dumps({"vocab_file": info["vocab_file"].numpy().decode(),
                      "do_lower_case": bool(info["do_lower_case"].numpy()),
                      "modules": sorted({m.split(".")[0] for m in sys.modules})}))
    """)


@pytest.mark.slow
def test_run_pretraining_with_vocab_file_exports_a_servable_wordpiece_model(zh_records, zh, tmp_path):
    from albert_tf import checkpoints  # pylint: disable=import-outside-toplevel
    from albert_tf.serving import encoder as export
    from albert_tf.tasks.pretraining import TrainablePretraining  # pylint: disable=import-outside-toplevel

    config = AlbertConfig(vocab_size=21128, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)
    config_file = str(tmp_path / "albert_config_zh_micro.json")
    config.to_json_file(config_file)
    out = tmp_path / "out"
    result = _run(["run_pretraining.py", f"--albert_config_file={config_file}", f"--input_file={zh_records}",
                   f"--output_dir={out}", f"--vocab_file={VOCAB}", f"--max_seq_length={SEQ}",
                   f"--max_predictions_per_seq={PREDS}", "--do_train", "--train_batch_size=8",
                   "--num_train_steps=2", "--num_warmup_steps=0", "--learning_rate=5e-3",
                   "--save_checkpoints_steps=2", "--iterations_per_loop=1", "--log_every=1"])
    assert result.returncode == 0, _log_tail(result)
    assert "at step 2" in result.stdout
    export_dir = str(out / "saved_model" / "2")

    # tokenization_info points to the vocabulary, copied into the export as an asset.
    loaded = tf.saved_model.load(export_dir)
    info = loaded.signatures["tokenization_info"]()
    asset = info["vocab_file"].numpy().decode()
    assert os.path.dirname(asset) == os.path.join(export_dir, "assets") and bool(info["do_lower_case"].numpy())
    with open(asset, "rb") as a, open(VOCAB, "rb") as b:
        assert a.read() == b.read()
    rebuilt = FullTokenizer(vocab_file=asset, do_lower_case=bool(info["do_lower_case"].numpy()))
    for text in TEXTS:
        assert rebuilt.convert_tokens_to_ids(rebuilt.tokenize(text)) == zh.convert_tokens_to_ids(zh.tokenize(text))
    del loaded

    # A raw-text front end built from the export's own asset; both served by plain tensorflow + tensorflow_text.
    preprocess_dir = export.export_preprocessing(str(tmp_path / "preprocess"), vocab_file=asset, max_seq_length=SEQ,
                                                 max_position_embeddings=config.max_position_embeddings)
    (tmp_path / "texts.json").write_text(json.dumps(TEXTS, ensure_ascii=False), encoding="utf-8")
    (tmp_path / "serve.py").write_text(SERVE)
    env = {k: v for k, v in _env().items() if k != "PYTHONPATH"}
    served = subprocess.run([sys.executable, str(tmp_path / "serve.py"), export_dir, preprocess_dir,
                             str(tmp_path / "texts.json"), str(tmp_path / "out.npz")], cwd=str(tmp_path), env=env,
                            capture_output=True, text=True, timeout=300)
    assert served.returncode == 0, _log_tail(served)
    report = json.loads(served.stdout.strip().splitlines()[-1])
    assert "albert_tf" not in report["modules"] and report["do_lower_case"]
    assert os.path.basename(report["vocab_file"]) == "vocab_chinese.txt"
    outputs = np.load(tmp_path / "out.npz")
    for i, text in enumerate(TEXTS):
        expected = encode_pair(rebuilt, text, None, SEQ)
        for j, name in enumerate(("input_ids", "input_mask", "segment_ids")):
            assert outputs[name][i].tolist() == expected[j], (name, text)
    assert outputs["mlm_logits"].shape == (len(TEXTS), 2, 21128)
    assert outputs["sequence_output"].shape == (len(TEXTS), SEQ, 32)

    # The export holds the trained weights.
    model = TrainablePretraining(config)
    checkpoints.load_checkpoint(model, tf.train.latest_checkpoint(str(out)))
    inputs = {name: tf.constant(outputs[name]) for name in ("input_ids", "input_mask", "segment_ids")}
    expected = model.albert(inputs, training=False)
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(outputs[name], expected[name].numpy(), rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.slow
def test_run_pretraining_refuses_a_vocabulary_larger_than_the_config(zh_records, tmp_path):
    config_file = str(tmp_path / "albert_config.json")
    AlbertConfig(vocab_size=1000, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                 intermediate_size=32, max_position_embeddings=64).to_json_file(config_file)
    result = _run(["run_pretraining.py", f"--albert_config_file={config_file}", f"--input_file={zh_records}",
                   f"--output_dir={tmp_path / 'out'}", f"--vocab_file={VOCAB}", f"--max_seq_length={SEQ}",
                   f"--max_predictions_per_seq={PREDS}", "--do_train", "--num_train_steps=1"], timeout=120)
    assert result.returncode != 0
    assert "has 21128 tokens but the albert config's vocab_size is 1000" in result.stdout + result.stderr
    assert not (tmp_path / "out").exists()  # refused before anything was written


# ------------------------------------------------------------------------------------------------------------------
# In-graph tokenizer


def test_in_graph_tokenizer_agrees_with_python(zh):
    from albert_tf.text.preprocessor import AlbertTextPreprocessor  # pylint: disable=import-outside-toplevel

    layer = AlbertTextPreprocessor(vocab_file=VOCAB, do_lower_case=True, max_seq_length=SEQ)
    with open(CORPUS, encoding="utf-8") as f:
        texts = TEXTS + [line for line in f.read().split("\n") if line.strip()][::6]
    got = layer.tokenize_to_ids(tf.constant(texts)).to_list()
    for text, ids in zip(texts, got):
        assert ids == zh.convert_tokens_to_ids(zh.tokenize(text)), text
    packed = layer(tf.constant(TEXTS[:3]))
    for i, text in enumerate(TEXTS[:3]):
        assert packed["input_ids"][i].numpy().tolist() == encode_pair(zh, text, None, SEQ)[0]
