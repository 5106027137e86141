"""The settings rules the guard checks before a script's `main` (albert_tf/guard.py): a required setting left
unset, one that may stand in for another, and two given that exclude each other, each one `UsageError` naming the
flags; outputs that exist already or that another run's files sit beside; and, through a real script, that the
check runs before anything is read or written."""

import dataclasses
import json
import multiprocessing
import os
import re
import subprocess
import sys

import pytest
from absl import flags

from albert_tf import cli, fileio, guard, settings_record
from albert_tf.errors import MissingDataError, RunError, UsageError
from albert_tf.settings import NON_NEGATIVE, Range, flag_specs, setting
from tests.helpers import REPO, subprocess_env


@dataclasses.dataclass
class _Request:
    input_file: str = setting(None, "In.", required=True)
    spm_model_file: str = setting(None, "Model.", required=("vocab_file",))
    vocab_file: str = setting(None, "Vocabulary.")
    num_output_shards: int = setting(1, "Shards.")
    shard_size_mb: float = setting(0.0, "MB per shard.", excludes=("num_output_shards",))
    runner: str = setting(None, "Runner.", choices=("DirectRunner", "DataflowRunner"))
    columns: list = setting(None, "Columns.", items=int, count=Range(1, 2), bounds=NON_NEGATIVE)
    overwrite: bool = setting(False, "Replace.", excludes=("runner",), why="a runner refuses existing outputs")


SPECS = {spec.name: spec for spec in flag_specs(_Request).values()}


def _values(**given):
    values = {name: spec.default for name, spec in SPECS.items()}
    values.update(given)
    return values


def test_a_run_with_its_required_settings_passes():
    guard.check_required(SPECS, _values(input_file="a.txt", spm_model_file="m.model"))
    guard.check_required(SPECS, _values(input_file="a.txt", vocab_file="vocab.txt"))
    guard.check_required(SPECS, _values(input_file="a.txt", vocab_file="v", shard_size_mb=5.0), ["shard_size_mb"])


@pytest.mark.parametrize("values, message", [
    (dict(spm_model_file="m.model"), "--input_file is required"),
    (dict(input_file="a.txt", spm_model_file=""), r"--spm_model_file \(or --vocab_file\) is required"),
])
def test_a_required_setting_left_unset_is_named(values, message):
    with pytest.raises(UsageError, match=f"^{message}$"):
        guard.check_required(SPECS, _values(**values))


@pytest.mark.parametrize("order, values", [
    (["num_output_shards", "shard_size_mb"], dict(num_output_shards=1, shard_size_mb=0.0)),
    (["shard_size_mb"], dict(num_output_shards=4, shard_size_mb=2.0)),
])
def test_settings_that_exclude_each_other_are_refused_together(order, values):
    with pytest.raises(UsageError, match="^give either --shard_size_mb or --num_output_shards, not both$"):
        guard.check_required(SPECS, _values(input_file="a", vocab_file="v", **values), order)


def test_an_exclusion_says_why_when_its_setting_does():
    with pytest.raises(UsageError, match="^give either --overwrite or --runner, not both: a runner refuses existing "
                                         "outputs$"):
        guard.check_required(SPECS, _values(input_file="a", vocab_file="v", overwrite=True, runner="DirectRunner"))


def test_params_built_in_code_meet_the_choices_and_bounds_a_flag_would():
    guard.check_params(_Request(input_file="a", vocab_file="v", runner="DataflowRunner"))
    with pytest.raises(UsageError, match="^--runner=Flink: must be one of DirectRunner, DataflowRunner$"):
        guard.check_params(_Request(input_file="a", vocab_file="v", runner="Flink"))
    with pytest.raises(UsageError, match=r"^--spm_model_file \(or --vocab_file\) is required$"):
        guard.check_params(_Request(input_file="a"))


def test_the_first_bad_value_named_is_the_first_the_user_gave():
    values = _values(input_file="a", vocab_file="v", runner="Flink", columns=["x"])
    with pytest.raises(UsageError, match="^--columns=x: takes whole numbers$"):
        guard.check_values(SPECS, values, order=["columns", "runner"])
    with pytest.raises(UsageError, match="^--runner=Flink: must be one of"):
        guard.check_values(SPECS, values, order=["runner", "columns"])
    with pytest.raises(UsageError, match="^--runner=Flink: must be one of"):
        guard.check_values(SPECS, {**values, "columns": None}, order=["runner"])


@pytest.mark.parametrize("columns, message", [
    (["a"], "--columns=a: takes whole numbers"),
    (["1", "2", "3"], r"--columns=1,2,3: the number of values must be in \[1, 2\]"),
    (["3", "-1"], "--columns=3,-1: each must be at least 0"),
])
def test_a_list_settings_items_are_read_counted_and_bounded(columns, message):
    guard.check_values(SPECS, _values(columns=["0", "3"]))
    with pytest.raises(UsageError, match=f"^{message}$"):
        guard.check_values(SPECS, _values(columns=columns))


def test_a_list_setting_reaches_its_params_as_items_of_its_type():
    flag_values = flags.FlagValues()
    cli.define_flags(_Request, flag_values=flag_values)
    flag_values(["prog", "--columns=3,4", "--input_file=a", "--vocab_file=v"])
    assert cli.params_from_flags(_Request, flag_values).columns == [3, 4]


@dataclasses.dataclass
class _Outputs:
    output_file: str = setting(None, "Files.", role="output_files", replaced_by="overwrite")
    output_dir: str = setting(None, "Shards.", role="output_dir", replaced_by="overwrite",
                              writes=("part-{shard:02d}-of-{num_output_shards:02d}.rec",))
    export_dir: str = setting(None, "Export.", role="output_tree", replaced_by="overwrite")
    log_dir: str = setting(None, "Logs.", role="output_dir", writes=("log-*.txt",))
    num_output_shards: int = setting(2, "Shards.")
    overwrite: bool = setting(False, "Replace.")


def test_write_patterns_fill_in_the_settings_they_name():
    spec = flag_specs(_Outputs)["output_dir"]
    assert guard.write_patterns(spec) == ["part-*-of-*.rec"]
    assert guard.write_patterns(spec, {"num_output_shards": 3}) == ["part-*-of-03.rec"]


def test_an_existing_output_is_refused_unless_it_may_be_replaced(tmp_path):
    """Each output role, from nothing there (passes) to something there: refused, naming the flag, the path and the
    setting that replaces it; passes with that setting."""
    (tmp_path / "a.rec").write_text("mine")
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "part-01-of-02.rec").write_text("mine")
    (tmp_path / "records" / "notes.txt").write_text("mine")
    (tmp_path / "empty").mkdir()
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "saved_model.pb").write_text("mine")
    cases = [
        (_Outputs(output_file=f"{tmp_path / 'new.rec'},{tmp_path / 'a.rec'}"),
         rf"^--output_file: {tmp_path / 'a.rec'} exists already \(1 of 2 outputs\); pass --overwrite to replace, "
         "or choose another name$"),
        (_Outputs(output_dir=str(tmp_path / "records")),
         rf"^--output_dir: {tmp_path / 'records' / 'part-01-of-02.rec'} exists already \(1 output\(s\) of this "
         r"run\); pass --overwrite"),
        (_Outputs(export_dir=str(tmp_path / "export")),
         rf"^--export_dir {tmp_path / 'export'} exists and is not empty; pass --overwrite to replace it$"),
    ]
    for params, message in cases:
        with pytest.raises(fileio.OutputError, match=message):
            guard.check_params(params)
        guard.check_params(dataclasses.replace(params, overwrite=True))
    for params in (_Outputs(output_file=str(tmp_path / "new.rec")), _Outputs(export_dir=str(tmp_path / "empty")),
                   _Outputs(output_dir=str(tmp_path / "none")), _Outputs(log_dir=str(tmp_path / "records")),
                   _Outputs(output_dir=str(tmp_path / "empty"))):
        guard.check_params(params)
    assert sorted(p.name for p in (tmp_path / "records").iterdir()) == ["notes.txt", "part-01-of-02.rec"]


def test_another_runs_files_in_an_output_folder_are_refused_even_with_overwrite(tmp_path):
    """Shards written with another count would be read by a glob over the folder with this run's."""
    for i in range(3):
        (tmp_path / f"part-0{i}-of-03.rec").write_text("mine")
    message = (rf"^--output_dir {tmp_path} holds 3 file\(s\) of another run \(part-00-of-03.rec, \.\.\.\) "
               "that a glob over it would read with this run's; remove them or choose another directory$")
    for overwrite in (False, True):
        with pytest.raises(fileio.OutputError, match=message):
            guard.check_params(_Outputs(output_dir=str(tmp_path), overwrite=overwrite))
    guard.check_params(_Outputs(output_dir=str(tmp_path), num_output_shards=3, overwrite=True))


def test_a_remote_output_that_exists_is_refused_too():
    """gs:// and other remote outputs are looked up through tf.io.gfile (here its in-memory file system)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    path = "ram://guard_test/one.rec"
    tf.io.gfile.makedirs("ram://guard_test")
    with tf.io.gfile.GFile(path, "w") as f:
        f.write("mine")
    with pytest.raises(fileio.OutputError, match="^--output_file: ram://guard_test/one.rec exists already"):
        guard.check_params(_Outputs(output_file=path))
    guard.check_params(_Outputs(output_file="ram://guard_test/two.rec"))


def test_an_existing_output_says_why_when_the_replacing_setting_is_excluded(tmp_path):
    """With a setting given that excludes `--overwrite` (Beam's --runner), the refusal tells that setting's reason
    instead of suggesting a flag the run would refuse."""
    @dataclasses.dataclass
    class Beam:
        output_file: str = setting(None, "Out.", role="output_files", replaced_by="overwrite")
        runner: str = setting(None, "Runner.")
        overwrite: bool = setting(False, "Replace.", excludes=("runner",), why="the runner always refuses them")

    (tmp_path / "a.rec").write_text("mine")
    with pytest.raises(fileio.OutputError, match=r"exists already \(1 of 1 outputs\); the runner always refuses "
                                                 "them$"):
        guard.check_params(Beam(output_file=str(tmp_path / "a.rec"), runner="DirectRunner"))
    with pytest.raises(fileio.OutputError, match="; pass --overwrite to replace, or choose another name$"):
        guard.check_params(Beam(output_file=str(tmp_path / "a.rec")))


def test_replaced_by_is_for_outputs_and_names_a_bool_setting_beside_them():
    with pytest.raises(ValueError, match="replaced_by"):
        setting(None, "In.", role="input_file", replaced_by="overwrite")

    @dataclasses.dataclass
    class Missing:
        output_file: str = setting(None, "Out.", role="output_file", replaced_by="overwrite")

    @dataclasses.dataclass
    class NotBool:
        output_file: str = setting(None, "Out.", role="output_file", replaced_by="mode")
        mode: str = setting("a", "Mode.")

    for params in (Missing, NotBool):
        with pytest.raises(ValueError, match=rf"^{params.__name__}.output_file: replaced_by=.* must name a bool"):
            flag_specs(params)


@pytest.mark.slow
def test_a_script_refuses_a_missing_setting_and_stray_arguments_before_writing(tmp_path):
    """create_vocab.py without --model_prefix, and with a stray argument: one line each, exit 2, nothing written."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("One sentence.\nAnother one.\n")
    runs = {"missing": [f"--input_file={corpus}"],
            "stray": [f"--input_file={corpus}", f"--model_prefix={tmp_path / 'vocab'}", "extra"]}
    for case, argv in runs.items():
        result = subprocess.run([sys.executable, "create_vocab.py", *argv], cwd=REPO, env=subprocess_env(),
                                capture_output=True, text=True, timeout=300, check=False)
        assert result.returncode == 2, (case, result.stderr)
        last = result.stderr.strip().splitlines()[-1]
        expected = "--model_prefix is required" if case == "missing" else "unexpected arguments: extra"
        assert last == f"create_vocab.py: error: {expected}", (case, result.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]


# ----------------------------------------------------------------- files, locks, protection (quick; the sweep over
# every script's declarations is tests/faults/test_declared.py)
@dataclasses.dataclass
class _Files:
    input_file: str = setting(None, "In.", role="input_file")
    input_files: str = setting(None, "Ins.", role="input_files")
    data_dir: str = setting(None, "Data.", role="input_dir")
    model_dir: str = setting(None, "Model.", role="input_tree")
    init_checkpoint: str = setting(None, "Weights.", role="input_checkpoint")
    output_file: str = setting(None, "Out.", role="output_file")
    output_dir: str = setting(None, "Run.", role="output_dir", writes=("ckpt-*", "eval_results.txt"))
    export_dir: str = setting(None, "Export.", role="output_tree")
    output_path: str = setting(None, "Prefix.", role="output_prefix", writes=("", ".index"))


FILE_SPECS = flag_specs(_Files)


@pytest.fixture
def user_files(tmp_path):
    """A user's files: a text file (and a symbolic and a hard link to it), a SavedModel, a checkpoint folder and
    prefix, a run folder."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "in.txt").write_text("the user's text")
    os.symlink(tmp_path / "data" / "in.txt", tmp_path / "link.txt")
    os.link(tmp_path / "data" / "in.txt", tmp_path / "hard.txt")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "saved_model.pb").write_text("the user's model")
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "ckpt-1.index").write_text("the user's weights")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "ckpt-5.index").write_text("the user's run")
    (tmp_path / "run" / "notes.txt").write_text("the user's notes")
    return tmp_path


def _guard_files(**values):
    with guard.guarded(FILE_SPECS, values):
        pass


@pytest.mark.parametrize("values, message", [
    ({"input_file": "data/in.txt", "output_file": "data/in.txt"}, "--output_file {t}/data/in.txt is the input "
     "--input_file {t}/data/in.txt; write the output elsewhere"),
    ({"input_file": "data/in.txt", "output_file": "data/../data/in.txt"}, "--output_file {t}/data/../data/in.txt is "
     "the input --input_file"),
    ({"input_file": "data/in.txt", "output_file": "link.txt"}, "--output_file {t}/link.txt is the input"),
    ({"input_file": "data/in.txt", "output_file": "hard.txt"}, "--output_file {t}/hard.txt is the input"),
    ({"input_files": "data/*.txt", "output_file": "data/in.txt"}, "--output_file {t}/data/in.txt is the input "
     "--input_files {t}/data/in.txt"),
    ({"init_checkpoint": "ckpt/ckpt-1", "output_path": "ckpt/ckpt-1"}, "--output_path {t}/ckpt/ckpt-1 is the input "
     "--init_checkpoint {t}/ckpt/ckpt-1"),
    ({"init_checkpoint": "ckpt/ckpt-1", "output_file": "ckpt/ckpt-1.index"}, "--output_file {t}/ckpt/ckpt-1.index is "
     "the input --init_checkpoint {t}/ckpt/ckpt-1.index"),
    ({"model_dir": "model", "output_file": "model/variables.txt"}, "--output_file {t}/model/variables.txt lies "
     "inside the input --model_dir {t}/model"),
    ({"init_checkpoint": "ckpt", "output_dir": "ckpt/more"}, "--output_dir {t}/ckpt/more lies inside the input "
     "--init_checkpoint {t}/ckpt"),
    ({"init_checkpoint": "run/ckpt-5", "output_dir": "run"}, "--output_dir {t}/run would write over the input "
     "--init_checkpoint {t}/run/ckpt-5"),
    ({"input_file": "model/saved_model.pb", "export_dir": "model"}, "--export_dir {t}/model would write over the "
     "input --input_file {t}/model/saved_model.pb"),
    ({"output_file": "out.txt", "output_path": "out.txt"}, "--output_file and --output_path are the same path "
     "{t}/out.txt; give each its own"),
])
def test_an_output_over_an_input_is_refused_however_spelled(user_files, values, message):
    values = {k: str(user_files / v) for k, v in values.items()}
    before = sorted(str(p) for p in user_files.rglob("*"))
    with pytest.raises(UsageError, match="^" + re.escape(message.format(t=user_files))):
        _guard_files(**values)
    assert sorted(str(p) for p in user_files.rglob("*")) == before


def test_a_relative_input_is_looked_up_in_its_folder_setting(user_files, monkeypatch):
    """`under=`: a relative --train_file not found as given is the one in --data_dir (there it collides)."""
    @dataclasses.dataclass
    class Own:
        data_dir: str = setting(None, "Data.", role="input_dir")
        train_file: str = setting(None, "Train.", role="input_file", under="data_dir")
        output_file: str = setting(None, "Out.", role="output_file")

    monkeypatch.chdir(user_files / "run")
    specs = {spec.name: spec for spec in flag_specs(Own).values()}
    data = str(user_files / "data")
    with pytest.raises(UsageError, match=f"is the input --train_file {re.escape(data)}/in.txt"):
        with guard.guarded(specs, {"data_dir": data, "train_file": "in.txt", "output_file": f"{data}/in.txt"}):
            pass
    with guard.guarded(specs, {"data_dir": data, "train_file": "notes.txt", "output_file": f"{data}/in.txt"}):
        pass  # found as given (in the working folder): not the one in --data_dir


def test_a_value_outside_its_bounds_is_refused_and_one_inside_passes():
    spec = flag_specs(_Request)["columns"]
    bounded = dataclasses.replace(spec, kind="integer", bounds=NON_NEGATIVE, items=None, count=None)
    guard.check_values({"columns": bounded}, {"columns": 0})
    with pytest.raises(UsageError, match=r"^--columns=-1: must be at least 0$"):
        guard.check_values({"columns": bounded}, {"columns": -1})


def test_an_output_folder_may_hold_an_input_among_names_it_does_not_write(user_files):
    _guard_files(input_file=str(user_files / "run" / "notes.txt"), output_dir=str(user_files / "run"))
    _guard_files(init_checkpoint=str(user_files / "ckpt" / "ckpt-1"), output_file=str(user_files / "ckpt" / "x"))
    (user_files / "data" / "in.txt.bak").write_text("an older copy")  # only a checkpoint prefix names files so
    _guard_files(input_file=str(user_files / "data" / "in.txt"), output_file=str(user_files / "data" / "in.txt.bak"))


@pytest.mark.parametrize("values, error, message", [
    ({"input_file": "data"}, MissingDataError, "--input_file {t}/data is a directory, not a file"),
    ({"data_dir": "data/in.txt"}, MissingDataError, "--data_dir {t}/data/in.txt is a file, not a directory"),
    ({"output_file": "run"}, fileio.OutputError, "cannot write --output_file {t}/run: it is a directory"),
    ({"output_dir": "data/in.txt"}, fileio.OutputError, "--output_dir {t}/data/in.txt is a file, not a directory"),
    ({"export_dir": "run"}, fileio.OutputError, "--export_dir {t}/run holds files albert_tf did not write there "
     "(ckpt-5.index, notes.txt), which replacing it would delete"),
])
def test_a_file_for_a_folder_or_the_reverse_and_foreign_files_are_refused(user_files, values, error, message):
    with pytest.raises(error, match="^" + re.escape(message.format(t=user_files))):
        _guard_files(**{k: str(user_files / v) for k, v in values.items()})


def test_inputs_are_protected_for_the_run_and_only_for_it(user_files):
    source = str(user_files / "data" / "in.txt")
    with guard.guarded(FILE_SPECS, {"input_file": source, "output_dir": str(user_files / "out")}):
        with pytest.raises(UsageError, match=f"would overwrite the input --input_file {re.escape(source)}"):
            fileio.write_text(str(user_files / "link.txt"), "replaced")
    assert (user_files / "data" / "in.txt").read_text() == "the user's text"
    fileio.write_text(source, "replaced later")  # the run is over
    assert not (user_files / "out").exists()  # a folder the lock made and nothing was written into goes


def _hold_lock(flag, path, spec, tag, ready, done):
    with guard._lock(flag, path, spec, tag):  # pylint: disable=protected-access
        ready.set()
        done.wait(60)


@pytest.mark.parametrize("name, value", [("output_dir", "run"), ("output_file", "data/out.txt"),
                                         ("export_dir", "export"), ("output_path", "ckpt/model")])
def test_an_output_another_run_holds_is_refused_naming_its_pid(user_files, name, value):
    path = str(user_files / value)
    spec = FILE_SPECS[name]
    _, outputs = guard.declared_files({name: spec}, {name: path})
    context = multiprocessing.get_context("fork")
    ready, done = context.Event(), context.Event()
    holder = context.Process(target=_hold_lock, args=(*outputs[0], None, ready, done))
    holder.start()
    try:
        assert ready.wait(30)
        with pytest.raises(RunError, match=rf"--{name} .*is in use by another run \(pid {holder.pid} "):
            _guard_files(**{name: path})
        with guard.guarded(FILE_SPECS, {name: path}, lock_tag="worker-1"):  # a multi-worker job's other task
            pass
    finally:
        done.set()
        holder.join(30)
    _guard_files(**{name: path})


def test_what_a_killed_run_left_in_the_staging_folder_is_swept(user_files):
    sidecar = fileio.sidecar_dir(str(user_files / "run"))
    os.makedirs(sidecar)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    left = os.path.join(sidecar, f".eval_results.txt.partial-{dead}-abcdef12")
    alive = os.path.join(sidecar, f".eval_results.txt.partial-{os.getpid()}-abcdef12")
    for path in (left, alive):
        with open(path, "w", encoding="utf-8") as f:
            f.write("partial")
    _guard_files(output_dir=str(user_files / "run"))
    assert os.listdir(sidecar) == [os.path.basename(alive)]
    os.replace(alive, left)
    _guard_files(output_dir=str(user_files / "run"))
    assert not os.path.exists(sidecar)  # the staging folder goes with the last thing in it


def test_a_remote_output_over_a_remote_input_is_refused_and_the_input_protected():
    """gs:// paths are compared as written (no lock, no staging sweep for them); here on TensorFlow's ram://."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    source = "ram://guard_remote/in.txt"
    with tf.io.gfile.GFile(source, "w") as f:
        f.write("the user's text")
    with pytest.raises(UsageError, match=f"^--output_file {source} is the input --input_files {source}"):
        _guard_files(input_files=f"{source},ram://guard_remote/other.txt", output_file=source)
    with pytest.raises(UsageError, match="^--export_dir ram://guard_remote would write over the input"):
        _guard_files(input_file=source, export_dir="ram://guard_remote")
    with guard.guarded(FILE_SPECS, {"input_file": source, "output_dir": "ram://guard_remote/run"}):
        with pytest.raises(UsageError, match=f"would overwrite the input --input_file {source}"):
            fileio.write_text(source, "replaced")
    with tf.io.gfile.GFile(source) as f:
        assert f.read() == "the user's text"


def _locks(folder):
    sidecar = fileio.sidecar_dir(str(folder))
    return sorted(n for n in os.listdir(sidecar) if "lock" in n) if os.path.isdir(sidecar) else []


@pytest.mark.parametrize("name, value, tag, folder, locks", [
    ("output_dir", "run", None, "run", ["lock"]),
    ("output_dir", "run", "worker-1", "run", ["lock-worker-1"]),
    ("output_file", "data/out.txt", None, "data", ["out.txt.lock"]),
    ("output_file", "data/out.txt", "worker-1", "data", ["out.txt.worker-1.lock"]),
    ("output_path", "ckpt/model", None, "ckpt", ["model.lock"]),  # one lock for the prefix's files
    ("export_dir", "export", None, ".", ["export.lock"]),  # beside it: the folder is replaced by a rename
])
def test_each_output_is_locked_where_its_kind_says(user_files, name, value, tag, folder, locks):
    with guard.guarded(FILE_SPECS, {name: str(user_files / value)}, lock_tag=tag):
        assert _locks(user_files / folder) == locks
        if name == "export_dir":
            assert not (user_files / "export").exists()  # not made by its lock
    assert _locks(user_files / folder) == []


def test_a_folder_written_whole_whose_parent_is_read_only_is_locked_inside(user_files, monkeypatch):
    """It is replaced file by file then (no rename in the parent), so the lock is its own."""
    (user_files / "export").mkdir()
    monkeypatch.setattr(guard.os, "access", lambda path, mode: os.path.abspath(path) != str(user_files))
    with guard.guarded(FILE_SPECS, {"export_dir": str(user_files / "export")}):
        assert _locks(user_files / "export") == ["lock"] and _locks(user_files) == []
    monkeypatch.undo()
    with guard.guarded(FILE_SPECS, {"export_dir": str(user_files / "export")}):
        assert _locks(user_files / "export") == [] and _locks(user_files) == ["export.lock"]


def test_outputs_of_different_flags_on_different_paths_pass(user_files):
    _guard_files(output_file=str(user_files / "out.txt"), output_dir=str(user_files / "run2"),
                 output_path=str(user_files / "ckpt" / "model"))


def test_an_output_folder_may_hold_a_folder_read_whole_that_it_does_not_write(user_files):
    (user_files / "run" / "exported").mkdir()
    _guard_files(model_dir=str(user_files / "run" / "exported"), output_dir=str(user_files / "run"))
    with pytest.raises(UsageError, match="would write over the input --model_dir"):
        (user_files / "run" / "ckpt-7").mkdir()
        _guard_files(model_dir=str(user_files / "run" / "ckpt-7"), output_dir=str(user_files / "run"))


def test_a_remote_output_folder_is_refused_only_over_the_names_it_writes():
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    for name in ("ckpt-5.index", "notes.txt"):
        with tf.io.gfile.GFile(f"ram://guard_remote_run/run/{name}", "w") as f:
            f.write("the user's")
    _guard_files(input_file="ram://guard_remote_run/run/notes.txt", output_dir="ram://guard_remote_run/run/")
    with pytest.raises(UsageError, match="^--output_dir ram://guard_remote_run/run would write over the input "
                                         "--input_file ram://guard_remote_run/run/ckpt-5.index"):
        _guard_files(input_file="ram://guard_remote_run/run/ckpt-5.index", output_dir="ram://guard_remote_run/run")


def test_the_guard_itself_checks_values_existing_outputs_and_required_settings(tmp_path):
    """`guarded` alone (as `cli.run` and the library call it), not only its parts: each check runs there."""
    specs = {spec.name: spec for spec in flag_specs(_Outputs).values()}
    values = {name: spec.default for name, spec in specs.items()}
    (tmp_path / "a.rec").write_text("mine")
    with pytest.raises(fileio.OutputError, match="exists already"):
        with guard.guarded(specs, {**values, "output_file": str(tmp_path / "a.rec")}):
            pass
    request = {spec.name: spec for spec in flag_specs(_Request).values()}
    given = {name: spec.default for name, spec in request.items()}
    with pytest.raises(UsageError, match="^--input_file is required$"):
        with guard.guarded(request, {**given, "spm_model_file": "m.model"}):
            pass
    with pytest.raises(UsageError, match="^--runner=Spark: must be one of DirectRunner, DataflowRunner"):
        with guard.guarded(request, {**given, "input_file": "a.txt", "spm_model_file": "m", "runner": "Spark"}):
            pass


def test_a_required_bool_names_every_setting_that_may_stand_in():
    @dataclasses.dataclass
    class Modes:
        do_train: bool = setting(False, "Train.", required=("do_eval", "do_predict"))
        do_eval: bool = setting(False, "Evaluate.")
        do_predict: bool = setting(False, "Predict.")
        do_export: bool = setting(False, "Export.", required=True)

    specs = {spec.name: spec for spec in flag_specs(Modes).values()}
    for name in ("do_train", "do_eval", "do_predict"):
        guard.check_required(specs, {"do_train": False, "do_eval": False, "do_predict": False, "do_export": True,
                                     name: True})
    with pytest.raises(UsageError, match=r"^At least one of --do_train, --do_eval or --do_predict must be True\.$"):
        guard.check_required(specs, {"do_train": False, "do_eval": False, "do_predict": False, "do_export": True})
    with pytest.raises(UsageError, match=r"^At least one of --do_export must be True\.$"):
        guard.check_required(specs, {"do_train": True, "do_eval": False, "do_predict": False, "do_export": False})


def test_a_folder_written_whole_names_three_foreign_files_and_counts_the_rest(user_files):
    (user_files / "export").mkdir()
    for i in range(5):
        (user_files / "export" / f"f{i}.txt").write_text("the user's")
    with pytest.raises(fileio.OutputError, match=r"\(f0.txt, f1.txt, f2.txt and 2 more\), which replacing"):
        _guard_files(export_dir=str(user_files / "export"))
    (user_files / "export" / "f4.txt").unlink()
    with pytest.raises(fileio.OutputError, match=r"\(f0.txt, f1.txt, f2.txt and 1 more\), which replacing"):
        _guard_files(export_dir=str(user_files / "export"))
    (user_files / "export" / "f3.txt").unlink()
    with pytest.raises(fileio.OutputError, match=r"\(f0.txt, f1.txt, f2.txt\), which replacing"):
        _guard_files(export_dir=str(user_files / "export"))


def test_an_input_reached_through_a_link_or_inside_a_written_folder_is_still_written_over(user_files):
    """Local paths are compared with their links resolved; what counts is the first name below the output folder
    (a checkpoint folder `ckpt-5/` is one the run writes, whatever lies inside it)."""
    os.symlink(user_files / "run", user_files / "runlink")
    with pytest.raises(UsageError, match="would write over the input --input_file"):
        _guard_files(input_file=str(user_files / "runlink" / "ckpt-5.index"), output_dir=str(user_files / "run"))
    (user_files / "run" / "ckpt-6").mkdir()
    (user_files / "run" / "ckpt-6" / "notes.txt").write_text("the user's")
    with pytest.raises(UsageError, match="would write over the input --input_file"):
        _guard_files(input_file=str(user_files / "run" / "ckpt-6" / "notes.txt"), output_dir=str(user_files / "run"))


def test_a_remote_input_inside_a_written_folder_is_written_over():
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    source = "ram://guard_remote_deep/run/ckpt-9/notes.txt"
    with tf.io.gfile.GFile(source, "w") as f:
        f.write("the user's")
    with pytest.raises(UsageError, match="would write over the input --input_file"):
        _guard_files(input_file=source, output_dir="ram://guard_remote_deep/run")


def test_a_declared_check_runs_with_the_other_settings_in_the_order_given():
    seen = []

    def even_unless_odd_allowed(value, values):
        seen.append((value, values["allow_odd"]))
        if value % 2 and not values["allow_odd"]:
            raise UsageError(f"--count={value}: must be even unless --allow_odd")

    @dataclasses.dataclass
    class Checked:
        count: int = setting(None, "Count.", check=even_unless_odd_allowed)
        allow_odd: bool = setting(False, "Odd.")
        size: int = setting(1, "Size.", bounds=NON_NEGATIVE)

    specs = {spec.name: spec for spec in flag_specs(Checked).values()}
    guard.check_values(specs, {"count": None, "allow_odd": False, "size": 1})
    assert seen == []  # unset: nothing to check
    guard.check_values(specs, {"count": 3, "allow_odd": True, "size": 1})
    with pytest.raises(UsageError, match=r"^--count=3: must be even unless --allow_odd$"):
        guard.check_values(specs, {"count": 3, "allow_odd": False, "size": -1}, order=["count", "size"])
    with pytest.raises(UsageError, match=r"^--size=-1: must be at least 0$"):
        guard.check_values(specs, {"count": 3, "allow_odd": False, "size": -1}, order=["size", "count"])
    with pytest.raises(UsageError, match="must be even"):
        guard.check_params(Checked(count=5))  # a params dataclass built in code meets it too


# ----------------------------------------------------------------- the settings record
@dataclasses.dataclass
class _Recorded:
    input_file: str = setting(None, "In.", role="input_file")
    output_file: str = setting(None, "Out.", role="output_file", records=True)
    output_dir: str = setting(None, "Run.", role="output_dir", writes=("part-*",), records=True)
    export_dir: str = setting(None, "Export.", role="output_tree", records=True)
    output_path: str = setting(None, "Prefix.", role="output_prefix", writes=(".model",), records=True)
    output_files: str = setting(None, "Files.", role="output_files", records=True)
    cache_dir: str = setting(None, "Cache.", role="output_dir", writes=("*.tf_record",))
    rate: float = setting(0.5, "Rate.")
    columns: list = setting(None, "Columns.", items=int)


RECORDED = flag_specs(_Recorded)


@pytest.mark.parametrize("name, value, record", [
    ("output_file", "out/preds.jsonl", "out/preds.jsonl.settings.json"),
    ("output_dir", "records", "records/settings.json"),
    ("export_dir", "exports/model/", "exports/model.settings.json"),
    ("output_path", "vocab/v2k", "vocab/v2k.settings.json"),
    ("output_files", "a.tfrecord,b.tfrecord", "a.tfrecord.settings.json"),
    ("export_dir", ".", "../work.settings.json"),  # beside the folder, whatever its name's spelling
])
def test_a_run_that_succeeds_records_its_settings_where_its_output_kind_says(tmp_path, monkeypatch, name, value,
                                                                              record):
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.setattr(sys, "argv", ["tool.py", f"--{name}={value}", "--rate=0.25"])
    values = {"cache_dir": "cache", "rate": 0.25, "columns": [1, 2], "input_file": None, name: value}
    with guard.guarded(RECORDED, values):
        assert not os.path.exists(record), "the record is written once the run has succeeded"
    recorded = json.loads((tmp_path / "work" / record).read_text())
    assert recorded["settings"] == values and list(recorded["settings"]) == list(values)
    assert recorded["command"] == ["tool.py", f"--{name}={value}", "--rate=0.25"]
    assert recorded["versions"]["albert_tf"] and recorded["versions"]["tensorflow"]
    assert not os.path.exists("cache/settings.json")  # only the output declared records=True holds it


def test_a_failed_run_or_standard_output_records_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RunError), guard.guarded(RECORDED, {"output_file": "out.txt"}):
        raise RunError("the run failed")
    with guard.guarded(RECORDED, {"output_file": "-"}):
        pass
    assert os.listdir(tmp_path) == []


def test_a_record_is_an_output_checked_as_any(tmp_path):
    """A record never replaces an input, and one that names a folder is refused before the run."""
    data = tmp_path / "out.txt.settings.json"
    data.write_text("the user's settings")
    with pytest.raises(UsageError, match=r"--output_file \(its settings record\) .*out.txt.settings.json is the "
                                         r"input --input_file"), \
            guard.guarded(RECORDED, {"input_file": str(data), "output_file": str(tmp_path / "out.txt")}):
        pytest.fail("no work may start")
    (tmp_path / "v.settings.json").mkdir()
    with pytest.raises(fileio.OutputError, match=r"cannot write --output_path \(its settings record\) .*: it is a "
                                                 r"directory"), \
            guard.guarded(RECORDED, {"output_path": str(tmp_path / "v")}):
        pytest.fail("no work may start")
    assert data.read_text() == "the user's settings"


def test_records_is_for_outputs():
    with pytest.raises(ValueError, match="records=True"):
        setting(None, "In.", role="input_file", records=True)


def test_a_remote_outputs_record_is_named_as_given():
    assert settings_record.record_path("output_tree", "gs://b/export/") == "gs://b/export.settings.json"
    assert settings_record.record_path("output_dir", "gs://b/records") == "gs://b/records/settings.json"
