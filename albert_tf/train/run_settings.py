"""A training run's settings record (`albert_tf.settings_record`), beside its checkpoints
(`<output_dir>/settings.json`) and written at the run's start, so that a finished run can be read back and a resume
with other settings is noticed.

The record holds every setting of the run's params by flag name (defaults included). Resuming (checkpoints in
`--output_dir`) with a setting that changes what is trained (anything not declared `trains=False`: the learning
rate, warm-up, batch size, sequence length, masking, dropout, precision, seed...) is refused in one line naming the
settings, unless `--allow_settings_change`; settings that only change logging, evaluation, exports, where the run
executes or how long it trains, and the paths of its files, may differ freely.
"""

import dataclasses

from albert_tf import settings_record
from albert_tf.errors import RunError
from albert_tf.settings import flag_spec

SETTINGS_JSON = settings_record.SETTINGS_JSON


def resolved_settings(params):
    """{flag name: value} of every setting of `params` that a JSON file can hold (the config is recorded in
    albert_config.json), in field order."""
    settings = {}
    for field in dataclasses.fields(params):
        spec = flag_spec(field)
        value = getattr(params, field.name)
        if spec is None or not (value is None or isinstance(value, (bool, int, float, str, list, tuple))):
            continue
        settings[spec.name] = settings_record.plain(value)
    return settings


def training_settings(params):
    """The names of the settings of `params` that change what is trained: all but those declared `trains=False`
    and the file settings (a path may move while its data stays the same; a resume reads its own checkpoints)."""
    return {flag_spec(f).name for f in dataclasses.fields(params)
            if flag_spec(f) is not None and f.metadata.get("trains", True) and "role" not in f.metadata}


def read_settings(output_dir):
    """The recorded settings of the run in `output_dir` ({flag name: value}), or None where none were recorded."""
    return settings_record.read_settings(settings_record.record_path("output_dir", output_dir),
                                         f"--output_dir {output_dir}")


def check_resume(output_dir, params, allow_change=False):
    """Refuses to resume the run in `output_dir` with settings that change what is trained (see the module
    docstring); logging-only differences pass."""
    recorded = read_settings(output_dir)
    if recorded is None or allow_change:
        return
    current = resolved_settings(params)
    changed = [name for name in current if name in training_settings(params) and name in recorded
               and recorded[name] != current[name]]
    if changed:
        shown = ", ".join(f"--{n}={recorded[n]} (now {current[n]})" for n in changed[:4])
        more = f" and {len(changed) - 4} more" if len(changed) > 4 else ""
        raise RunError(f"--output_dir {output_dir} holds a run with other settings: {shown}{more}; resume with its "
                       "settings, use a new --output_dir, or pass --allow_settings_change")


def record_settings(output_dir, params):
    """Writes `<output_dir>/settings.json`: the resolved settings, versions and command line."""
    settings_record.write_record(settings_record.record_path("output_dir", output_dir), resolved_settings(params))
