"""Every flag of the original release's scripts exists in the matching script here, with the original's default
(the table in tests/original_flags.py, written from reading the original); flags accepted but without effect say
so in their help text.

Flags are read as absl holds them after importing the script in a separate process
(`tests.helpers.script_flag_definitions`), so flags generated from a params dataclass (`albert_tf.cli.define_flags`)
are checked like the ones a script defines by hand.
"""

import math
import os

import pytest

from albert_tf.cli import demo_preset
from albert_tf.settings import flag_specs
from albert_tf.tasks.classification import ClassifierParams
from albert_tf.tasks.pretraining import PretrainingParams
from albert_tf.tasks.race import RaceParams
from albert_tf.tasks.squad import SquadParams
from albert_tf.train.runner import TPU_SETTINGS
from tests.helpers import script_flag_definitions
from tests.original_flags import ENUM_CHOICES, FLAGS_DROPPED_BEFORE_FINAL_MASTER, ORIGINAL_FLAGS, TPU_FLAGS

# Flags accepted only so that the original's command lines run, per script here (the README lists them).
INERT_HERE = {
    "create_pretraining_data.py": {"input_file_mode", "parallel"},
    "run_pretraining.py": {"num_tpu_cores"},
    "run_classifier.py": {"num_tpu_cores"},
    "run_squad.py": {"num_tpu_cores", "use_einsum", "predict_feature_left_file"},
    "run_race.py": {"num_tpu_cores"},
}
INERT_PREFIX = "Accepted for compatibility and unused: "


def _same_default(ours, original):
    if isinstance(original, float) and math.isnan(original):
        return isinstance(ours, float) and math.isnan(ours)
    return type(ours) is type(original) and ours == original


def _assert_has_the_originals_flags(script, original_script):
    ours = script_flag_definitions(script)
    expected = dict(ORIGINAL_FLAGS[original_script])
    expected.update(FLAGS_DROPPED_BEFORE_FINAL_MASTER.get(original_script, {}))
    missing = sorted(set(expected) - set(ours))
    assert not missing, f"{script} lacks {original_script}'s flags {missing}"
    differing = {name: (ours[name].default, default) for name, default in expected.items()
                 if not _same_default(ours[name].default, default)}
    assert not differing, f"{script}: defaults (ours, original's) differ: {differing}"
    for name, choices in ENUM_CHOICES.get(original_script, {}).items():
        assert ours[name].kind == "enum" and sorted(ours[name].enum_values) == sorted(choices), name
    return ours


def _assert_inert_flags_say_so(script, ours):
    for name in INERT_HERE[script]:
        assert ours[name].help.startswith(INERT_PREFIX) and len(ours[name].help) > len(INERT_PREFIX) + 10, name
    claiming = {name for name, d in ours.items() if "accepted for compatibility" in str(d.help).lower()}
    assert claiming == INERT_HERE[script], f"{script}: help texts that claim no effect: {sorted(claiming)}"


@pytest.mark.parametrize("params, original_scripts", [
    (ClassifierParams, ("run_classifier.py",)),
    (PretrainingParams, ("run_pretraining.py",)),
    (RaceParams, ("run_race.py",)),
    (SquadParams, ("run_squad_v1.py", "run_squad_v2.py")),
])
def test_the_settings_behind_a_scripts_flags_hold_the_originals_defaults(params, original_scripts):
    """In-process and quick (the slow tests above read the flags absl defines): every original flag that is one of
    the params' settings, the TPU flags of `RuntimeParams` among them, has the original's default; the inert ones
    say so."""
    specs = {spec.name: spec for spec in flag_specs(params).values()}
    for original_script in original_scripts:
        expected = {flag: default for flag, default in ORIGINAL_FLAGS[original_script].items() if flag in specs}
        assert set(TPU_FLAGS) <= set(expected)
        differing = {flag: (specs[flag].default, default) for flag, default in expected.items()
                     if not _same_default(specs[flag].default, default)}
        assert not differing, f"{params}: defaults (ours, {original_script}'s) differ: {differing}"
    assert TPU_SETTINGS == tuple(TPU_FLAGS)  # what `cli.define_tpu_flags` defines: the original's TPU block
    assert specs["num_tpu_cores"].help.startswith(INERT_PREFIX)
    assert all(specs[flag].help and not specs[flag].help.startswith(INERT_PREFIX) for flag in TPU_FLAGS
               if flag != "num_tpu_cores")


def test_create_pretraining_data_flags():
    ours = _assert_has_the_originals_flags("create_pretraining_data.py", "create_pretraining_data.py")
    _assert_inert_flags_say_so("create_pretraining_data.py", ours)


@pytest.mark.slow
def test_run_pretraining_flags():
    ours = _assert_has_the_originals_flags("run_pretraining.py", "run_pretraining.py")
    assert ours["do_train"].default is True  # as the original: --input_file alone trains
    assert ours["masked_lm_budget"].kind == "float" and ours["masked_lm_budget"].default == 0.0
    _assert_inert_flags_say_so("run_pretraining.py", ours)


@pytest.mark.slow
def test_run_classifier_flags():
    ours = _assert_has_the_originals_flags("run_classifier.py", "run_classifier.py")
    assert math.isnan(ours["threshold_to_export"].default)
    _assert_inert_flags_say_so("run_classifier.py", ours)


@pytest.mark.slow
@pytest.mark.parametrize("original_script", ["run_squad_v1.py", "run_squad_v2.py"])
def test_run_squad_flags(original_script):
    """One script for both of the original's SQuAD scripts: it has the union of their flags (their shared
    flags have the same defaults in both)."""
    ours = _assert_has_the_originals_flags("run_squad.py", original_script)
    _assert_inert_flags_say_so("run_squad.py", ours)


@pytest.mark.slow
def test_run_race_flags():
    ours = _assert_has_the_originals_flags("run_race.py", "run_race.py")
    assert ours["do_train"].default is True and ours["do_eval"].default is True
    _assert_inert_flags_say_so("run_race.py", ours)


@pytest.mark.slow
def test_a_wrong_default_or_a_missing_flag_would_be_found():
    """The comparison itself: NaN only equals NaN, 0 is not 0.0, True is not 1, and an absent flag is named."""
    assert _same_default(float("nan"), float("nan")) and not _same_default(None, float("nan"))
    assert not _same_default(0, 0.0) and not _same_default(1, True) and _same_default("lamb", "lamb")
    ORIGINAL_FLAGS["_probe.py"] = {"no_such_flag": None}
    try:
        with pytest.raises(AssertionError, match="no_such_flag"):
            _assert_has_the_originals_flags("run_race.py", "_probe.py")
    finally:
        del ORIGINAL_FLAGS["_probe.py"]


@pytest.mark.slow
@pytest.mark.parametrize("script, preset", [("run_pretraining.py", "pretraining"), ("run_race.py", "race")])
def test_demo_presets_set_flags_of_their_script(script, preset):
    """An embedded demo's settings (data/demos/<preset>.json) name flags of its script, with values of the
    flag's type, and files of the checkout."""
    ours = script_flag_definitions(script)
    settings = demo_preset(preset)
    assert set(settings) <= set(ours), sorted(set(settings) - set(ours))
    for name, value in settings.items():
        default = ours[name].default
        assert default is None or type(value) is type(default), (name, value, default)
    assert os.path.isfile(settings["albert_config_file"]) and os.path.isfile(settings["spm_model_file"])
