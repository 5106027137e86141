"""Shared fixtures: paths to the files shipped in the repo, and tiny configs."""

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from tests import helpers  # noqa: E402  (the one module of test constants)
from tests.helpers import DATA_DIR, FIXTURES_DIR, SPM  # noqa: E402


@pytest.fixture(scope="session")
def spm_model_file():
    """The real ALBERT English SentencePiece model shipped in data/."""
    return SPM


@pytest.fixture(scope="session")
def tokenizer(spm_model_file):
    from albert_tf.text.tokenization import FullTokenizer

    return FullTokenizer(spm_model_file=spm_model_file, do_lower_case=True)


@pytest.fixture(name="tiny_config")
def tiny_config_fixture():
    """`tests.helpers.tiny_config()`: a 2-layer ALBERT small enough for fast tests."""
    return helpers.tiny_config()


def pytest_configure(config):
    # Slow tests still run in CI (`.ci/run` runs everything); the marker lets a developer skip them locally
    # with `-m "not slow"`.
    config.addinivalue_line("markers", "slow: slower test (XLA compile, subprocess); still run in CI")


# Under CI (the `CI` environment variable, set by CI and `.ci/run`) a skip is a failure: a missing optional
# dependency, ../shared absent or no root for the tmpfs mounts would otherwise pass silently with the feature
# untested. Only a skip whose reason starts with HARDWARE_SKIP (the processor lacks a feature) stays a skip.
HARDWARE_SKIP = "hardware:"


def _skip_reason(report):
    longrepr = report.longrepr
    return str(longrepr[2] if isinstance(longrepr, tuple) else longrepr)


def _fail_skip_in_ci(report):
    if not os.environ.get("CI") or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    if reason.removeprefix("Skipped: ").startswith(HARDWARE_SKIP):
        return
    report.outcome = "failed"
    report.longrepr = f"skipped under CI, which must run every test: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_skip_in_ci(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_skip_in_ci(outcome.get_result())


@pytest.fixture(scope="session")
def pretraining_records(tmp_path_factory, spm_model_file):
    """Pretraining TFRecords (max_seq_length 64, max_predictions_per_seq 10; a dozen or so instances) made by
    `create_pretraining_data` from `data/corpus/sample_text.txt` with dupe_factor 1.

    Returns (path, max_seq_length, max_predictions_per_seq).
    """
    from albert_tf.data.pretraining import PretrainingConfig, create_pretraining_data

    path = str(tmp_path_factory.mktemp("pretraining_records") / "sample.tfrecord")
    config = PretrainingConfig(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1, random_seed=7)
    create_pretraining_data(os.path.join(DATA_DIR, "corpus", "sample_text.txt"), [path],
                            spm_model_file=spm_model_file, config=config, num_workers=1)
    return path, 64, 10


@pytest.fixture(scope="session")
def mg_fixtures(tmp_path_factory):
    """tests/fixtures/model_garden/ (TF Model Garden's formats, see its README.md) with its three SavedModel
    archives extracted: {name: path} for `tf1`, `tf2_encoder`, `tf2_encoder_legacy`, `tf2_pretrainer`,
    `hub_encoder`, `hub_preprocess`, `tf1_hub_module`, `spm`, `config` (tf1/albert_config.json), `outputs`,
    `tf1_hub_outputs`, `preprocess_outputs` (the .npz files of recorded outputs) and `dir` (the folder)."""
    import tarfile

    source = os.path.join(FIXTURES_DIR, "model_garden")
    extracted = tmp_path_factory.mktemp("model_garden")
    paths = {"dir": source, "spm": os.path.join(source, "spm-1k.model"),
             "config": os.path.join(source, "tf1", "albert_config.json")}
    for name in ("tf1", "tf2_encoder", "tf2_encoder_legacy", "tf2_pretrainer"):
        paths[name] = os.path.join(source, name)
    for name in ("hub_encoder", "hub_preprocess", "tf1_hub_module"):
        with tarfile.open(os.path.join(source, name + ".tar.xz")) as tar:
            tar.extractall(extracted, filter="data")
        paths[name] = str(extracted / name)
    for name in ("outputs", "tf1_hub_outputs", "preprocess_outputs"):
        npz = os.path.join(source, ("model_garden_outputs" if name == "outputs" else name) + ".npz")
        paths[name] = npz
    return paths
