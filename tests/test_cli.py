"""Flags generated from a params dataclass (`albert_tf.cli.define_flags`) and read back (`params_from_flags`):
each kind, a flag named otherwise than its field, a required field's flag default, `only` / `exclude`, an
embedded demo's preset (`apply_demo`), and the script (not `cli`) as the flags' module, so that `--help` lists
them; a demo preset outside a checkout."""

import dataclasses

import pytest
from absl import flags

from albert_tf import cli
from albert_tf.settings import flag_specs, setting


@dataclasses.dataclass(kw_only=True)
class _Params:
    config: str = setting(help_text="The config file.", flag="config_file", flag_default=None)
    steps: int = setting(10, "Steps.")
    rate: float = setting(0.5, "Rate.")
    train: bool = setting(True, "Train.")
    name: str = setting(None, "A name.")
    optimizer: str = setting("lamb", "Optimizer.", choices=("adamw", "lamb"))
    files: list[str] = setting(None, "Files.")
    not_a_flag: int = 3


def _flag_values(argv=(), **kwargs):
    flag_values = flags.FlagValues()
    cli.define_flags(_Params, flag_values, **kwargs)
    flag_values(["script", *argv])
    return flag_values


def test_every_kind_is_defined_with_the_fields_default_and_help():
    flag_values = _flag_values()
    kinds = {name: flag_values[name].flag_type() for name in flag_values}
    assert kinds == {"config_file": "string", "steps": "int", "rate": "float", "train": "bool", "name": "string",
                     "optimizer": "string enum", "files": "comma separated list of strings"}
    assert flag_values["steps"].default == 10 and flag_values["rate"].default == 0.5
    assert flag_values["optimizer"].parser.enum_values == ["adamw", "lamb"]
    assert flag_values["steps"].help == "Steps." and flag_values["config_file"].default is None


def test_the_flags_belong_to_the_calling_module():
    flag_values = _flag_values()
    assert set(flag_values.flags_by_module_dict()) == {__name__}


def test_params_from_flags_reads_each_field_from_its_flag():
    flag_values = _flag_values(["--config_file=c.json", "--steps=7", "--notrain", "--optimizer=adamw",
                                "--files=a,b"])
    params = cli.params_from_flags(_Params, flag_values)
    assert params == _Params(config="c.json", steps=7, rate=0.5, train=False, name=None, optimizer="adamw",
                             files=["a", "b"])


def test_a_demo_sets_only_the_flags_the_user_did_not_set(monkeypatch):
    monkeypatch.setattr(cli, "demo_preset", lambda name: {"steps": 99, "rate": 0.25, "name": "demo"})
    monkeypatch.setattr(cli, "DEMO_RUNNING", [])
    demo = cli.Demo("any", when_missing="config_file", unless_given=(("name", "rate"),))
    given = _flag_values(["--config_file=mine"])
    assert not cli.apply_demo(demo, given) and not cli.demo_running()
    flag_values = _flag_values(["--steps=7", "--rate=0.75"])
    assert cli.apply_demo(demo, flag_values) and cli.demo_running()
    params = cli.params_from_flags(_Params, flag_values, config="given")
    assert (params.config, params.steps, params.rate) == ("given", 7, 0.75)
    assert flag_values["name"].value == flag_values["name"].default  # left out: --rate was given
    flag_values = _flag_values()
    cli.apply_demo(demo, flag_values)
    assert (flag_values["steps"].value, flag_values["rate"].value, flag_values["name"].value) == (99, 0.25, "demo")


def test_only_and_exclude_choose_the_flags():
    assert set(_flag_values(only=("steps", "rate"))) == {"steps", "rate"}
    assert "steps" not in _flag_values(exclude=("steps",))


def test_a_field_without_a_flag_kind_or_flag_default_is_refused():
    @dataclasses.dataclass
    class Bad:
        required: int = setting(help_text="No flag default.")

    with pytest.raises(TypeError, match="flag_default"):
        flag_specs(Bad)
    assert "not_a_flag" not in flag_specs(_Params)


def test_a_demo_preset_needs_a_checkouts_data_folder(monkeypatch, tmp_path):
    monkeypatch.setattr(cli, "DATA", str(tmp_path / "data"))
    with pytest.raises(cli.UsageError, match="needs the data/ folder of a checkout"):
        cli.demo_preset("race")
