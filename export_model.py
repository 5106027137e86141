"""`export_model.py` of a checkout; installed, the same command is `albert-export-model`.

Its usage, flags and `main` are in `albert_tf/scripts/export_model.py`; `--help` lists them.
"""

from albert_tf.scripts.export_model import run

if __name__ == "__main__":
    run()
