"""The benchmarks, each run from the checkout as a module: `python -m bench.<name> [subcommand] [flags]`.

Each `bench_*` module measures one kind of thing and writes its figures to `bench/results/` (docs/benchmarks.md);
what they share is in `bench.support`.
"""
