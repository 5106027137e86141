"""`run_race.py` of a checkout; installed, the same command is `albert-run-race`.

Its flags and `main` are in `albert_tf/scripts/run_race.py`; `--help` lists them.
"""

from albert_tf.scripts.run_race import __doc__, run  # noqa: F401  (the script's usage is this module's docstring)

if __name__ == "__main__":
    run()
