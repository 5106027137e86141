"""The two sort orders of the data readers (albert_tf/data/natural_order.py): RACE's file names in natural order,
and an inferred label list (numbers by value first, then the other labels as text)."""

from albert_tf.data.natural_order import label_key, natural_key


def test_file_names_sort_with_their_digit_runs_as_numbers():
    names = ["10.txt", "2.txt", "a10b2.txt", "a2b10.txt", "a2b9.txt", "b.txt", "1.txt", "01.txt"]
    assert sorted(names, key=natural_key) == ["01.txt", "1.txt", "2.txt", "10.txt", "a2b9.txt", "a2b10.txt",
                                              "a10b2.txt", "b.txt"]
    assert natural_key("x12y3") == (["x", 12, "y", 3, ""], "x12y3")


def test_labels_that_are_numbers_come_first_by_value_then_the_others_as_text():
    labels = ["class2", "10", "-1", "2.5", "class10", "2", "neg", "1e1"]
    assert sorted(labels, key=label_key) == ["-1", "2", "2.5", "10", "1e1", "class10", "class2", "neg"]
    assert label_key("3") == (0, 3.0, "3") and label_key("pos") == (1, 0.0, "pos")
