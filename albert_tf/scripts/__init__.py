"""The command-line scripts: the original's flags and a `main` each; the top-level scripts of a checkout and the
`albert-*` console commands of an installed package run them."""
