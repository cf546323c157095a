"""bashgraph.tools.model_tools: the tools the model calls — `bash` and the background-job tools
(`bash_output`, `bash_kill`) as LangChain tools, with their argument checks.

The top of `bashgraph.tools`: they run commands through `runner/` and answer with the result
from `results.py`. Their public names are exported by `bashgraph.tools`.
"""
