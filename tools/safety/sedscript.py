"""Does a GNU sed script run shell commands? (`e`, `s///e`.)

A small scanner of sed's grammar: addresses (`3`, `$`, `/re/I`, `\\%re%`, `first~step`, `+N`), `!`,
blocks, and each command with its arguments, so that an `e` inside a regular expression or a
replacement (`s/e/E/`) is not mistaken for the command. Whatever it does not recognise counts as
running commands: the caller asks. One pass over the script.
"""

from __future__ import annotations

import re

_ADDRESS = re.compile(r"\d+(?:~\d+)?|\$|[+~]\d+")
_NO_ARGUMENT = frozenset("=dDgGhHnNpPxzF{}")
_OPTIONAL_NUMBER = frozenset("qQlLv")  # `q5`, `l 40`, `v 4.2`
_TO_LINE_END = frozenset("aicrRwW#")  # text, file names, comments
_LABEL = frozenset(":btT")  # a label ends at `;` or a line end
_S_FLAGS = frozenset("gpiImM0123456789")


class _Unknown(Exception):
    """Something the scanner does not recognise."""


def runs_commands(script: str) -> bool:
    """True when `script` may run a shell command (`e`, `s///e`) or cannot be read."""
    try:
        return _Scanner(script).scan()
    except (_Unknown, IndexError):
        return True


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def scan(self) -> bool:
        while True:
            self._skip(" \t\n;")
            if self.pos >= len(self.text):
                return False
            self._address()
            self._skip(" \t")
            if self._peek() == ",":
                self.pos += 1
                self._skip(" \t")
                self._address()
            self._skip(" \t!")
            command = self.text[self.pos]
            self.pos += 1
            if command == "e":
                return True
            if command == "s":
                if self._substitute():
                    return True
            elif command == "y":
                self._delimited(brackets=False)
                self._delimited(brackets=False, opened=True)
            elif command in _TO_LINE_END:
                self._to_line_end()
            elif command in _LABEL:
                self._skip_until(";\n")
            elif command in _OPTIONAL_NUMBER:
                self._skip(" \t")
                self._skip("0123456789.")
            elif command not in _NO_ARGUMENT:
                raise _Unknown(command)

    def _peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _skip(self, chars: str) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in chars:
            self.pos += 1

    def _address(self) -> None:
        match = _ADDRESS.match(self.text, self.pos)
        if match:
            self.pos = match.end()
        elif self._peek() in ("/", "\\"):
            if self._peek() == "\\":
                self.pos += 1
            self._delimited(brackets=True)
            self._skip("IM")

    def _delimited(self, brackets: bool, opened: bool = False) -> None:
        """Skip to after the next unescaped delimiter (the one at `pos`, or, when `opened`, the
        one just before it). A regular expression's `[…]` may hold the delimiter (`s/[/]/x/`);
        a replacement's `[` is plain text."""
        delimiter = self.text[self.pos - 1] if opened else self.text[self.pos]
        if delimiter in "\n\\":
            raise _Unknown(delimiter)
        self.pos += 0 if opened else 1
        while self.text[self.pos] != delimiter:
            if self.text[self.pos] == "\\":
                self.pos += 1
            elif brackets and self.text[self.pos] == "[":
                self._bracket()
                continue
            self.pos += 1
        self.pos += 1

    def _bracket(self) -> None:
        """A bracket expression: its `]` may come first (`[]a]`, `[^]a]`)."""
        end = self.pos + 1
        end += self.text[end] == "^"
        end += self.text[end] == "]"
        close = self.text.find("]", end)
        if close < 0:
            raise _Unknown("[")
        self.pos = close + 1

    def _substitute(self) -> bool:
        self._delimited(brackets=True)
        self._delimited(brackets=False, opened=True)
        while self.pos < len(self.text):
            flag = self.text[self.pos]
            self.pos += 1
            if flag == "e":
                return True
            if flag in "wW":
                self._to_line_end()
                return False
            if flag not in _S_FLAGS:
                self.pos -= 1
                break
        return False

    def _skip_until(self, ends: str) -> None:
        while self.pos < len(self.text) and self.text[self.pos] not in ends:
            self.pos += 1

    def _to_line_end(self) -> None:
        end = self.text.find("\n", self.pos)
        self.pos = len(self.text) if end < 0 else end
