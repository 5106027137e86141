"""Run settings: a params dataclass field that also declares the command-line flag a script generates from it.

A field made with `setting(default, help_text)` holds its name, default and help once; `albert_tf.cli.define_flags`
turns it into an absl flag and `albert_tf.cli.params_from_flags` reads it back. The flag is the field (same name,
kind from the type annotation, same default) unless the metadata says why not: `flag=` the original's flag name,
`kind=` a flag of another kind than the field (a file name for a parsed object), `choices=` an enum's values,
`flag_default=` the flag's default where the field has none (a required field, or None meaning "derived").
Fields made with plain `dataclasses.field` (or none) are not flags.
"""

import dataclasses

_NO_DEFAULT = dataclasses.MISSING


def setting(default=_NO_DEFAULT, help_text="", *, flag=None, kind=None, choices=None, flag_default=_NO_DEFAULT):
    """A dataclass field (`default`, or required when none) carrying its flag's help text and, where they differ
    from the field, the flag's name, kind, enum choices and default."""
    metadata = {"help": help_text}
    for key, value in (("flag", flag), ("kind", kind), ("choices", choices)):
        if value is not None:
            metadata[key] = value
    if flag_default is not _NO_DEFAULT:
        metadata["flag_default"] = flag_default
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class FlagSpec:
    """The flag a `setting` field declares: absl kind (bool, integer, float, string, enum, list), name, default,
    help text and, for an enum, its choices."""

    kind: str
    name: str
    default: object
    help: str
    choices: tuple = None


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
    return FlagSpec(kind, metadata.get("flag", field.name), default, metadata["help"], metadata.get("choices"))


def flag_specs(params_cls):
    """{field name: FlagSpec} of every field of `params_cls` that declares a flag, in field order."""
    specs = ((field.name, flag_spec(field)) for field in dataclasses.fields(params_cls))
    return {name: spec for name, spec in specs if spec is not None}
