"""`export_model.py` of a checkout; installed, the same command is `albert-export-model`.

Its flags and `main` are in `albert_tf/scripts/export_model.py`; `--help` lists them.
"""

from albert_tf.scripts.export_model import __doc__, run  # noqa: F401  (the script's usage is this module's docstring)

if __name__ == "__main__":
    run()
