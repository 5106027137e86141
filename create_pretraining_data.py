"""`create_pretraining_data.py` of a checkout; installed, the same command is `albert-create-pretraining-data`.

Its usage, flags and `main` are in `albert_tf/scripts/create_pretraining_data.py`; `--help` lists them.
"""

from albert_tf.scripts.create_pretraining_data import run

if __name__ == "__main__":
    run()
