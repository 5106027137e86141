"""What the benchmarks share, none of it a benchmark itself: `common` (start-up, machine, timing, result files,
subcommands, child processes), `unlabelled_text`, `majority_class` and `label_subsets` (the pretrain-finetune
benchmark's extra text, collapsed-run check and low-resource subsets), `original_compat` (runs the original
release's scripts under this TensorFlow)."""
