"""What many test files need: the repository's paths, tiny configs, subprocess environments, running a script,
and reading the weights of a checkpoint."""

import ast
import collections
import importlib.util
import os
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
SCRIPTS_DIR = os.path.join(REPO, "albert_tf", "scripts")

TINY = {"vocab_size": 30000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 128}


def tiny_config(**overrides):
    """A 2-layer ALBERT small enough for fast tests, with the real 30k vocabulary size."""
    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel

    return AlbertConfig(**{**TINY, **overrides})


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


def bench_script(name):
    """`bench/<name>.py` imported as a module (the benchmarks are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, "bench", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def log_tail(result, chars=4000):
    return (result.stdout + result.stderr)[-chars:]


FlagDefinition = collections.namedtuple("FlagDefinition", ["kind", "default", "help", "enum_values"])


def _literal(node):
    """A flag argument's value: a literal, `float("nan")`-style calls, else the source text (an expression such
    as `pretraining_data.DEFAULT_SHARD_SIZE_MB` or an f-string, which only a running script can evaluate)."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "float" and len(node.args) == 1:
        return float(ast.literal_eval(node.args[0]))
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)


def flag_definitions(path):
    """{name: FlagDefinition(kind, default, help, enum_values)} of the `flags.DEFINE_<kind>("name", default,
    ...)` calls in a source file, read without importing it (absl flags are global to a process). Float defaults
    are floats (as absl parses them)."""
    found = {}
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr.startswith("DEFINE_") and len(node.args) >= 2:
            kind = node.func.attr[len("DEFINE_"):]
            args = [_literal(a) for a in node.args]
            keywords = {k.arg: _literal(k.value) for k in node.keywords}
            enum_values = args[2] if kind == "enum" else None
            rest = args[3:] if kind == "enum" else args[2:]
            default = args[1]
            if kind == "float" and isinstance(default, int):
                default = float(default)
            found[args[0]] = FlagDefinition(kind, default, keywords.get("help", rest[0] if rest else None),
                                            enum_values)
    return found


def defined_flags(path):
    """{name: default} of the flags a source file defines (see `flag_definitions`)."""
    return {name: d.default for name, d in flag_definitions(path).items()}


SHARED_FLAG_GROUPS = {
    "define_tpu_flags()": ("use_tpu", "tpu_name", "tpu_zone", "gcp_project", "master", "num_tpu_cores"),
    "define_runtime_flags()": ("strategy", "mixed_precision", "jit_compile", "remat", "log_every"),
    "define_hub_module_flag()": ("albert_hub_module_handle",)}


def script_flag_definitions(name):
    """The `FlagDefinition`s of a script in albert_tf/scripts, with the shared ones of `albert_tf/cli.py` it
    calls in."""
    path = os.path.join(SCRIPTS_DIR, name)
    flags = flag_definitions(path)
    with open(path, encoding="utf-8") as f:
        source = f.read()
    shared = flag_definitions(os.path.join(REPO, "albert_tf", "cli.py"))
    for call, names in SHARED_FLAG_GROUPS.items():
        if call in source:
            flags.update({n: shared[n] for n in names})
    return flags


def script_flags(name):
    """The flags (and defaults) a script defines, with the shared ones of `albert_tf/cli.py` it calls in."""
    return {flag: d.default for flag, d in script_flag_definitions(name).items()}


def checkpoint_weights(prefix, startswith="model/"):
    """{variable key: array} of the model weights in a TF2 checkpoint (optimizer slots excluded)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name.startswith(startswith) and "VARIABLE_VALUE" in name and "/optimizer/" not in name}


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

