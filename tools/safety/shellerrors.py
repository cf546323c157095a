"""Why a command line could not be split into the commands it runs."""


class ShellSyntaxError(ValueError):
    """The command line cannot be split (an unbalanced quote or substitution)."""


class TooComplexError(ShellSyntaxError):
    """The command line is nested or wrapped more deeply than the rules read (see the limits)."""
