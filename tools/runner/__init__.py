"""bashgraph.tools.runner: running one shell command — spawn, supervise, capture, classify, and
clean up every process it started."""
