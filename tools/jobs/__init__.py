"""bashgraph.tools.jobs: background jobs — commands that keep running after their tool call returned."""
