"""The longest command bashgraph runs, and why: Linux's limit on one argument.

The command reaches the shell as one argument of `bash -c` (after a short preamble, see
`launch`). Linux refuses to `exec` with any single argument longer than `MAX_ARG_STRLEN`
(32 pages: 131072 bytes, the terminating NUL included) with E2BIG, so a longer command could
never run. The tool refuses it up front as an `args_error`, and the approval rules never read
it: their work grows with the command's length, and this bounds it.
"""

from __future__ import annotations

#: Linux's `MAX_ARG_STRLEN` (include/uapi/linux/binfmts.h): 32 pages of 4 KiB.
MAX_ARG_STRLEN = 32 * 4096
#: What is left for the command once the preamble (well under 1 KiB) and the NUL are counted.
MAX_COMMAND_BYTES = MAX_ARG_STRLEN - 1024


def command_size_problem(command: str, limit: int = MAX_COMMAND_BYTES) -> str | None:
    """Why `command` is too long to run (one line), or None. Counts UTF-8 bytes, as Linux does."""
    if len(command) <= limit // 4:
        return None  # at most 4 bytes a character: no need to encode
    size = len(command.encode("utf-8", "surrogatepass"))
    if size <= limit:
        return None
    return (f"'command' is {size} bytes in UTF-8, the limit is {limit} "
            f"(Linux refuses a longer argument to bash -c)")
