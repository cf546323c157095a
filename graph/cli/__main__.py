"""`python -m bashgraph.graph.cli`: the same as the `bashgraph` console script."""

from bashgraph.graph.cli.app import main

if __name__ == "__main__":
    raise SystemExit(main())
