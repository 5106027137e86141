"""Shared fixtures: paths to the files shipped in the repo, and tiny configs."""

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_DIR = os.path.join(REPO_ROOT, "data")
FIXTURES_DIR = os.path.join(REPO_ROOT, "tests", "fixtures")


@pytest.fixture(scope="session")
def spm_model_file():
    """The real ALBERT English SentencePiece model shipped in data/."""
    return os.path.join(DATA_DIR, "30k-clean.model")


@pytest.fixture(scope="session")
def tokenizer(spm_model_file):
    from albert_tf.tokenization import FullTokenizer

    return FullTokenizer(spm_model_file=spm_model_file, do_lower_case=True)


@pytest.fixture()
def tiny_config():
    """A 2-layer ALBERT small enough for fast tests, with the real 30k vocabulary size."""
    from albert_tf.config import AlbertConfig

    return AlbertConfig(vocab_size=30000, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64, max_position_embeddings=128)


def pytest_configure(config):
    # Slow tests still run in CI (`.ci/run` runs everything); the marker lets a developer skip them locally
    # with `-m "not slow"`.
    config.addinivalue_line("markers", "slow: slower test (XLA compile, subprocess); still run in CI")
