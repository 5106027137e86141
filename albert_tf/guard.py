"""What every script reads and writes, checked in one place before anything is read or written.

A script declares its settings (`albert_tf.settings.setting`): bounds, and the role of each file flag (an input
it reads, an output it writes, and for an output folder the names it writes inside). `albert_tf.cli.run` hands
the declarations of the flags the script defined, with their values, to `guarded`, which before `main` runs:

1. checks every value against its bounds and choices and runs its declared `check`, in the order the user gave the
   flags (a bad value: `UsageError` naming the flag, exit status 2);
2. refuses any output that is an input, contains one (an output written whole, or an input among the names an
   output folder's run writes), or lies inside an input read whole (a SavedModel, a checkpoint folder), however
   spelled (relative, `..`, symbolic or hard links; a remote path, `gs://...`, as written);
3. locks every local output for the run: a folder written into by its own lock, a file or a folder written whole
   by a lock beside it; a second writer is refused naming the holder's pid;
4. then refuses an output that exists already unless the setting it is `replaced_by` is given, and in an output
   folder whose names depend on settings, files of those names written with other values (another run's, which a
   glob over the folder would read with this run's) (`fileio.OutputError`, exit status 1);
5. protects the inputs (local and remote) for the run: anything written through `albert_tf.fileio` refuses to
   replace one of them; and removes what a killed earlier run of the same outputs left in their staging folders;
6. refuses two settings given that exclude each other, and a required setting left unset (`UsageError`, exit
   status 2).

When the block has run without an error, it writes the run's settings record (`albert_tf.settings_record`) for the
output declared `records=True`: checked above as one more output, so that it never replaces an input.

A new script gets all of this by declaring its settings; none of it is written in a script.
"""

import contextlib
import dataclasses
import fnmatch
import glob
import os
import string

from albert_tf import fileio, settings_record
from albert_tf.errors import MissingDataError, UsageError
from albert_tf.settings import INPUT_ROLES, OUTPUT_ROLES, FlagSpec, flag_spec

# The settings record, as an output the guard checks: one file.
_RECORD_SPEC = FlagSpec("string", "settings record", None, "A run's settings record.", role="output_file")


def check_values(specs, values, order=()):
    """Raises `UsageError` for the first setting (flags named in `order` first, then the others) whose value lies
    outside its declared bounds or choices, or that its declared `check` refuses (a flag's own parser holds the
    choices too; a params dataclass built in code meets them here, with the same message). `specs` and `values`
    are keyed by flag name."""
    names = [n for n in order if n in specs] + [n for n in specs if n not in order]
    for name in names:
        spec = specs[name]
        value = values.get(name)
        if value is None:
            continue
        if spec.kind == "list":
            list_items(name, spec, value)
        elif spec.bounds is not None and value not in spec.bounds:
            raise UsageError(f"--{name}={value}: must be {spec.bounds}")
        elif spec.choices is not None and value not in spec.choices:
            raise UsageError(f"--{name}={value}: must be one of {', '.join(spec.choices)}")
        if spec.check is not None:
            spec.check(value, values)


_ITEM_NAMES = {int: "whole numbers", float: "numbers"}


def list_items(name, spec, value):
    """The items of the list setting `name` (read as its declared `items` type), or `UsageError` naming the flag
    when one is not of that type or outside the bounds, or when the list holds too few or too many."""
    shown = f"--{name}={','.join(map(str, value))}"
    try:
        items = [spec.items(v) for v in value] if spec.items else list(value)
    except (TypeError, ValueError):
        raise UsageError(f"{shown}: takes {_ITEM_NAMES.get(spec.items, spec.items.__name__)}") from None
    if spec.count is not None and len(items) not in spec.count:
        raise UsageError(f"{shown}: the number of values must be {spec.count}")
    if spec.bounds is not None and any(item not in spec.bounds for item in items):
        raise UsageError(f"{shown}: each must be {spec.bounds}")
    return items


def _paths(role, value, folder=None, suffixes=()):
    """The paths a flag's value names, by its role: comma-separated ones split and local globs expanded (a remote
    one, `gs://...`, is kept as given); a relative one that is not found as given is looked up in `folder` (a
    setting's `under`)."""
    if not value or value == "-":
        return []
    if folder and isinstance(value, str) and not os.path.isabs(value) and not os.path.exists(value):
        value = os.path.join(folder, value)
    if role in ("input_files", "output_files"):
        parts = value if isinstance(value, (list, tuple)) else str(value).split(",")
        paths = []
        for part in filter(None, parts):
            local_glob = role == "input_files" and glob.has_magic(part) and not fileio.is_remote(part)
            matched = glob.glob(part) if local_glob else [part]
            paths.extend(matched)
        return paths
    if role == "output_prefix":
        return [str(value) + suffix for suffix in suffixes]
    if role == "input_checkpoint" and not os.path.isdir(value):
        return [value] + glob.glob(glob.escape(value) + ".*")  # a prefix: its .index and .data-* files
    return [str(value)]


def declared_files(specs, values):
    """(inputs, outputs): `(flag, path, spec)` for every path the declared file settings name."""
    inputs, outputs = [], []
    for name, spec in specs.items():
        if spec.role is None:
            continue
        folder = values.get(spec.under) if spec.under else None
        for path in _paths(spec.role, values.get(name), folder, spec.writes):
            (inputs if spec.role in INPUT_ROLES else outputs).append((f"--{name}", path, spec))
    return inputs, outputs


def write_patterns(spec, values=None):
    """The globs of the names an output's run writes (`spec.writes`): each `{setting}` field formatted with that
    setting's value from `values`, every other field (or every field, without `values`) any text."""
    patterns = []
    for template in spec.writes:
        parts = []
        for literal, field, format_spec, _ in string.Formatter().parse(template):
            parts.append(literal)
            if field is not None:
                value = (values or {}).get(field)
                parts.append("*" if value is None else format(value, format_spec))
        patterns.append("".join(parts))
    return patterns


def record_outputs(specs, values):
    """`(flag, path, spec)` of the settings record of each output declared `records=True` that the run writes (not
    to standard output, '-')."""
    return [(f"--{name} (its settings record)", settings_record.record_path(spec.role, values[name]), _RECORD_SPEC)
            for name, spec in specs.items() if spec.records and values.get(name) not in (None, "", "-", [], ())]


def _read_whole(spec, path):
    return spec.role == "input_tree" or (spec.role == "input_checkpoint" and os.path.isdir(path))


def _written_inside(out_path, out_spec, in_path):
    """Whether the input `in_path` lies inside the output folder where the run writes it (or over it)."""
    if not fileio.inside(in_path, out_path):
        return False
    if out_spec.role == "output_tree":
        return True
    if fileio.is_remote(in_path):
        first = str(in_path)[len(str(out_path).rstrip("/")) + 1:].split("/")[0]
    else:
        first = os.path.relpath(os.path.realpath(in_path), os.path.realpath(out_path)).split(os.sep)[0]
    return any(fnmatch.fnmatch(first, pattern) for pattern in write_patterns(out_spec))


def check_collisions(inputs, outputs):
    """Raises `UsageError` for the first output that would replace, or write into, one of the inputs, or that two
    output flags share."""
    for out_flag, out_path, _ in outputs:
        for in_flag, in_path, _ in inputs:
            if fileio.same_file(out_path, in_path):
                raise UsageError(f"{out_flag} {out_path} is the input {in_flag} {in_path}; write the output "
                                 "elsewhere")
    for out_flag, out_path, out_spec in outputs:
        for in_flag, in_path, in_spec in inputs:
            if _read_whole(in_spec, in_path) and fileio.inside(out_path, in_path):
                problem = "lies inside"
            elif out_spec.role in ("output_dir", "output_tree") and _written_inside(out_path, out_spec, in_path):
                problem = "would write over"
            else:
                continue
            raise UsageError(f"{out_flag} {out_path} {problem} the input {in_flag} {in_path}; write the output "
                             "elsewhere")
    for i, (flag_a, path_a, _) in enumerate(outputs):
        for flag_b, path_b, _ in outputs[i + 1:]:
            if flag_a != flag_b and fileio.same_file(path_a, path_b):
                raise UsageError(f"{flag_a} and {flag_b} are the same path {path_a}; give each its own")


def _lock(flag, path, spec, tag=None):
    """The lock of one output: a folder written into holds its own; a file, or a folder written whole (replaced
    by a rename), is locked beside it, in its parent's staging folder. `tag` names one process of a job whose
    processes all write the same outputs (a multi-worker run's task): each takes its own lock."""
    if spec.role == "output_dir":
        return fileio.DirectoryLock(path, flag, lock_name=f"lock-{tag}" if tag else "lock")
    if spec.role == "output_prefix":  # one lock for all its files
        suffix = max((s for s in spec.writes if path.endswith(s)), key=len)  # "" ends every name
        path = path[:len(path) - len(suffix)]
    parent, name = os.path.split(os.path.abspath(path))
    if spec.role == "output_tree" and os.path.isdir(path) and not os.access(parent, os.W_OK):
        return fileio.DirectoryLock(path, flag, lock_name=f"lock-{tag}" if tag else "lock")  # replaced in place
    return fileio.DirectoryLock(parent, f"{flag} {path}", lock_name=f"{name}.{tag}.lock" if tag else f"{name}.lock")


def check_input(flag, path, spec):
    """Refuses a folder given where a file is read, or the reverse (before the script trips over it)."""
    if spec.role == "input_file" and os.path.isdir(path):
        raise MissingDataError(f"{flag} {path} is a directory, not a file")
    if spec.role in ("input_dir", "input_tree") and os.path.isfile(path):
        raise MissingDataError(f"{flag} {path} is a file, not a directory")


def check_output(flag, path, spec):
    """Refuses a file where a folder is written or the reverse, and a folder written whole that holds anything
    albert_tf did not write there (which replacing it would delete)."""
    is_dir = spec.role in ("output_dir", "output_tree")
    if os.path.isdir(path) and spec.role in ("output_file", "output_files"):
        raise fileio.OutputError(f"cannot write {flag} {path}: it is a directory")
    if os.path.isfile(path) and is_dir:
        raise fileio.OutputError(f"{flag} {path} is a file, not a directory")
    if spec.role == "output_tree" and os.path.isdir(path):
        foreign = fileio.foreign_files(path)
        if foreign:
            shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
            raise fileio.OutputError(f"{flag} {path} holds files albert_tf did not write there ({shown}), which "
                                     "replacing it would delete; move them away or choose another directory")


def _existing_outputs(spec, value, values):
    """(what of this run's outputs exists already, files of another run in its folder, how many outputs it has)."""
    if spec.role == "output_dir":
        present = fileio.listdir(value) if fileio.isdir(value) else []
        family = write_patterns(spec)
        ours = write_patterns(spec, values)
        named = [n for n in present if any(fnmatch.fnmatch(n, p) for p in family)]
        existing = [n for n in named if any(fnmatch.fnmatch(n, p) for p in ours)]
        return ([os.path.join(value, n) for n in sorted(existing)],
                sorted(os.path.join(value, n) for n in set(named) - set(existing)), None)
    if spec.role == "output_tree":
        full = fileio.isdir(value) and fileio.listdir(value)
        return ([value] if full else []), [], None
    paths = _paths(spec.role, value, suffixes=spec.writes)
    return [p for p in paths if fileio.exists(p)], [], len(paths)


def check_existing(specs, values):
    """Raises `fileio.OutputError` for the first output that exists already while the setting it is `replaced_by`
    is not given, or whose folder holds files of its names written by a run with other values (see
    `write_patterns`), which a glob over the folder would read with this run's."""
    for name, spec in specs.items():
        value = values.get(name)
        if spec.role not in OUTPUT_ROLES or not value or value == "-":
            continue
        if not spec.replaced_by and not any("{" in p for p in spec.writes):
            continue
        existing, others, total = _existing_outputs(spec, value, values)
        if others:
            raise fileio.OutputError(
                f"--{name} {value} holds {len(others)} file(s) of another run ({os.path.basename(others[0])}, ...) "
                "that a glob over it would read with this run's; remove them or choose another directory")
        if not existing or not spec.replaced_by or values.get(spec.replaced_by):
            continue
        tree = spec.role == "output_tree"
        remedy = _replace_remedy(specs, values, spec.replaced_by) or (
            f"pass --{spec.replaced_by} to replace it" if tree else
            f"pass --{spec.replaced_by} to replace, or choose another name")
        if tree:
            raise fileio.OutputError(f"--{name} {value} exists and is not empty; {remedy}")
        count = f"{len(existing)} of {total} outputs" if total else f"{len(existing)} output(s) of this run"
        raise fileio.OutputError(f"--{name}: {existing[0]} exists already ({count}); {remedy}")


def _replace_remedy(specs, values, replaced_by):
    """When a setting given excludes the one that would replace an existing output, why it cannot (that
    setting's declared `why`); else None."""
    spec = specs.get(replaced_by)
    if spec is None or not spec.why:
        return None
    if any(other in specs and _is_set(other, specs[other], values, ()) for other in spec.excludes):
        return spec.why
    return None


def _is_set(name, spec, values, given):
    """Whether a setting counts as given: named on the command line, or holding a value other than its default."""
    value = values.get(name)
    return name in given or (value not in (None, "", [], ()) and value != spec.default)


def check_required(specs, values, order=()):
    """Raises `UsageError` for the first setting given together with one it `excludes`, else for the first
    `required` one without a value (nor one of the flags that may stand in for it)."""
    for name in [n for n in order if n in specs] + [n for n in specs if n not in order]:
        if not _is_set(name, specs[name], values, order):
            continue
        for other in specs[name].excludes:
            if other in specs and _is_set(other, specs[other], values, order):
                reason = f": {specs[name].why}" if specs[name].why else ""
                raise UsageError(f"give either --{name} or --{other}, not both{reason}")
    for name, spec in specs.items():
        if spec.required is None or values.get(name) not in (None, "", [], (), False):
            continue
        if not any(values.get(other) not in (None, "", [], (), False) for other in spec.required):
            raise UsageError(_required_message(name, spec, specs))


def _required_message(name, spec, specs):
    # a field only code sets (a task's `processor`) may stand in too, but a user is told the flags
    names = [f"--{n}" for n in (name, *spec.required) if n in specs]
    if spec.kind == "bool":
        listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
        return f"At least one of {listed} must be True."
    message = f"{names[0]}{''.join(f' (or {n})' for n in names[1:])} is required"
    return f"{message}: {spec.why}" if spec.why else message


def check_params(params):
    """`check_values`, `check_existing` and `check_required` on a params dataclass built in code (the library's
    `run_*`), so its settings hold the rules a script's flags are held to."""
    specs, values = {}, {}
    for field, spec in zip(dataclasses.fields(params), map(flag_spec, dataclasses.fields(params))):
        if spec is not None:
            specs[spec.name], values[spec.name] = spec, getattr(params, field.name)
        else:  # a field only code sets (a task's `processor`): a declared `check` may read it
            values[field.name] = getattr(params, field.name)
    check_values(specs, values)
    check_existing(specs, values)
    check_required(specs, values)


@contextlib.contextmanager
def guarded(specs, values, order=(), lock_tag=None, command=None):
    """Checks and holds a run's declared settings (see the module docstring) for the block. `specs`: {flag name:
    FlagSpec}; `values`: {flag name: value}; `order`: the flag names as the user gave them; `lock_tag`: this
    process's task in a multi-worker job (see `_lock`); `command`: the command line its settings record holds
    (default `sys.argv`)."""
    check_values(specs, values, order)
    inputs, outputs = declared_files(specs, values)
    for flag, path, spec in inputs:
        check_input(flag, path, spec)
    records = record_outputs(specs, values)
    check_collisions(inputs, outputs + records)
    for flag, path, spec in outputs + records:
        check_output(flag, path, spec)
    with contextlib.ExitStack() as stack:
        for flag, path, spec in outputs:
            if fileio.is_remote(path):  # a lock needs a local file system (DirectoryLock); nothing to sweep
                continue
            stack.enter_context(_lock(flag, path, spec, lock_tag))
            # what a killed run of this output left in the staging folder (its pid gone)
            fileio.remove_stale_partials(path if spec.role == "output_dir" else os.path.dirname(os.path.abspath(path)))
        check_existing(specs, values)  # under the locks: no other run can write the outputs meanwhile
        stack.enter_context(fileio.inputs_protected([(flag, path) for flag, path, _ in inputs]))
        check_required(specs, values, order)
        yield inputs, outputs
        for _, path, _ in records:
            settings_record.write_record(path, values, command)
