"""Binary output told apart from text, and described instead of shown.

A model reads escaped bytes as a flood of symbols (3 KB of `/bin/ls` cost 8,290 tokens, a capped
binary stream 18,379): it learns nothing from them. A stream whose first 8 KiB are more than a
tenth bytes that are neither UTF-8 text nor ordinary whitespace (NULs, other control bytes,
invalid UTF-8) is described in one line instead (`looks_binary`): its size, its kind (from
the magic numbers below), its first 32 bytes in hex, and where the whole of it is; text it
printed at its very end (a log line after a dump) is still shown (`text_end`).
"""

from __future__ import annotations

#: How much of a stream's head decides whether it is binary.
SAMPLE_BYTES = 8_192
HEX_BYTES = 32
MIN_ODD = 4
_MAGIC: tuple[tuple[bytes, int, str], ...] = (
    (b"\x7fELF", 0, "ELF executable or library"), (b"\x89PNG\r\n\x1a\n", 0, "PNG image"),
    (b"\xff\xd8\xff", 0, "JPEG image"), (b"GIF8", 0, "GIF image"), (b"%PDF", 0, "PDF document"),
    (b"PK\x03\x04", 0, "zip archive"), (b"\x1f\x8b", 0, "gzip data"), (b"BZh", 0, "bzip2 data"),
    (b"\xfd7zXZ\x00", 0, "xz data"), (b"\x28\xb5\x2f\xfd", 0, "zstd data"),
    (b"SQLite format 3\x00", 0, "SQLite database"), (b"\x00asm", 0, "WebAssembly module"),
    (b"ustar", 257, "tar archive"), (b"MZ", 0, "DOS/Windows executable"), (b"RIFF", 0, "RIFF media"),
    (b"OggS", 0, "Ogg media"), (b"\xca\xfe\xba\xbe", 0, "Java class or Mach-O universal binary"),
    (b"\xcf\xfa\xed\xfe", 0, "Mach-O executable"),
)
_TEXT_CONTROLS = frozenset(b"\n\r\t\f\b\x1b")


def describe_binary(head: bytes | bytearray | memoryview, total: int, where: str) -> str | None:
    """One line describing a binary stream whose first bytes are `head` (None: it is text)."""
    sample = bytes(head[:SAMPLE_BYTES])
    if not sample or not looks_binary(sample):
        return None
    return (f"[binary output: {total:,} bytes, {kind_of(sample)}; first bytes: "
            f"{sample[:HEX_BYTES].hex(' ')}; {where}]")


def looks_binary(sample: bytes) -> bool:
    """More than a tenth of the sample (and at least `MIN_ODD` characters) is neither UTF-8 text
    nor ordinary whitespace: a stray NUL or bad byte in text leaves it text."""
    text = sample.decode("utf-8", "replace")
    if sample and len(sample) == SAMPLE_BYTES:  # a character cut at the sample's end is not a fault
        text = text.removesuffix("\ufffd")
    odd = text.count("\ufffd") + sum(1 for char in text if ord(char) < 32 and ord(char) not in _TEXT_CONTROLS)
    return odd >= MIN_ODD and odd * 10 > len(text)


def kind_of(sample: bytes) -> str:
    for magic, offset, kind in _MAGIC:
        if sample[offset:offset + len(magic)] == magic:
            return kind
    return "unknown binary data"


def text_end(tail: bytes) -> bytes:
    """The longest run of text bytes (printable, whitespace, UTF-8) at the end of `tail`: what a
    binary stream printed last as text, or nothing."""
    start = len(tail)
    while start > 0 and (tail[start - 1] >= 32 or tail[start - 1] in _TEXT_CONTROLS):
        start -= 1
    run = tail[start:]
    return b"" if looks_binary(run) else run
