"""`run_race.py` of a checkout; installed, the same command is `albert-run-race`.

Its usage, flags and `main` are in `albert_tf/scripts/run_race.py`; `--help` lists them.
"""

from albert_tf.scripts.run_race import run

if __name__ == "__main__":
    run()
