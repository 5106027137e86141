"""What the bench/ scripts share: their start-up, the machine's description, timing, and the result file.

A script imports this module before TensorFlow or albert_tf (`import common`: Python puts the script's own folder,
bench/, first on `sys.path`). Importing it selects Keras' TensorFlow backend, quiets TensorFlow's C++ log and makes
the checkout's `albert_tf` importable. It uses the standard library only, so the data benchmarks, which never load
TensorFlow, share it too.

Every run writes its figures as JSON (by default `bench/results/<script>.json`) with the command that made them,
the date, the machine and the load average, so docs/benchmarks.md can cite a stored run rather than prose.
"""

import contextlib
import datetime
import json
import os
import platform
import shlex
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_DIR = os.path.join(REPO, "bench", "results")
SIMD_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "amx_tile",
              "amx_bf16", "amx_int8")

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if REPO not in sys.path:
    sys.path.insert(0, REPO)


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
    """This process's command line as a user types it from the checkout: `python bench/<script>.py <flags>`."""
    script = os.path.relpath(os.path.abspath(sys.argv[0]), REPO)
    return " ".join(["python", shlex.quote(script)] + [shlex.quote(arg) for arg in sys.argv[1:]])


def result_path(output=None):
    """`output`, or `bench/results/<script>.json` for the running script."""
    name = os.path.splitext(os.path.basename(sys.argv[0]))[0]
    return output or os.path.join(RESULTS_DIR, f"{name}.json")


def write_result(figures, output=None):
    """Writes `figures` (a JSON-able dict) with the command, date, machine and load average to `result_path(output)`,
    atomically (a killed run leaves the previous file); returns the path."""
    path = result_path(output)
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


def time_calls(fn, calls):
    """Seconds of each of `calls` calls of `fn()`; `fn` must return only once its work is done (e.g. read its
    output back with `np.asarray`)."""
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times
