"""The split behind `python -m bench.bench_sop_scaling`'s data-scaling curve: documents kept whole, the held-out
ones never trained on, the arms nested, the same split on every rerun, and as many training instances per arm."""

import collections
import os

from bench import bench_sop_scaling as scaling  # it defines its flags only when run


def _write(path, docs):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n\n\n".join("\n".join(d) for d in docs) + "\n")


def test_documents_are_read_and_written_whole(tmp_path):
    docs = [[f"Doc {i} line {j}." for j in range(1 + i % 3)] for i in range(7)]
    source = tmp_path / "in.txt"
    _write(source, docs)  # several blank lines between documents, no blank line at the end
    assert scaling.read_documents(str(source)) == docs
    out = str(tmp_path / "sub" / "out.txt")
    scaling.write_documents(out, docs[2:5])
    assert scaling.read_documents(out) == docs[2:5]
    assert open(out, encoding="utf-8").read().endswith("Doc 4 line 1.\n\n")
    assert sorted(os.listdir(tmp_path / "sub")) == ["out.txt"]


def test_the_split_holds_documents_out_and_nests_the_arms(tmp_path):
    books = {}
    for name in ("a.txt", "b.txt"):
        docs = [[f"{name} document {i}.", f"Its second sentence {i}."] for i in range(400)]
        _write(tmp_path / name, docs)
        books[name] = docs
    out = str(tmp_path / "split")
    fractions = [0.25, 0.5, 1.0]
    parts = scaling.split([str(tmp_path / n) for n in books], out, fractions, 0.1, seed=3)

    def read(part):
        return {tuple(d) for f in parts[part]["files"] for d in scaling.read_documents(f)}

    everything = {tuple(d) for docs in books.values() for d in docs}
    held = read("heldout")
    arms = [read(scaling.arm_name(f)) for f in fractions]
    assert 40 <= len(held) <= 120  # 10 % of 800, drawn
    assert not held & arms[-1] and held | arms[-1] == everything
    assert arms[0] < arms[1] < arms[2]
    for fraction, arm in zip(fractions, arms):
        assert abs(len(arm) / len(everything - held) - fraction) < 0.06
        assert parts[scaling.arm_name(fraction)]["documents"] == len(arm)
    per_file = collections.Counter(d[0].split()[0] for d in held)
    assert set(per_file) == set(books)  # every file gives held-out documents
    again = scaling.split([str(tmp_path / n) for n in books], out, fractions, 0.1, seed=3)
    assert again == parts
    other = scaling.split([str(tmp_path / n) for n in books], str(tmp_path / "other"), fractions, 0.1, seed=4)
    assert {tuple(d) for f in other["heldout"]["files"] for d in scaling.read_documents(f)} != held


def test_a_draw_is_fixed_by_seed_file_and_index_and_places_by_share():
    assert scaling.draw(1, "a.txt", 5) == scaling.draw(1, "a.txt", 5)
    assert len({scaling.draw(1, "a.txt", 5), scaling.draw(2, "a.txt", 5), scaling.draw(1, "b.txt", 5),
                scaling.draw(1, "a.txt", 6)}) == 4
    assert all(0.0 <= scaling.draw(7, "x", i) < 1.0 for i in range(1000))
    assert scaling.place(0.049, 0.05, 0.125) == "heldout"
    assert scaling.place(0.05, 0.05, 0.125) == "train"
    assert scaling.place(0.05 + 0.95 * 0.125, 0.05, 0.125) is None
    assert scaling.place(0.05 + 0.95 * 0.125, 0.05, 0.25) == "train"
    assert scaling.place(0.999, 0.05, 1.0) == "train"


def test_every_arm_makes_about_the_instances_of_the_whole_text():
    assert [scaling.dupe_factor_of(f, 15) for f in (0.125, 0.25, 0.5, 1.0)] == [120, 60, 30, 15]
    assert scaling.dupe_factor_of(1.0, 1) == 1 and scaling.dupe_factor_of(0.3, 1) == 3
    assert scaling.arm_name(0.125) == "docs-0.125" and scaling.arm_name(1.0) == "docs-1"


def test_held_out_sentence_order_is_measured_on_ordered_text_only():
    files = ["/w/heldout/extra-sst-2.txt", "/w/heldout/extra-race.txt", "/w/heldout/gutenberg-austen-emma.txt",
             "/w/heldout/extra-mrpc.txt", "/w/heldout/extra-squad.txt"]
    assert scaling.with_order(files) == [files[1], files[2], files[4]]
