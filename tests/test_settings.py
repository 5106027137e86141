"""Each script's flags come from its params (docs/design.md, "Run settings"): every `albert_tf.settings.setting`
field of the params a script is built on is a flag of that script with the field's flag name, kind, default, help
and choices, and the script defines by hand only the flags listed here (the original's that are no setting, and a
few of its own). A flag defined by hand instead of generated, with another default or help, fails here.

Flags and settings are read in a separate process after importing the script (absl flags are global to a
process), as `tests.helpers.script_flag_definitions` reads them."""

import json
import math
import subprocess
import sys

import pytest

from tests.helpers import COLLECT_SCRIPT_FLAGS, REPO, subprocess_env

# The params each script generates its flags from ("module:class"); a task's params inherit
# `train.runner.RuntimeParams`, whose TPU and runtime flags `cli.define_tpu_flags` / `define_runtime_flags` define.
SCRIPT_PARAMS = {
    "run_pretraining.py": ["albert_tf.tasks.pretraining:PretrainingParams"],
    "run_classifier.py": ["albert_tf.tasks.classification:ClassifierParams"],
    "run_squad.py": ["albert_tf.tasks.squad:SquadParams"],
    "run_race.py": ["albert_tf.tasks.race:RaceParams"],
    "export_model.py": ["albert_tf.tasks.export_request:ExportRequest"],
    "create_pretraining_data.py": ["albert_tf.scripts.create_pretraining_data:PretrainingDataRequest",
                                   "albert_tf.data.pretraining.config:PretrainingConfig"],
    "prepare_corpus.py": ["albert_tf.scripts.prepare_corpus:CorpusRequest",
                          "albert_tf.data.corpus.cleaning:CleaningOptions"],
    "create_vocab.py": ["albert_tf.scripts.create_vocab:VocabRequest", "albert_tf.text.vocab:SentencePieceOptions"],
    "predict.py": ["albert_tf.scripts.predict:PredictRequest"],
    "convert.py": ["albert_tf.scripts.convert:ConvertRequest"],
}

# The flags each script defines by hand: no setting of its params.
BY_HAND = {
    "run_pretraining.py": {"num_workers"},
    "run_classifier.py": {"albert_hub_module_handle"},
    "run_squad.py": {"albert_hub_module_handle", "vocab_file", "predict_feature_left_file", "use_einsum"},
    "run_race.py": {"albert_hub_module_handle", "task_name"},
    "export_model.py": set(),
    "create_pretraining_data.py": {"input_file_mode", "parallel"},
    "prepare_corpus.py": set(),
    "create_vocab.py": set(),
    "predict.py": set(),
    "convert.py": set(),
}

# Prints {"flags": {name: [kind, default, help, choices]} of albert_tf's modules once the script is imported,
# "settings": [[kind, flag name, default, help, choices], ...] of the params' setting fields}.
_DUMP = COLLECT_SCRIPT_FLAGS + """
from albert_tf.settings import flag_specs
settings = []
for path in sys.argv[2:]:
    module, name = path.split(":")
    for spec in flag_specs(getattr(importlib.import_module(module), name)).values():
        settings.append([spec.kind, spec.name, spec.default, spec.help, list(spec.choices or []) or None])
print(json.dumps({"flags": defined, "settings": settings}))
"""

# absl's flag_type() of each `FlagSpec.kind`.
_ABSL_KIND = {"bool": "bool", "integer": "int", "float": "float", "string": "string", "enum": "enum",
              "list": "comma separated list of strings"}


def _flags_and_settings(script):
    result = subprocess.run([sys.executable, "-c", _DUMP, script.removesuffix(".py"), *SCRIPT_PARAMS[script]],
                            cwd=REPO, env=subprocess_env(), capture_output=True, text=True, timeout=300, check=True)
    found = json.loads(result.stdout)
    return found["flags"], found["settings"]


def _same(ours, theirs):
    if isinstance(theirs, float) and math.isnan(theirs):
        return isinstance(ours, float) and math.isnan(ours)
    return type(ours) is type(theirs) and ours == theirs


def _differences(flags, settings, by_hand):
    """What breaks the rule: a setting with no flag or another flag, a flag neither a setting nor listed by hand."""
    problems = []
    for kind, name, default, help_text, choices in settings:
        if name not in flags:
            problems.append(f"--{name}: a setting with no flag")
            continue
        flag_kind, flag_default, flag_help, flag_choices = flags[name]
        if choices:  # absl puts an enum's choices before its help
            help_text = f"<{'|'.join(choices)}>: {help_text}"
        if flag_kind != _ABSL_KIND[kind] or not _same(flag_default, default) or flag_help != help_text or \
                flag_choices != choices:
            problems.append(f"--{name}: the flag ({flag_kind}, {flag_default!r}, {flag_help!r}, {flag_choices}) is "
                            f"not the setting ({kind}, {default!r}, {help_text!r}, {choices})")
    extra = set(flags) - {s[1] for s in settings} - by_hand
    problems.extend(f"--{name}: defined by hand, not listed in BY_HAND" for name in sorted(extra))
    problems.extend(f"--{name}: listed in BY_HAND, not defined" for name in sorted(by_hand - set(flags)))
    named = {s[1] for s in settings}
    problems.extend(f"--{name}: listed in BY_HAND, but a setting" for name in sorted(by_hand & named))
    return problems


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(SCRIPT_PARAMS))
def test_a_scripts_flags_are_its_params_settings(script):
    flags, settings = _flags_and_settings(script)
    assert settings, f"{script}: its params declare no setting"
    assert not _differences(flags, settings, BY_HAND[script])


def test_a_flag_defined_by_hand_against_its_setting_is_found():
    """The comparison itself, on a made-up script: another default, kind, help or choices; a hand-defined flag not
    listed; a setting without its flag."""
    settings = [["integer", "steps", 10, "Steps.", None], ["enum", "mode", "a", "Mode.", ["a", "b"]],
                ["float", "threshold", math.nan, "T.", None]]
    flags = {"steps": ["int", 10, "Steps.", None], "mode": ["enum", "a", "<a|b>: Mode.", ["a", "b"]],
             "threshold": ["float", math.nan, "T.", None]}
    assert not _differences(flags, settings, set())
    for name, wrong in (("steps", ["int", 11, "Steps.", None]), ("steps", ["float", 10.0, "Steps.", None]),
                        ("steps", ["int", 10, "Other.", None]), ("mode", ["enum", "a", "<a>: Mode.", ["a"]]),
                        ("threshold", ["float", None, "T.", None])):
        problems = _differences({**flags, name: wrong}, settings, set())
        assert len(problems) == 1 and problems[0].startswith(f"--{name}: the flag"), (name, wrong, problems)
    assert _differences({**flags, "extra": ["int", 1, "", None]}, settings, set()) == \
        ["--extra: defined by hand, not listed in BY_HAND"]
    assert _differences({k: v for k, v in flags.items() if k != "steps"}, settings, set()) == \
        ["--steps: a setting with no flag"]
    assert _differences(flags, settings, {"steps"}) == ["--steps: listed in BY_HAND, but a setting"]
