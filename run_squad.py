"""`run_squad.py` of a checkout; installed, the same command is `albert-run-squad`.

Its flags and `main` are in `albert_tf/scripts/run_squad.py`; `--help` lists them.
"""

from albert_tf.scripts.run_squad import __doc__, run  # noqa: F401  (the script's usage is this module's docstring)

if __name__ == "__main__":
    run()
