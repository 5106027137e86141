"""What every script shares: the original's TPU flags and this project's runtime flags, the flags generated from a
params dataclass's `albert_tf.settings` fields and the one mapping back from flags to params, and the one way
errors reach the user.

`run(main)` runs a script's `main` under absl, inside `albert_tf.guard.guarded` over the settings the script
declared (their bounds, its inputs and outputs, the outputs' locks): a flag absl cannot parse (a malformed number
or bool, an unknown flag, a value outside an enum's choices) and a `UsageError` (a flag missing, out of bounds,
contradicting another, not fitting the model) print as one line, `<script>: error: <message>` naming the flag,
with exit status 2; an `AlbertError` (bad file, field, line or checkpoint) and an OS error (a missing, unreadable
or unwritable file) likewise with exit status 1. `--help` lists the script's own flags, `--helpfull` all. SIGTERM is
handled like Ctrl-C, so temporary outputs are removed and worker processes stopped on the way out. Anything else is a bug and keeps its
traceback.
"""

import dataclasses
import json
import os
import re
import signal
import sys

from absl import app, flags, logging

from albert_tf import guard
from albert_tf.errors import AlbertError, MissingDataError, UsageError
from albert_tf.settings import FlagSpec, flag_specs


def define_tpu_flags():
    """The original release's TPU flags (same names and defaults), generated from `train.runner.RuntimeParams`."""
    from albert_tf.train.runner import TPU_SETTINGS, RuntimeParams  # pylint: disable=import-outside-toplevel

    define_flags(RuntimeParams, only=TPU_SETTINGS)


def define_runtime_flags():
    """Strategy, precision, compilation and memory flags this project adds: the other settings of
    `train.runner.RuntimeParams`."""
    from albert_tf.train.runner import TPU_SETTINGS, RuntimeParams  # pylint: disable=import-outside-toplevel

    define_flags(RuntimeParams, exclude=TPU_SETTINGS)


def runtime_settings():
    """The settings of `train.runner.RuntimeParams`, which every task's params inherit: `define_tpu_flags` and
    `define_runtime_flags` define their flags, so a training script leaves them out of its params' `define_flags`."""
    from albert_tf.train.runner import RuntimeParams  # pylint: disable=import-outside-toplevel

    return tuple(flag_specs(RuntimeParams))


# {flag name: FlagSpec} of every flag defined from a setting in this process: what `run` hands to the guard.
DECLARED = {}

_DEFINE = {"bool": flags.DEFINE_bool, "integer": flags.DEFINE_integer, "float": flags.DEFINE_float,
           "string": flags.DEFINE_string, "list": flags.DEFINE_list}


def define_flags(params_cls, flag_values=None, only=None, exclude=()):
    """Defines an absl flag for every `albert_tf.settings.setting` field of `params_cls` (those named in `only`
    when given, less those in `exclude`), as if the calling module had defined it, so that `--help` lists it
    among the script's own flags."""
    flag_values = flags.FLAGS if flag_values is None else flag_values  # an empty FlagValues is falsy
    module_name = sys._getframe(1).f_globals["__name__"]  # pylint: disable=protected-access
    for name, spec in flag_specs(params_cls).items():
        if (only is not None and name not in only) or name in exclude:
            continue
        if flag_values is flags.FLAGS:
            DECLARED[spec.name] = spec
        if spec.kind == "enum":
            flags.DEFINE_enum(spec.name, spec.default, list(spec.choices), spec.help, flag_values=flag_values,
                              module_name=module_name)
        else:  # a list default is copied, so that changing the flag's value leaves the setting's alone
            default = list(spec.default) if spec.kind == "list" and spec.default is not None else spec.default
            _DEFINE[spec.kind](spec.name, default, spec.help, flag_values=flag_values, module_name=module_name)


def params_from_flags(params_cls, flag_values=None, **values):
    """`params_cls(**values)` with every other field taken from its flag: the one its `setting` names, else the
    flag of the field's name."""
    flag_values = flags.FLAGS if flag_values is None else flag_values
    specs = flag_specs(params_cls)
    for field in dataclasses.fields(params_cls):
        name = specs[field.name].name if field.name in specs else field.name
        if field.name in values or name not in flag_values:
            continue
        value = flag_values[name].value
        spec = specs.get(field.name)
        if spec is not None and spec.items is not None and value is not None:
            value = guard.list_items(name, spec, value)
        values[field.name] = value
    return params_cls(**values)


# The checkout this package is in: the scripts' embedded demos read its data/ folder and write under its runs/.
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(CHECKOUT, "data")


def demo_preset(name):
    """The flag defaults of a script's embedded demo, read from `data/demos/<name>.json` of the checkout: its
    "flags" as they are, its "paths" (relative to the checkout) made absolute. A UsageError where there is no
    checkout's data/ folder (an installed package)."""
    if not os.path.isdir(DATA):
        raise UsageError(f"the embedded demo needs the data/ folder of a checkout of this repository ({DATA} is "
                         "missing); run it from a clone, or give your own data flags")
    with open(os.path.join(DATA, "demos", f"{name}.json"), encoding="utf-8") as f:
        preset = json.load(f)
    paths = {flag: os.path.join(CHECKOUT, *path.split("/")) for flag, path in preset["paths"].items()}
    return {**paths, **preset["flags"]}


@dataclasses.dataclass(frozen=True)
class Demo:
    """A script's embedded demo, run when the user leaves out `--<when_missing>`: the flags of
    `data/demos/<preset>.json` (`demo_preset`) take the place of the defaults of every flag the user did not set,
    before the guard, so that a demo's files are checked and locked as any run's. `unless_given`: (flag, other)
    pairs; the preset's `--flag` is left out when the user gives `--other`."""

    preset: str
    when_missing: str
    unless_given: tuple = ()


# Whether this process runs its script's embedded demo (`apply_demo`).
DEMO_RUNNING = []


def apply_demo(demo, flag_values=None):
    """Sets the flags of `demo`'s preset that the user did not set, when its `when_missing` flag is not given.
    Returns whether the demo runs (also kept in `DEMO_RUNNING`, which `demo_running` reads)."""
    flag_values = flags.FLAGS if flag_values is None else flag_values
    if demo is None or flag_values[demo.when_missing].value:
        return False
    skipped = {name for name, other in demo.unless_given if flag_values[other].present}
    for name, value in demo_preset(demo.preset).items():
        if not flag_values[name].present and name not in skipped:
            flag_values[name].value = value
    DEMO_RUNNING.append(demo.preset)
    return True


def demo_running():
    """Whether `cli.run` set this process's flags from its script's embedded demo."""
    return bool(DEMO_RUNNING)


def define_hub_module_flag():
    """The original's `--albert_hub_module_handle`: here a TF-Hub ALBERT module downloaded to a local directory,
    whose weights initialise the model (as `--init_checkpoint` would)."""
    spec = FlagSpec("string", "albert_hub_module_handle", None, "A TF-Hub ALBERT module downloaded to a local "
                    "directory: its weights initialise the model (instead of --init_checkpoint). Nothing is "
                    "downloaded.", role="input_tree")
    flags.DEFINE_string(spec.name, spec.default, spec.help)
    DECLARED[spec.name] = spec


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
    if not os.path.isdir(handle) and "://" not in handle:  # a missing input (status 1), as a missing checkpoint
        raise MissingDataError(f"--albert_hub_module_handle {handle} is not a directory (expected a TF-Hub module "
                               "downloaded and extracted to a local directory)")
    return handle


def _raise_interrupt(signum, frame):
    del signum, frame
    raise KeyboardInterrupt


def _one_line(err):
    text = getattr(err, "message", None) or str(err)
    return " ".join(text.split("\n")[0].split()) if text else type(err).__name__


def _script():
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "albert_tf"


# absl's messages for a value its parser refuses: "flag --name=value: <the parser's error>".
_ABSL_VALUE_ERROR = re.compile(r"^flag --(?P<name>[\w.-]+)=(?P<value>.*): (?P<detail>invalid literal for int\(\).*|"
                               r"could not convert string to float.*|\('Non-boolean argument.*|"
                               r"value should be one of <.*>)$")


def flag_error_message(err):
    """absl's message for a flag it cannot parse or validate, as one line that names the flag as it is typed
    (`--name`)."""
    if isinstance(err, flags.UnrecognizedFlagError):
        message = f"unknown flag --{err.flagname}"
        suggestions = str(err).partition(". Did you mean: ")[2].rstrip(" ?")
        if suggestions:
            message += f" (did you mean {', '.join('--' + s.strip() for s in suggestions.split(','))}?)"
        return message
    message = _one_line(err)
    found = _ABSL_VALUE_ERROR.match(message)
    if not found:
        return message
    name, value, detail = found.group("name", "value", "detail")
    if detail.startswith("invalid literal for int()"):
        detail = "not an integer"
    elif detail.startswith("could not convert string to float"):
        detail = "not a number"
    elif detail.startswith("('Non-boolean"):
        detail = "not a boolean (true or false)"
    else:
        detail = "must be one of " + ", ".join(detail[len("value should be one of <"):].rstrip(">").split("|"))
    return f"--{name}={value}: {detail}"


def parse_flags(argv, flag_values=None):
    """`flag_values(argv)` (the global FLAGS by default), a flag absl refuses printed as one line
    `<script>: error: ...` with exit status 2; the arguments left over, as absl's parser returns them."""
    try:
        return (flag_values or flags.FLAGS)(argv)
    except flags.Error as err:
        print(f"{_script()}: error: {flag_error_message(err)}", file=sys.stderr)
        sys.exit(2)


def given_flags(argv, flag_values=None):
    """The names of the flags in `argv`, in the order given (`--no<name>` as `<name>`)."""
    flag_values = flags.FLAGS if flag_values is None else flag_values
    names = []
    for arg in argv[1:]:
        if arg == "--":
            break
        if arg.startswith("-"):
            name = arg.lstrip("-").split("=", 1)[0]
            if name not in flag_values and name.startswith("no") and name[2:] in flag_values:
                name = name[2:]
            names.append(name)
    return names


def refuse_arguments(args):
    """`UsageError` for positional arguments (`args` as absl leaves them: the program's name first)."""
    if len(args) > 1:
        raise UsageError(f"unexpected arguments: {' '.join(args[1:])}")


def _worker_task(values):
    """'<type>-<index>' of this process in a multi-worker job (`--strategy=multi_worker` and TF_CONFIG), whose
    processes all name the same outputs; None otherwise (a TF_CONFIG that is not JSON is reported by the run)."""
    if values.get("strategy") != "multi_worker":
        return None
    try:
        task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task", {})
        return f"{task.get('type', 'worker')}-{int(task.get('index', 0))}"
    except (ValueError, AttributeError, TypeError):
        return None


def guarded_settings(argv, flag_values=None, declared=None):
    """`albert_tf.guard.guarded` over the settings this process declared (or `declared`: {flag name: FlagSpec},
    defined in `flag_values`), with their flags' values."""
    flag_values = flags.FLAGS if flag_values is None else flag_values
    declared = DECLARED if declared is None else declared
    values = {name: flag_values[name].value for name in declared if name in flag_values}
    return guard.guarded(declared, values, given_flags(argv, flag_values), lock_tag=_worker_task(values),
                         command=argv)


def _quiet_tensorflow():
    """After an error's one line: TensorFlow's own warnings at exit (a checkpoint's unrestored values) are noise."""
    tf = sys.modules.get("tensorflow")
    if tf is not None and hasattr(tf, "get_logger"):
        tf.get_logger().setLevel("ERROR")


def _guarded(main, demo=None):
    script = _script()

    def guarded_main(argv):
        signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            refuse_arguments(argv)
            apply_demo(demo)
            with guarded_settings(sys.argv):
                return main(argv)
        except UsageError as err:
            logging.debug("%s: %s", type(err).__name__, err)
            print(f"{script}: error: {_one_line(err)}", file=sys.stderr)
            _quiet_tensorflow()
            sys.exit(2)
        except flags.Error as err:  # a flag set in code that its validator refuses
            logging.debug("%s: %s", type(err).__name__, err)
            print(f"{script}: error: {flag_error_message(err)}", file=sys.stderr)
            _quiet_tensorflow()
            sys.exit(2)
        except (AlbertError, OSError) as err:
            logging.debug("%s: %s", type(err).__name__, err)
            if isinstance(err, AlbertError):
                detail = _one_line(err)
            else:
                detail = f"{err.strerror or err}" + (f": {err.filename}" if err.filename else "")
            print(f"{script}: error: {detail}", file=sys.stderr)
            _quiet_tensorflow()
            sys.exit(1)
        except KeyboardInterrupt:
            print(f"{script}: interrupted; nothing partial was left behind", file=sys.stderr)
            sys.exit(130)

    return guarded_main


def own_flags_key_to_main(flag_values=None):
    """Makes every flag this project defined key to the main module, which is what absl's `--help` lists: a
    script's flags are defined in `albert_tf.scripts.*` (and `albert_tf.cli` for the shared ones), not in the
    `run_*.py` shim or console command that runs it, so `--help` would otherwise list none of them."""
    flag_values = flags.FLAGS if flag_values is None else flag_values
    for module, module_flags in flag_values.flags_by_module_dict().items():
        if module.split(".")[0] in ("albert_tf", "__main__"):  # __main__: `python -m albert_tf.convert`
            for flag in module_flags:
                flag_values.register_key_flag_for_module(sys.argv[0], flag)


def run(main, usage=None, demo=None):
    """`absl.app.run(main)` with the error handling described in the module docstring; `usage` (the script's
    docstring) is what `--help` prints, with the script's own flags, also when the script runs as an installed
    console command; `demo`: the script's embedded `Demo`, if it has one."""
    if usage:
        sys.modules["__main__"].__doc__ = usage
    own_flags_key_to_main()
    app.run(_guarded(main, demo), flags_parser=parse_flags)


def console_command(main, usage, demo=None):
    """A script's console command (`albert-*`, and what its `run_*.py` shim calls): `run(main, usage, demo)`."""

    def command():
        run(main, usage, demo)

    command.__doc__ = f"The console command: `{main.__module__}.main` under `albert_tf.cli.run`."
    return command
