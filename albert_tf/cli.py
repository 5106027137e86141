"""What every script shares: the original's TPU flags and this project's runtime flags, the one mapping from
flags to a params dataclass, and the one way errors reach the user.

`run(main)` runs a script's `main` under absl: an `AlbertError` (bad flag, file, field, line or checkpoint)
prints as one line, `<script>: error: <message>`, with exit status 1 (2 for a `UsageError`); an OS error (a
missing, unreadable or unwritable file) likewise; SIGTERM is handled like Ctrl-C, so temporary outputs are
removed and worker processes stopped on the way out. Anything else is a bug and keeps its traceback.
"""

import dataclasses
import os
import signal
import sys

from absl import app, flags, logging

from albert_tf.errors import AlbertError, UsageError


def define_tpu_flags():
    """The original release's TPU flags (same names and defaults)."""
    flags.DEFINE_bool("use_tpu", False, "Whether to use TPU (same as --strategy=tpu).")
    flags.DEFINE_string("tpu_name", None, "The Cloud TPU to use: its name, grpc:// address, or 'local' on a "
                                          "TPU VM.")
    flags.DEFINE_string("tpu_zone", None, "GCE zone of the Cloud TPU (found from metadata if not given).")
    flags.DEFINE_string("gcp_project", None, "GCP project of the Cloud TPU (found from metadata if not given).")
    flags.DEFINE_string("master", None, "[Optional] TensorFlow master URL.")
    flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for compatibility and unused: TPUStrategy finds the cores "
                                             "itself.")


def define_runtime_flags():
    """Strategy, precision, compilation and memory flags this project adds."""
    from albert_tf.train.distribution import STRATEGIES  # pylint: disable=import-outside-toplevel

    flags.DEFINE_enum("strategy", "default", list(STRATEGIES),
                      "tf.distribute strategy: tpu, mirrored (GPUs of one machine), multi_worker (TF_CONFIG), "
                      "one_device, or default (no distribution).")
    flags.DEFINE_enum("mixed_precision", None, ["bf16", "fp16"],
                      "Mixed precision: bf16 (TPUs, recent GPUs) or fp16 (GPUs, with loss scaling).")
    flags.DEFINE_bool("jit_compile", False, "Compile the training step with XLA.")
    flags.DEFINE_bool("remat", False, "Recompute each Transformer block's activations in the backward pass "
                                      "instead of keeping them (less memory, more compute).")
    flags.DEFINE_integer("log_every", 100, "Log the training metrics every this many steps (0: quiet).")


def params_from_flags(params_cls, flag_values=None, defaults=None, **values):
    """`params_cls(**values)` with every other field taken from the flag of the same name.

    `defaults` (a dict) replaces the default of flags the user did not set (an embedded demo's settings).
    """
    flag_values = flag_values or flags.FLAGS
    defaults = defaults or {}
    for field in dataclasses.fields(params_cls):
        if field.name in values or field.name not in flag_values:
            continue
        flag = flag_values[field.name]
        values[field.name] = defaults[field.name] if field.name in defaults and not flag.present else flag.value
    return params_cls(**values)


def flag_value(name, defaults=None, flag_values=None):
    """A flag's value, or the `defaults` entry when the user did not set it."""
    flag = (flag_values or flags.FLAGS)[name]
    if defaults and name in defaults and not flag.present:
        return defaults[name]
    return flag.value


def define_hub_module_flag():
    """The original's `--albert_hub_module_handle`: here a TF-Hub ALBERT module downloaded to a local directory,
    whose weights initialise the model (as `--init_checkpoint` would)."""
    flags.DEFINE_string("albert_hub_module_handle", None, "A TF-Hub ALBERT module downloaded to a local directory: "
                                                          "its weights initialise the model (instead of "
                                                          "--init_checkpoint). Nothing is downloaded.")


def init_checkpoint(flag_values=None):
    """`--init_checkpoint`, or the local module directory of `--albert_hub_module_handle` (not both)."""
    flag_values = flag_values or flags.FLAGS
    handle = flag_values.albert_hub_module_handle
    if not handle:
        return flag_values.init_checkpoint
    if flag_values.init_checkpoint:
        raise UsageError("give --init_checkpoint or --albert_hub_module_handle, not both")
    if "://" in handle and not handle.startswith(("gs://", "file://")):
        raise UsageError(f"--albert_hub_module_handle {handle}: nothing is downloaded here; download the module, "
                         "extract it and pass its local directory")
    if not os.path.isdir(handle) and "://" not in handle:
        raise UsageError(f"--albert_hub_module_handle {handle} is not a directory (expected a TF-Hub module "
                         "downloaded and extracted to a local directory)")
    return handle


def _raise_interrupt(signum, frame):
    del signum, frame
    raise KeyboardInterrupt


def _one_line(err):
    text = getattr(err, "message", None) or str(err)
    return " ".join(text.split("\n")[0].split()) if text else type(err).__name__


def _guarded(main):
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "albert_tf"

    def guarded_main(argv):
        signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            return main(argv)
        except UsageError as err:
            logging.error("%s: %s", type(err).__name__, err)
            print(f"{script}: error: {_one_line(err)}", file=sys.stderr)
            sys.exit(2)
        except (AlbertError, OSError) as err:
            logging.error("%s: %s", type(err).__name__, err)
            detail = _one_line(err) if isinstance(err, AlbertError) else f"{err.strerror or err}: {err.filename}"
            print(f"{script}: error: {detail}", file=sys.stderr)
            sys.exit(1)
        except KeyboardInterrupt:
            print(f"{script}: interrupted; nothing partial was left behind", file=sys.stderr)
            sys.exit(130)

    return guarded_main


def run(main, usage=None):
    """`absl.app.run(main)` with the error handling described in the module docstring; `usage` (the script's
    docstring) is what `--help` prints, also when the script runs as an installed console command."""
    if usage:
        sys.modules["__main__"].__doc__ = usage
    app.run(_guarded(main))
