"""Pretraining records as an Apache Beam pipeline (`create_pretraining_data_beam`); docs/beam.md tells how to run it
locally and on Dataflow, Flink or Spark.

The only package that imports `apache_beam` (the `[beam]` extra, requirements-beam.txt); the core never needs it.
The records are those of the local tool (`pipeline.create_pretraining_data`) for the same inputs, flags and seed,
as a multiset: the shard rule (`shards.file_cuts`) and one shard's records (`build.shard_records`) are the same code.

The launcher (`launcher`) only lists the input files (names and sizes, no contents; `files`). The pipeline:

  listed files -> SnapShards (a worker checks each file and cuts it at document boundaries: `file_cuts` reads the
  first 64 KiB and a few lines after each target offset) -> SpreadShards (Reshuffle: shards to all workers) ->
  BuildRecords (`shard_records`: the shard's byte range read, tokenized, turned into serialized examples, framed as
  TFRecord in batches, `tfrecord_writer.frame_records`; both stages in `build_records`) ->
    without the global shuffle: GroupByFile -> Write (an output file's frames into Beam's temporary folder);
    with it: GlobalShuffle (GroupByKey on a random bucket) -> BucketOrder (a bucket sorted by its random keys, written
    as a segment file in the temporary folder) -> GroupByFile (the segments' names) -> Write (an output file as its
    buckets' segments, in bucket order) ->
  Finalize (the files renamed to `<prefix>-SSSSS-of-NNNNN<suffix>`, the temporary folder removed; `write`).

Records cross the stage boundaries as a few large `bytes` elements (`frames`: the TFRecord frames of up to
`frames.BATCH_BYTES` of records for one output file or one shuffle bucket), never one element per record.
For local outputs (one machine) BuildRecords writes each batch as a segment file in the temporary folder instead,
and only (segment, offset, length) goes through the runner: a copy on disk costs less than the runner's trip.

A worker's input error reaches the launcher marked inside whatever the runner raises (`worker_errors`) and is
re-raised as the local tool's one line; Beam's options and runner choice are `options`. A failed, cancelled or
interrupted run removes the output files and Beam temporary directories it created, so no file matching the output
pattern is left; a run whose outputs already exist is refused before it starts.
"""

from albert_tf.data.pretraining.beam.files import list_inputs, output_names
from albert_tf.data.pretraining.beam.launcher import (SHUFFLE_BUCKET_RECORDS, create_pretraining_data_beam,
                                                      shuffle_bucket_count)
from albert_tf.data.pretraining.beam.options import pipeline_options
from albert_tf.data.pretraining.beam.worker_errors import BeamWorkerError

__all__ = ["BeamWorkerError", "SHUFFLE_BUCKET_RECORDS", "create_pretraining_data_beam", "list_inputs",
           "output_names", "pipeline_options", "shuffle_bucket_count"]
