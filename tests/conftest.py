"""Session-wide test guard: no network beyond the loopback interface.

Every Python-level socket connect (and UDP sendto) to an address that is not loopback raises
`NetworkBlockedError`, so a test that would reach a real model API or the internet fails loudly
instead of depending on the network. AF_UNIX sockets and 127.0.0.0/8, ::1 and "localhost" are
allowed (the tests' own OpenAI-compatible server and PostgreSQL live there). Connections made
inside C libraries (libpq) or in child processes are not seen by this guard.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any

import pytest

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


class NetworkBlockedError(RuntimeError):
    """A test tried to reach something other than loopback."""


def is_loopback(address: object) -> bool:
    """True for a loopback (host, port, ...) tuple, or a loopback host name/address."""
    host = address[0] if isinstance(address, tuple) and address else address
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if not isinstance(host, str):
        return False
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))


def _allowed(sock: socket.socket, address: object) -> bool:
    unix = getattr(socket, "AF_UNIX", None)
    return sock.family == unix or is_loopback(address)


def _guard(name: str, original: Callable[..., Any], address_index: int) -> Callable[..., Any]:
    def guarded(sock: socket.socket, *args: Any) -> Any:
        address = args[address_index] if len(args) > address_index else None
        if not _allowed(sock, address):
            raise NetworkBlockedError(f"tests may only use loopback; {name}({address!r}) blocked")
        return original(sock, *args)

    guarded.__name__ = name
    return guarded


@pytest.fixture(autouse=True, scope="session")
def _block_network() -> Any:
    """Patch socket connects for the whole session; restore them afterwards."""
    originals: dict[str, Callable[..., Any]] = {
        "connect": socket.socket.connect,
        "connect_ex": socket.socket.connect_ex,
        "sendto": socket.socket.sendto,
    }
    socket.socket.connect = _guard("connect", originals["connect"], 0)  # type: ignore[method-assign]
    socket.socket.connect_ex = _guard(  # type: ignore[method-assign]
        "connect_ex", originals["connect_ex"], 0
    )
    # sendto(data, address) or sendto(data, flags, address): the address is the last argument.
    socket.socket.sendto = _guard("sendto", originals["sendto"], -1)  # type: ignore[method-assign]
    yield
    for name, original in originals.items():
        setattr(socket.socket, name, original)
