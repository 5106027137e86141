"""Data to records and batches: pretraining instances, GLUE, SQuAD and RACE features, the TFRecord helpers."""
