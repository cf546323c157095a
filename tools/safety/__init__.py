"""bashgraph.tools.safety: what may run and what may be seen — approval rules and the shell reader
behind them, the sandbox, secrets kept out, and text made safe for a terminal
(`one_line`, `visible`: defined in tools/text.py, below this package, for `results.py` too).

Every public name is imported on first use (module `__getattr__`), so the `bashgraph` command's
quick paths load only the text helpers they print with.
"""

from typing import TYPE_CHECKING

from bashgraph.tools.lazy_exports import lazy_exports

__all__ = [
    "DEFAULT_ASK",
    "BwrapSandbox",
    "Policy",
    "PolicyError",
    "Redactor",
    "Rule",
    "load_policy",
    "one_line",
    "protect_secrets",
    "sandbox_available",
    "visible",
]

if TYPE_CHECKING:
    from bashgraph.tools.safety.policy import DEFAULT_ASK, Policy, PolicyError, Rule, load_policy
    from bashgraph.tools.safety.redact import Redactor
    from bashgraph.tools.safety.sandbox import BwrapSandbox, sandbox_available
    from bashgraph.tools.safety.secret_guard import protect_secrets
    from bashgraph.tools.text import one_line, visible

#: Where each public name lives.
_HOMES = {
    **dict.fromkeys(("DEFAULT_ASK", "Policy", "PolicyError", "Rule", "load_policy"), "policy"),
    **dict.fromkeys(("BwrapSandbox", "sandbox_available"), "sandbox"),
    "Redactor": "redact",
    "protect_secrets": "secret_guard",
    **dict.fromkeys(("one_line", "visible"), ".text"),  # tools/text.py: results.py prints with them too
}


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__, globals())
