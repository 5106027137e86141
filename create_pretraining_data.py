"""`create_pretraining_data.py` of a checkout; installed, the same command is `albert-create-pretraining-data`.

Its flags and `main` are in `albert_tf/scripts/create_pretraining_data.py`; `--help` lists them.
"""

from albert_tf.scripts.create_pretraining_data import __doc__, run  # noqa: F401  (the script's usage is this module's docstring)

if __name__ == "__main__":
    run()
