"""Binary output is described (size, kind, first bytes, where it is), not sent as escaped bytes."""

from __future__ import annotations

import shutil
from pathlib import Path

from bashgraph.tools import render_for_model, run_command
from bashgraph.tools.results import describe_binary, looks_binary

LS = shutil.which("ls") or "/bin/ls"


def test_a_capped_binary_stream_is_one_line_naming_its_spill_file(tmp_path: Path) -> None:
    """`cat /bin/ls` is an ELF file of ~140 KB: escaped it cost ~18,000 tokens."""
    result = run_command(f"cat {LS}", spill_dir=tmp_path)
    size = Path(LS).stat().st_size
    assert result.stdout.startswith(
        f"[binary output: {size:,} bytes, ELF executable or library; first bytes: 7f 45 4c 46 ")
    assert result.stdout.endswith(f"; full output: {result.stdout_file}]")
    assert Path(str(result.stdout_file)).read_bytes() == Path(LS).read_bytes()  # every byte kept
    assert len(render_for_model(result, 10_000)) < 300


def test_a_small_binary_stream_is_described_too() -> None:
    result = run_command(f"head -c 3000 {LS}")
    assert result.stdout.startswith("[binary output: 3,000 bytes, ELF executable or library; ")
    assert "pipe the command through `xxd | head`" in result.stdout
    assert result.stdout_bytes == 3_000


def test_text_printed_after_a_binary_dump_is_still_shown(tmp_path: Path) -> None:
    result = run_command(f"cat {LS}; echo; echo 'copied: 1 file'", spill_dir=tmp_path)
    assert result.stdout.startswith("[binary output: ")
    assert result.stdout.endswith("]\n[the end of the output, as text:]\n\ncopied: 1 file\n")


def test_text_stays_text() -> None:
    """UTF-8 with accents and CJK, colours, tabs and carriage returns are text."""
    result = run_command(r"printf 'caf\303\251 \344\270\255\346\226\207\n\033[1mbold\033[0m\ta\rb\n'")
    assert result.stdout == "café 中文\nbold\ta\nb\n"


def test_kinds_are_read_from_magic_numbers() -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(100)
    assert describe_binary(png, 108, "x") == (
        "[binary output: 108 bytes, PNG image; first bytes: 89 50 4e 47 0d 0a 1a 0a "
        + " ".join(["00"] * 24) + "; x]")
    assert "gzip data" in str(describe_binary(b"\x1f\x8b\x08\x00" + bytes(20), 24, "x"))
    assert looks_binary(bytes(range(256)))
    assert not looks_binary(b"plain text, with one odd byte \x07 in it")
    assert not looks_binary(b"red \x00 \xff\n")  # a stray NUL or bad byte in text
    assert looks_binary("utf-16 text".encode("utf-16-le"))
