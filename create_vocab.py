"""`create_vocab.py` of a checkout; installed, the same command is `albert-create-vocab`.

Its usage, flags and `main` are in `albert_tf/scripts/create_vocab.py`; `--help` lists them.
"""

from albert_tf.scripts.create_vocab import run

if __name__ == "__main__":
    run()
