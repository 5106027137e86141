"""`prepare_corpus.py` of a checkout; installed, the same command is `albert-prepare-corpus`.

Its usage, flags and `main` are in `albert_tf/scripts/prepare_corpus.py`; `--help` lists them.
"""

from albert_tf.scripts.prepare_corpus import run

if __name__ == "__main__":
    run()
