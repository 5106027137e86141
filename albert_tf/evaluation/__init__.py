"""Scores: GLUE task metrics, the official SQuAD v1.1 / v2.0 evaluation and post-processing, RACE accuracy."""
