"""What many test files need: the repository's paths, tiny configs, subprocess environments, running a script,
and reading the weights of a checkpoint."""

import collections
import contextlib
import functools
import hashlib
import json
import os
import re
import subprocess
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_DIR = os.path.join(REPO, "data")
FIXTURES_DIR = os.path.join(REPO, "tests", "fixtures")
SHARED_DATA = os.path.join(os.path.dirname(REPO), "shared", "data")
SPM = os.path.join(DATA_DIR, "30k-clean.model")
SAMPLE_GLUE = os.path.join(DATA_DIR, "glue")
SAMPLE_RACE = os.path.join(DATA_DIR, "race")
SQUAD_V1 = os.path.join(DATA_DIR, "squad", "dev-v1.1-sample.json")
SQUAD_V2 = os.path.join(DATA_DIR, "squad", "dev-v2.0-small.json")

TINY = {"vocab_size": 30000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 128}


def tiny_sentencepiece(path, lines, vocab_size=300, **options):
    """Trains a small SentencePiece model on `lines` into `path` (returned as a str), with the original's special
    pieces: `<pad>` 0, `<unk>` 1, then `[CLS]`, `[SEP]`, `[MASK]` as control pieces. `options` go to the trainer
    (user-defined pieces, `add_dummy_prefix`, `byte_fallback`, ...)."""
    import sentencepiece  # pylint: disable=import-outside-toplevel

    options = {"model_type": "unigram", "num_threads": 1, "minloglevel": 2, "character_coverage": 1.0, **options}
    with open(path, "wb") as writer:
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_writer=writer, vocab_size=vocab_size, pad_id=0, unk_id=1, bos_id=-1,
            eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"], **options)
    return str(path)


def tiny_config(**overrides):
    """A 2-layer ALBERT small enough for fast tests, with the real 30k vocabulary size."""
    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel

    return AlbertConfig(**{**TINY, **overrides})


def sst2_classifier_params(output_dir, **overrides):
    """`ClassifierParams` of a two-step SST-2 run of the tiny model on the shipped GLUE sample (`overrides` win)."""
    from albert_tf.tasks.classification import ClassifierParams  # pylint: disable=import-outside-toplevel

    values = dict(albert_config=tiny_config(), output_dir=str(output_dir), task_name="sst-2", data_dir=SAMPLE_GLUE,
                  spm_model_file=SPM, max_seq_length=32, train_batch_size=8, eval_batch_size=50,
                  predict_batch_size=25, learning_rate=1e-3, train_step=2, save_checkpoints_steps=2,
                  iterations_per_loop=2, log_every=0, do_train=True)
    values.update(overrides)
    return ClassifierParams(**values)


def write_config(config, path):
    config.to_json_file(str(path))
    return str(path)


def subprocess_env(**extra):
    """The environment of a script run by a test: this checkout first on PYTHONPATH, quiet TF, no GPU, no
    inherited TF_CONFIG."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env.update(PYTHONPATH=REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
               TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="-1", KERAS_BACKEND="tensorflow")
    env.update(extra)
    return env


def flag_args(**values):
    """`--name=value` arguments (`--name` for True, `--name=False` for False, nothing for None)."""
    args = []
    for name, value in values.items():
        if value is True:
            args.append(f"--{name}")
        elif value is not None:
            args.append(f"--{name}={value}")
    return args


def run_script(script, args, timeout=600, **env):
    """Runs a top-level script of the checkout with `args`; returns the `CompletedProcess` (text)."""
    return subprocess.run([sys.executable, os.path.join(REPO, script), *args], cwd=REPO, env=subprocess_env(**env),
                          capture_output=True, text=True, timeout=timeout, check=False)


def _as_given(value, text):
    """Whether the recorded `value` is what the flag's `text` gives."""
    if isinstance(value, bool):
        return value == (text.lower() in ("", "true", "1"))
    if isinstance(value, (int, float)):
        return float(text) == value
    if isinstance(value, list):
        return ",".join(map(str, value)) == text
    return value == text


def assert_recorded(record, script, args):
    """The settings record at `record` is the one a run of `script` with `args` wrote: its command line, every
    flag of `args` among the settings with the value given, and the versions of albert_tf, TensorFlow and Keras.
    Returns the recorded settings."""
    import keras  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    import albert_tf  # pylint: disable=import-outside-toplevel

    with open(record, encoding="utf-8") as f:
        recorded = json.load(f)
    assert recorded["command"] == [os.path.join(REPO, script), *args]
    for arg in args:
        name, _, text = arg.lstrip("-").partition("=")
        assert name in recorded["settings"], f"{record}: --{name} not recorded"
        assert _as_given(recorded["settings"][name], text), (name, recorded["settings"][name], text)
    assert recorded["versions"] == {"albert_tf": albert_tf.__version__, "tensorflow": tf.__version__,
                                    "keras": keras.__version__}
    return recorded["settings"]


# What TensorFlow and absl write to stderr on their own (not a message of the script's).
_LOG_LINE = re.compile(r"^([IWEF]\d{4} |WARNING: All log messages|To enable the following instructions|"
                       r"INFO:tensorflow:|\s*$)")


def error_lines(stderr):
    """The lines of `stderr` that are not TensorFlow's or absl's log lines."""
    return [line for line in stderr.splitlines() if not _LOG_LINE.match(line)]


def assert_one_line_error(result, *names, status=(1, 2)):
    """`result` (a script's `CompletedProcess`) failed as a user should see it: exit status in `status`, no
    traceback, and exactly one line on stderr of the form `<script>: error: ...` that names each of `names`."""
    tail = log_tail(result)
    assert result.returncode in ((status,) if isinstance(status, int) else status), tail
    assert "Traceback" not in result.stderr, tail
    lines = error_lines(result.stderr)
    assert len(lines) == 1 and ": error: " in lines[0], tail
    for name in names:
        assert str(name) in lines[0], (name, lines[0])
    return lines[0]


def tree_snapshot(*roots):
    """{path: sha256} of every file under `roots` (hidden ones included), and {dir: None} for every directory:
    what a run must leave unchanged."""
    snapshot = {}
    for root in map(str, roots):
        if os.path.isfile(root):
            with open(root, "rb") as f:
                snapshot[root] = hashlib.sha256(f.read()).hexdigest()
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            snapshot[dirpath] = None
            for name in filenames:
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    snapshot[path] = hashlib.sha256(f.read()).hexdigest()
    return snapshot


def make_files(root, *names, content=b""):
    """Writes each of `names` (paths relative to `root`, folders made as needed) holding `content`; returns
    `root` as a string (made even without names)."""
    os.makedirs(root, exist_ok=True)
    for name in names:
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content)
    return str(root)


def written_entries(folder):
    """The sorted entries of a folder albert_tf wrote whole, its `.albert_tf/` left out, once its manifest is seen to
    list exactly the files in it (nothing foreign, nothing missing)."""
    from albert_tf import fileio  # pylint: disable=import-outside-toplevel

    folder = str(folder)
    assert fileio.foreign_files(folder) == [], fileio.foreign_files(folder)
    with open(os.path.join(folder, ".albert_tf", "manifest.json"), encoding="utf-8") as f:
        assert json.load(f)["files"] == fileio._tree_files(folder)  # pylint: disable=protected-access
    return sorted(name for name in os.listdir(folder) if name != ".albert_tf")


def leftovers(root):
    """Paths under `root` that only a failed or killed write leaves: staging directories (`.albert_tf`, but for
    one holding only the manifest of a directory written whole), partial files and TF's `_temp` checkpoint
    directories."""
    found = []
    for dirpath, dirnames, filenames in os.walk(str(root)):
        for name in dirnames + filenames:
            if name == ".albert_tf" and os.listdir(os.path.join(dirpath, name)) == ["manifest.json"]:
                continue
            if name == ".albert_tf" or ".partial-" in name or re.search(r"_temp(_[0-9a-f]+)?$", name):
                found.append(os.path.join(dirpath, name))
    return found


@contextlib.contextmanager
def tmpfs(path, size="1m", read_only=False):
    """A tmpfs of `size` mounted at `path` (created), unmounted afterwards: a separate filesystem (a mount
    point, as a Docker volume is), a full disk, or with `read_only` one that even root cannot write. Skips the
    test where mounting is not allowed (CI runs as root, where it is)."""
    import pytest  # pylint: disable=import-outside-toplevel

    os.makedirs(path, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True)
        yield str(path)
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def log_tail(result, chars=4000):
    return (result.stdout + result.stderr)[-chars:]


FlagDefinition = collections.namedtuple("FlagDefinition", ["kind", "default", "help", "enum_values"])

# Imports the script named by argv[1] and collects `defined`: {name: [kind, default, help, enum values]} of the
# flags albert_tf's modules define (code for a separate process; absl flags are global to a process).
COLLECT_SCRIPT_FLAGS = """
import importlib, json, sys
from absl import flags
importlib.import_module("albert_tf.scripts." + sys.argv[1])
defined = {}
for module, module_flags in flags.FLAGS.flags_by_module_dict().items():
    if module.startswith("albert_tf."):
        for flag in module_flags:
            choices = getattr(flag.parser, "enum_values", None)
            defined[flag.name] = ["enum" if choices else flag.flag_type(), flag.default, flag.help, choices]
"""
_DUMP_FLAGS = COLLECT_SCRIPT_FLAGS + "print(json.dumps(defined))\n"


@functools.lru_cache(maxsize=None)
def script_flag_definitions(script):
    """{name: FlagDefinition} of the flags `albert_tf/scripts/<script>` defines, with the shared ones of
    `albert_tf/cli.py` it calls in, as absl holds them after importing the script in a separate process (absl
    flags are global to a process)."""
    result = subprocess.run([sys.executable, "-c", _DUMP_FLAGS, script.removesuffix(".py")], cwd=REPO,
                            env=subprocess_env(), capture_output=True, text=True, timeout=300, check=True)
    return {name: FlagDefinition(*values) for name, values in json.loads(result.stdout).items()}


def checkpoint_weights(prefix):
    """{variable key: array} of the model's weights in a TF2 checkpoint the runner wrote: those named under
    `model/`, and those named through the optimizer's list of the variables it trains
    (`optimizer/_trainable_variables/N`: the encoder's, in these checkpoints); optimizer slots and counters
    excluded."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name.startswith(("model/", "optimizer/_trainable_variables/")) and "VARIABLE_VALUE" in name
            and "/optimizer/" not in name}


def padded_batch(batch=3, length=20, seed=1):
    """(input_ids, input_mask, segment_ids), int32 [batch, length], batch >= 3: random ids after [CLS], two
    segments, row 1 padded after 12 tokens and row 2 after 5 (so masks and segments matter)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 30000, (batch, length)).astype("int32")
    ids[:, 0] = 2  # [CLS]
    mask = np.ones((batch, length), "int32")
    mask[1, 12:] = 0
    mask[2, 5:] = 0
    segments = np.zeros((batch, length), "int32")
    segments[:, 8:] = 1
    return ids, mask, segments


def randomize(model, seed=0, scale=0.3):
    """Sets every weight of `model` to random values far from its initialisation (so that a wrong mapping of any
    one weight changes the outputs)."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        shape = tuple(variable.shape)
        if "gamma" in variable.path:
            value = 1.0 + rng.uniform(-0.2, 0.2, shape)
        else:
            value = rng.normal(0.0, scale, shape)
        variable.assign(value.astype(np.dtype(variable.dtype)))
    return model


def onednn_enabled():
    """Whether this TensorFlow runs its oneDNN kernels and graph fusions (the default on x86 Linux)."""
    from tensorflow.python.util import _pywrap_util_port  # pylint: disable=import-outside-toplevel

    return bool(_pywrap_util_port.IsMklEnabled())


def executed_op_types(fn, *args):
    """Calls `fn(*args)` (a tf.function) and counts the op types of the graphs TensorFlow ran for it, after its
    graph optimiser's rewrites and fusions: a Counter {op type: nodes}."""
    from tensorflow.python.eager import context  # pylint: disable=import-outside-toplevel

    context.enable_run_metadata()
    try:
        fn(*args)
        metadata = context.export_run_metadata()
    finally:
        context.disable_run_metadata()
    return collections.Counter(node.op for graph in metadata.function_graphs
                               for partition in graph.partition_graphs for node in partition.node)



def parallel_stage_orders(dataset):
    """The `deterministic` setting (b"true", b"false" or b"default") of every parallel map and interleave of a
    `tf.data` pipeline, read from its serialised graph: whether a stage may yield out of order can only be seen
    there (a race shows up in no small test)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    graph = tf.compat.v1.GraphDef.FromString(
        tf.raw_ops.DatasetToGraphV2(input_dataset=dataset._variant_tensor).numpy())  # pylint: disable=protected-access
    nodes = list(graph.node) + [node for function in graph.library.function for node in function.node_def]
    return [node.attr["deterministic"].s for node in nodes if "deterministic" in node.attr]


# The first lines of a fresh interpreter whose one CPU is split into two logical devices (a MirroredStrategy's two
# replicas on a machine without accelerators); TensorFlow allows it only before it starts.
TWO_CPUS = """
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
"""


def json_on_two_cpus(code, timeout=300):
    """Runs `TWO_CPUS` then `code` in a fresh interpreter and returns the JSON its last line of output prints."""
    out = subprocess.run([sys.executable, "-c", TWO_CPUS + code], env=subprocess_env(), capture_output=True,
                         text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def lock_held_elsewhere(directory, what):
    """Another process holding `fileio.DirectoryLock(directory, what)` for the block; yields its pid."""
    code = ("import sys, time\nfrom albert_tf import fileio\n"
            "with fileio.DirectoryLock(sys.argv[1], sys.argv[2]):\n"
            "    print('locked', flush=True)\n    time.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(directory), what], stdout=subprocess.PIPE, text=True,
                              env=subprocess_env())
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()
