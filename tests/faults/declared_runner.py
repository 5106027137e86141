"""Runs one script's cases in one process: `python -m tests.faults.declared_runner SCRIPT` prints the script's
declared settings as JSON; with `--cases FILE` (a JSON list of {"argv": [...], "hold": [[flag, path, role]]}) it
runs each argv the way the script's command does (flags parsed by `cli.parse_flags`, then `main` under the same
guard and error handling as `cli.run`) while this process holds the locks named in "hold" from a child process,
and prints [{"status": ..., "stderr": ...}] as JSON. One TensorFlow import serves every case of a script."""

import contextlib
import dataclasses
import importlib
import io
import json
import multiprocessing
import sys

from absl import flags


def declarations(script):
    module = importlib.import_module(f"albert_tf.scripts.{script}")
    from albert_tf import cli  # pylint: disable=import-outside-toplevel

    return module, {name: dataclasses.asdict(spec) for name, spec in cli.DECLARED.items()}


def _hold(held_flag, ready, done):
    """Holds the locks the guard takes for one output flag's value, as another run of the script would."""
    from albert_tf import cli, guard  # pylint: disable=import-outside-toplevel

    flag, path, _ = held_flag
    name = flag.lstrip("-")
    _, outputs = guard.declared_files({name: cli.DECLARED[name]}, {name: path})
    with contextlib.ExitStack() as stack:
        for out_flag, out_path, spec in outputs:
            stack.enter_context(guard._lock(out_flag, out_path, spec))  # pylint: disable=protected-access
        ready.set()
        done.wait(120)


@contextlib.contextmanager
def held(locks):
    """Each lock of `locks` held by another process (fork) for the block, as a second run would hold it."""
    context = multiprocessing.get_context("fork")
    done = context.Event()
    holders = []
    for spec in locks:
        ready = context.Event()
        process = context.Process(target=_hold, args=(spec, ready, done))
        process.start()
        ready.wait(60)
        holders.append(process)
    try:
        yield [p.pid for p in holders]
    finally:
        done.set()
        for process in holders:
            process.join(60)


def run_case(module, script, argv):
    from albert_tf import cli  # pylint: disable=import-outside-toplevel

    flags.FLAGS.unparse_flags()
    stderr = io.StringIO()
    sys.argv = [f"{script}.py", *argv]
    with contextlib.redirect_stderr(stderr):
        try:
            args = cli.parse_flags(sys.argv)
            cli._guarded(module.main)(args)  # pylint: disable=protected-access
            status = 0
        except SystemExit as exit_:
            status = exit_.code if isinstance(exit_.code, int) else 1
        except BaseException as err:  # pylint: disable=broad-except
            import traceback  # pylint: disable=import-outside-toplevel

            stderr.write("Traceback (most recent call last):\n" + "".join(traceback.format_exception(err)))
            status = 1
    return {"status": status, "stderr": stderr.getvalue()}


def main():
    script = sys.argv[1]
    module, declared = declarations(script)
    if len(sys.argv) == 2:
        print(json.dumps(declared, default=lambda value: value.__name__))  # a list setting's item type
        return
    with open(sys.argv[3], encoding="utf-8") as f:
        cases = json.load(f)
    results = []
    for case in cases:
        with held(case.get("hold", [])) as pids:
            result = run_case(module, script, case["argv"])
        result["holders"] = pids
        results.append(result)
    sys.stdout.write("\n" + json.dumps(results) + "\n")


if __name__ == "__main__":
    main()
