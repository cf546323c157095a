"""The session-wide guard in tests/conftest.py: loopback only."""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path

import pytest


def test_connect_to_a_public_address_is_blocked() -> None:
    """A TCP connect outside loopback fails before any packet is sent."""
    with socket.socket() as sock, pytest.raises(RuntimeError, match="tests may only use loopback"):
        sock.connect(("192.0.2.1", 9))


def test_connect_by_host_name_is_blocked() -> None:
    """create_connection to a non-local name is blocked too (it ends in connect)."""
    with pytest.raises(RuntimeError, match="tests may only use loopback"):
        socket.create_connection(("203.0.113.5", 80), timeout=1)


def test_udp_sendto_outside_loopback_is_blocked() -> None:
    """Datagrams to a public address are blocked."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock, pytest.raises(RuntimeError):
        sock.sendto(b"x", ("198.51.100.7", 53))


def test_loopback_connections_work() -> None:
    """A server on 127.0.0.1 is reachable."""
    with (
        socket.create_server(("127.0.0.1", 0)) as server,
        socket.create_connection(server.getsockname(), timeout=1) as client,
    ):
        peer, _ = server.accept()
        with peer:
            client.sendall(b"ping")
            assert peer.recv(4) == b"ping"


def test_unix_sockets_work() -> None:
    """AF_UNIX sockets are not network and stay allowed."""
    with tempfile.TemporaryDirectory() as directory:
        path = str(Path(directory) / "s")
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(path)
            server.listen()
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(path)
