"""What the benchmarks share: their start-up, the paths they read, the machine's description, timing, subcommands,
child processes and the result file.

A benchmark imports this module before TensorFlow or albert_tf (`from bench.support import common`, run from the
checkout as `python -m bench.<name>`). Importing it selects Keras' TensorFlow backend and quiets TensorFlow's C++
log. It uses the standard library only (absl when a flag is defined), so the data benchmarks, which never load
TensorFlow, share it too.

Every run writes its figures as JSON (by default `bench/results/<benchmark>.json`) with the command that made them,
the date, the machine and the load average, so docs/benchmarks.md can cite a stored run rather than prose.
"""

import contextlib
import datetime
import json
import os
import platform
import resource
import shlex
import shutil
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS_DIR = os.path.join(REPO, "bench", "results")
FIGURES_DIR = os.path.join(REPO, "bench", "figures")
SPM_MODEL = os.path.join(REPO, "data", "30k-clean.model")
TINY_CONFIG = os.path.join(REPO, "data", "albert_config_tiny.json")
SHARED_DATA = os.path.join(REPO, "..", "shared", "data")  # the task data and books beside the checkout
GUTENBERG = os.path.join(SHARED_DATA, "corpus", "gutenberg")
SIMD_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "amx_tile",
              "amx_bf16", "amx_int8")

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def load_average():
    """The 1, 5 and 15 minute load averages as text: other processes slow every figure."""
    with contextlib.suppress(OSError):
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    return "unknown"


def cpu_description():
    """(CPU model, the SIMD flags of `SIMD_FLAGS` it has): matmul speed, float32 or bfloat16, depends on them."""
    model, cpu_flags = None, set()
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model is None:
                model = value.strip()
            elif key.strip() == "flags" and not cpu_flags:
                cpu_flags = set(value.split())
    return model or platform.processor() or "unknown CPU", [f for f in SIMD_FLAGS if f in cpu_flags]


def machine():
    """The machine as a result file records it."""
    model, simd = cpu_description()
    return {"cpu": model, "cpu_flags": simd, "cpus": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()}


def command():
    """This process's command line as a user types it in the checkout: `python -m bench.<name> <arguments>` for a
    module, `python <script> <arguments>` for a file."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    start = ["-m", spec.name] if spec is not None else [os.path.relpath(os.path.abspath(sys.argv[0]), REPO)]
    return " ".join(["python"] + [shlex.quote(arg) for arg in start + sys.argv[1:]])


def result_path(output=None, name=None):
    """`output`, or `bench/results/<name>.json` (`name`: the running module's)."""
    name = name or os.path.splitext(os.path.basename(sys.argv[0]))[0]
    return output or os.path.join(RESULTS_DIR, f"{name}.json")


def write_result(figures, output=None, name=None):
    """Writes `figures` (a JSON-able dict) with the command, date, machine and load average to
    `result_path(output, name)`, atomically (a killed run leaves the previous file); returns the path."""
    path = result_path(output, name)
    result = {"command": command(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": machine(), "load_average_at_end": load_average(), **figures}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2, default=float)
        f.write("\n")
    os.replace(tmp, path)
    print(f"wrote {path}")
    return path


def write_report(text, output=None):
    """Prints a diagnostic's text report and, given `output`, writes it there too after the command that made it
    and a blank line, atomically (a killed run leaves the previous file)."""
    print(text, end="")
    if output:
        tmp = f"{output}.tmp-{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(f"{command()}\n\n{text}")
        os.replace(tmp, output)


def define_output_json(name):
    """The `--output_json` flag of a benchmark whose figures go to `bench/results/<name>.json` by default."""
    from absl import flags  # pylint: disable=import-outside-toplevel

    flags.DEFINE_string("output_json", None, f"Where the figures go (default: bench/results/{name}.json).")


def define_work_dir(what):
    """The `--work_dir` flag: where `what` go (default: a temporary folder, removed at the end)."""
    from absl import flags  # pylint: disable=import-outside-toplevel

    flags.DEFINE_string("work_dir", None, f"Where {what} go (default: a temporary folder, removed at the end).")


@contextlib.contextmanager
def scratch_dir(path, prefix):
    """Yields `path` (made if missing, kept), or a new temporary folder named `prefix`... that is removed after."""
    if path:
        os.makedirs(path, exist_ok=True)
        yield path
        return
    work = tempfile.mkdtemp(prefix=prefix)
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def save_figure(fig, path, **savefig_args):
    """Writes a matplotlib figure to `path` (its folder made first) and closes it."""
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, **savefig_args)
    plt.close(fig)


def module_command(module, *args):
    """The command line that runs `module` (e.g. "bench.bench_model") with `args` in a child Python process."""
    return [sys.executable, "-m", module, *args]


def child_env(**overrides):
    """The environment of a child process: this one's, with the checkout importable wherever the child starts."""
    path = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, **overrides}


def run_subcommands(subcommands, default):
    """Runs a benchmark's subcommand: {name: run(argv)}, chosen by the first argument (the others are its own),
    `default` when the first argument names none. `sys.argv` is left whole, so the result records the command."""
    explicit = len(sys.argv) > 1 and sys.argv[1] in subcommands
    name = sys.argv[1] if explicit else default
    return subcommands[name]([sys.argv[0]] + sys.argv[2 if explicit else 1:])


def absl_subcommand(define_flags, main):
    """A subcommand for `run_subcommands` that defines its absl flags, then runs `main` under `absl.app`."""
    def run(argv):
        from absl import app  # pylint: disable=import-outside-toplevel

        define_flags()
        app.run(main, argv=argv)

    return run


def time_calls(fn, calls):
    """Seconds of each of `calls` calls of `fn()`; `fn` must return only once its work is done (e.g. read its
    output back with `np.asarray`)."""
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


class CallCost:
    """This process's cost, as one call of a resumable run: `record(step)` rewrites `<run_dir>/call-<tag><ns>.json`
    with the step reached, the wall seconds since the call began and the process's CPU seconds, so a call stopped
    before its end (a session's end, a kill) still counts up to its last record. Record at every checkpoint: the work
    after the last one is done again by the next call. `total` sums a run's calls."""

    def __init__(self, run_dir, tag=""):
        self.start = time.time()
        self.path = os.path.join(run_dir, f"call-{tag}{time.time_ns()}.json")

    def record(self, step, **extra):
        usage = resource.getrusage(resource.RUSAGE_SELF)
        figures = {"step": int(step), "wall_seconds": time.time() - self.start,
                   "cpu_seconds": usage.ru_utime + usage.ru_stime, **extra}
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        partial = os.path.join(os.path.dirname(self.path), "." + os.path.basename(self.path) + ".partial")
        with open(partial, "w", encoding="utf-8") as f:
            json.dump(figures, f)
        os.replace(partial, self.path)

    @staticmethod
    def total(run_dir):
        """{"cpu_seconds", "wall_seconds"} summed over every call of the run in `run_dir` (0 before the first)."""
        sums = {"cpu_seconds": 0.0, "wall_seconds": 0.0}
        names = sorted(os.listdir(run_dir)) if os.path.isdir(run_dir) else []
        for name in names:
            if name.startswith("call-") and name.endswith(".json"):
                with open(os.path.join(run_dir, name), encoding="utf-8") as f:
                    call = json.load(f)
                for key in sums:
                    sums[key] += call[key]
        return sums
