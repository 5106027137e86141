"""`run_pretraining.py` of a checkout; installed, the same command is `albert-run-pretraining`.

Its flags and `main` are in `albert_tf/scripts/run_pretraining.py`; `--help` lists them.
"""

from albert_tf.scripts.run_pretraining import __doc__, run  # noqa: F401  (the script's usage is this module's docstring)

if __name__ == "__main__":
    run()
