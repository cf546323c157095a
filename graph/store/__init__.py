"""bashgraph.graph.store: where runs are kept — checkpoints, the command journal, thread locks, threads
and time travel, and the Session that binds them to one database."""
