"""What the benchmarks share, none of it a benchmark itself: `common` (start-up, machine, timing, result files,
subcommands, child processes), `unlabelled_text` and `majority_class` (the pretrain-finetune benchmarks' data and
collapsed-run check), `original_compat` (runs the original release's scripts under this TensorFlow)."""
