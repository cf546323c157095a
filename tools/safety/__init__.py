"""bashgraph.tools.safety: what may run and what may be seen — approval rules and the shell reader
behind them, the sandbox, secrets kept out, and text made safe for a terminal."""
