"""Conditions that end a run. Failures the model should see are data (CommandResult), not these.

A package of its own, the bottom layer of `bashgraph.graph`: the chat models (`models/`) and the
store (`store/`) raise these too, and both sit below the graph core that exports them.
"""


class BashgraphError(Exception):
    """Base class of every error bashgraph raises on purpose; the CLI prints its message."""


class ConfigError(BashgraphError):
    """A setting is invalid (bad value in the environment, a flag, or a config file)."""


class ModelError(BashgraphError):
    """The chat model could not be reached or answered with something unusable.

    The thread is kept: the checkpoint before the model call stays, so `resume` tries again.
    """


class UnfinishedThreadError(BashgraphError):
    """New input was given to a thread that is paused or stopped mid-run: resume it instead.

    Its last model reply still has calls without answers; a new message after them would make
    a history the model's API rejects, and the pending question would be lost.
    """


class ThreadBusyError(BashgraphError):
    """Another worker holds this thread; nothing was executed."""


class StoreError(BashgraphError):
    """The checkpoint database cannot be opened or used (corrupt, read-only, locked)."""
