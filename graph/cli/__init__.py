"""bashgraph.graph.cli: the `bashgraph` command (run, resume, threads, history, fork, graph).

`main` is the console script. Importing this package loads only the argument parser: each
verb imports what it needs when it runs, so `--help` and the inspection verbs start fast.
"""

from bashgraph.graph.cli.app import main

__all__ = ["main"]
