"""The export folder rules (albert_tf/serving/savedmodel.py): what counts as one of this program's exports (and
so may be replaced), why a folder cannot be written, and the size of an export's weights."""

import json

import pytest

from albert_tf.serving import savedmodel
from tests.helpers import make_files


def test_what_counts_as_an_export(tmp_path):
    assert savedmodel.is_export(make_files(tmp_path / "sm", "saved_model.pb", "fingerprint.pb", "assets.extra/x"))
    assert savedmodel.is_export(make_files(tmp_path / "every_part", "saved_model.pb", "saved_model.pbtxt",
                                           "fingerprint.pb", "variables/variables.index", "assets/a", "assets.extra/x"))
    assert not savedmodel.is_export(make_files(tmp_path / "graphless", "variables/variables.index"))
    assert not savedmodel.is_export(make_files(tmp_path / "with_data", "saved_model.pb", "train.tsv"))
    (tmp_path / "nothing").mkdir()
    assert not savedmodel.is_export(str(tmp_path / "nothing"))
    assert not savedmodel.is_export(make_files(tmp_path / "squad_file", "ids"))  # `ids` a file, not a folder
    assert not savedmodel.is_export(make_files(tmp_path / "squad_half", "ids/saved_model.pb", "text/notes.txt"))
    assert not savedmodel.is_export(make_files(tmp_path / "squad_versions", "ids/3/saved_model.pb",
                                               "ids/v4/saved_model.pb"))
    assert savedmodel.is_export(make_files(tmp_path / "squad_one", "text/1/saved_model.pb"))
    lite = make_files(tmp_path / "lite", "model.tflite", "30k-clean.model")
    (tmp_path / "lite" / "tflite_info.json").write_text(json.dumps({"tokenizer_file": "30k-clean.model"}))
    assert savedmodel.is_export(lite)
    (tmp_path / "lite" / "tflite_info.json").write_text("[]")  # no object: not this program's
    assert not savedmodel.is_export(lite)
    (tmp_path / "lite" / "tflite_info.json").write_text("{}")  # no tokenizer named: the model file is foreign
    assert not savedmodel.is_export(lite)
    assert not savedmodel.is_export(make_files(tmp_path / "empty_ids", "ids/.keep"))


def test_why_a_folder_cannot_be_written(tmp_path):
    assert savedmodel.export_dir_problem(str(tmp_path / "new"), overwrite=False) is None
    (tmp_path / "empty").mkdir()
    assert savedmodel.export_dir_problem(str(tmp_path / "empty"), overwrite=False) is None
    make_files(tmp_path, "file")
    assert savedmodel.export_dir_problem(str(tmp_path / "file"), True) == f"export directory {tmp_path}/file is a file"
    old = make_files(tmp_path / "old", "saved_model.pb", "variables/variables.index")
    assert savedmodel.export_dir_problem(old, False) == \
        f"export directory {old} exists and is not empty; pass --overwrite to replace it"
    assert savedmodel.export_dir_problem(old, True) is None
    notes = make_files(tmp_path / "notes", "a.txt", "b.txt", "c.txt", "d.txt")
    assert savedmodel.export_dir_problem(notes, True) == (
        f"export directory {notes} holds files that are not an export (a.txt, b.txt, c.txt, ...); --overwrite "
        "replaces only an earlier export: choose another --export_dir")
    with pytest.raises(savedmodel.ExportError, match="is not empty"):
        savedmodel.check_export_dir(old, False)
    savedmodel.check_export_dir(old, True)


def test_the_size_counts_the_weights_apart(tmp_path):
    folder = make_files(tmp_path / "sm", "saved_model.pb", content=b"g" * 10)
    make_files(folder, "variables/variables.data-00000-of-00001", content=b"w" * 100)
    make_files(folder, "variables/variables.index", content=b"i" * 5)
    make_files(folder, "assets/variables/x.txt", content=b"a" * 7)  # named like them, not under the top variables/
    assert savedmodel.saved_model_size(folder) == {"variables": 105, "total": 122}
