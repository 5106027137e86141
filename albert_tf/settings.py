"""Run settings: a params dataclass field that also declares the command-line flag a script generates from it.

A field made with `setting(default, help_text)` holds its name, default and help once; `albert_tf.cli.define_flags`
turns it into an absl flag and `albert_tf.cli.params_from_flags` reads it back. The flag is the field (same name,
kind from the type annotation, same default) unless the metadata says why not: `flag=` the original's flag name,
`kind=` a flag of another kind than the field (a file name for a parsed object), `choices=` an enum's values,
`flag_default=` the flag's default where the field has none (a required field, or None meaning "derived").
Fields made with plain `dataclasses.field` (or none) are not flags.

A setting also declares what `albert_tf.guard` checks for every script before anything is read or written:
`bounds=` a `Range` its value must lie in (a list's: each item's), for a list `items=` the type of its items (int,
float: the flag's strings are read as such) and `count=` a `Range` of how many it holds, `role=` which file or folder it names (one of `ROLES`: an input the
run reads, or an output it writes; `under=` the setting naming the folder a relative path is looked up in) and,
for an output folder, `writes=` the names (globs) the run writes inside it, where `{setting}` (a format field, e.g.
`{num_output_shards:05d}`) is that setting's value and any other field any text: files of those names written with
other values are another run's, refused (a glob over the folder would read them with this run's); `replaced_by=`, on
an output, the bool setting without which what exists there already is refused; `records=True`, on the
output that holds the run's settings record (`albert_tf.settings_record`: where it lies, what it holds), written by
the guard once the run has succeeded. `trains=False` marks a setting that does
not change what a training run trains (logging, evaluation, exports, where it runs): a resume may change it.
`required=True` a setting a run cannot do without (`required=("vocab_file",)`: unless one of those is set), and
`excludes=` the settings that may not be given with it; `why=` says why, after either error. `check=` a function
`(value, values)` raising `UsageError` for what only the other settings or the files named can tell (with
`--runner` an output is one prefix; shards named from an output over an input; a GLUE folder needs a known task),
run with the bounds and choices when the value is set (`values`: every flag's, and for params built in code also
the fields no flag sets).
A new script gets every guarantee of the guard by declaring its settings; it writes no checks of its own.
"""

import dataclasses
import math

_NO_DEFAULT = dataclasses.MISSING

# What a file setting names. Inputs: a file (`input_file`), comma-separated files or globs (`input_files`), a folder
# the run takes named files from (`input_dir`, e.g. GLUE's --data_dir), a folder read as a whole (`input_tree`: a
# SavedModel, a TF-Hub module), a checkpoint (`input_checkpoint`: a prefix or a folder). Outputs: a file
# (`output_file`), comma-separated files (`output_files`), a path prefix of files (`output_prefix`: `writes` names
# their suffixes), a folder the run writes into (`output_dir`: checkpoints, results; `writes` names them) and a
# folder written and replaced whole (`output_tree`: an export).
INPUT_ROLES = ("input_file", "input_files", "input_dir", "input_tree", "input_checkpoint")
OUTPUT_ROLES = ("output_file", "output_files", "output_prefix", "output_dir", "output_tree")
ROLES = INPUT_ROLES + OUTPUT_ROLES


@dataclasses.dataclass(frozen=True)
class Range:
    """The values a number setting accepts: `low`..`high` (None: unbounded), each end closed unless `low_open` /
    `high_open`. `str` gives the rule as a user reads it ("at least 1", "in (0, 1]")."""

    low: float = None
    high: float = None
    low_open: bool = False
    high_open: bool = False

    def __contains__(self, value):
        if value is None:
            return True
        if isinstance(value, float) and math.isnan(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def __str__(self):
        if self.high is None:
            return f"{'greater than' if self.low_open else 'at least'} {self.low:g}"
        if self.low is None:
            return f"{'less than' if self.high_open else 'at most'} {self.high:g}"
        return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"


POSITIVE = Range(1)
NON_NEGATIVE = Range(0)
PROBABILITY = Range(0, 1)


def setting(default=_NO_DEFAULT, help_text="", *, flag=None, kind=None, choices=None, flag_default=_NO_DEFAULT,
            bounds=None, items=None, count=None, role=None, writes=(), under=None, replaced_by=None, records=False,
            trains=True, required=False, why=None, excludes=(), check=None):
    """A dataclass field (`default`, or required when none) carrying its flag's help text and, where they differ
    from the field, the flag's name, kind, enum choices and default; with the `bounds`, file `role`, for an
    output folder the names it `writes`, and whether a run needs it (see the module docstring)."""
    if role is not None and role not in ROLES:
        raise ValueError(f"setting(role={role!r}): one of {', '.join(ROLES)}")
    if writes and role not in ("output_dir", "output_prefix"):
        raise ValueError("setting(writes=...) is for role='output_dir' or 'output_prefix'")
    if replaced_by and role not in OUTPUT_ROLES:
        raise ValueError("setting(replaced_by=...) is for an output role")
    if records and role not in OUTPUT_ROLES:
        raise ValueError("setting(records=True) is for an output role")
    metadata = {"help": help_text}
    for key, value in (("flag", flag), ("kind", kind), ("choices", choices), ("bounds", bounds), ("items", items),
                       ("count", count), ("role", role), ("under", under), ("replaced_by", replaced_by),
                       ("check", check)):
        if value is not None:
            metadata[key] = value
    if writes:
        metadata["writes"] = tuple(writes)
    if records:
        metadata["records"] = True
    if not trains:
        metadata["trains"] = False
    if required:
        metadata["required"] = () if required is True else tuple(required)
    if why:
        metadata["why"] = why
    if excludes:
        metadata["excludes"] = tuple(excludes)
    if flag_default is not _NO_DEFAULT:
        metadata["flag_default"] = flag_default
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class FlagSpec:
    """The flag a `setting` field declares: absl kind (bool, integer, float, string, enum, list), name, default,
    help text, for an enum its choices; and what the guard checks: `bounds`, `items`, `count`, `role`, `writes`,
    `under`, `replaced_by`, `records`, `check`; `required`:
    None when optional, else the flags that may stand in for it (empty: none), `why` the reason told with it;
    `excludes`: flags not given with it."""

    kind: str
    name: str
    default: object
    help: str
    choices: tuple = None
    bounds: Range = None
    items: type = None
    count: Range = None
    role: str = None
    writes: tuple = ()
    under: str = None
    replaced_by: str = None
    required: tuple = None
    why: str = None
    excludes: tuple = ()
    check: object = None
    records: bool = False


_KINDS = {bool: "bool", int: "integer", float: "float", str: "string", list: "list"}


def flag_spec(field):
    """The `FlagSpec` of a dataclass field made with `setting`, or None for a field that is not a flag."""
    metadata = field.metadata
    if "help" not in metadata:
        return None
    if "choices" in metadata:
        kind = "enum"
    else:
        kind = metadata.get("kind") or _KINDS.get(getattr(field.type, "__origin__", field.type))
    if kind is None:
        raise TypeError(f"{field.name}: no flag kind for the type {field.type!r}; give setting(kind=...)")
    default = metadata.get("flag_default", field.default)
    if default is _NO_DEFAULT:
        raise TypeError(f"{field.name}: a required field needs setting(flag_default=...)")
    return FlagSpec(kind, metadata.get("flag", field.name), default, metadata["help"], metadata.get("choices"),
                    metadata.get("bounds"), metadata.get("items"), metadata.get("count"), metadata.get("role"),
                    metadata.get("writes", ()), metadata.get("under"), metadata.get("replaced_by"),
                    metadata.get("required"), metadata.get("why"), metadata.get("excludes", ()),
                    metadata.get("check"), metadata.get("records", False))


def flag_specs(params_cls):
    """{field name: FlagSpec} of every field of `params_cls` that declares a flag, in field order."""
    specs = ((field.name, flag_spec(field)) for field in dataclasses.fields(params_cls))
    specs = {name: spec for name, spec in specs if spec is not None}
    kinds = {spec.name: spec.kind for spec in specs.values()}
    for spec in specs.values():
        if spec.replaced_by and kinds.get(spec.replaced_by) != "bool":
            raise ValueError(f"{params_cls.__name__}.{spec.name}: replaced_by={spec.replaced_by!r} must name a bool "
                             "setting of the same class")
    return specs
