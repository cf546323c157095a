"""bashgraph.graph.models: the chat models — the factory for any OpenAI-compatible server, and the
bundled local model with its prompt and reply parsing."""
