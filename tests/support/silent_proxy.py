"""A TCP forwarder on 127.0.0.1 that can go silent: a network that stops carrying packets.

`silence()` stops forwarding in both directions but keeps every socket open, so a client's
writes are still accepted by the kernel and its reads wait for an answer that never comes, as
when a route or a firewall starts dropping packets. `cut_upstream()` then closes the proxy's
side towards the server, as the server's own TCP keepalive finally would.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

_CHUNK = 65536
_WAIT_S = 0.05


class SilentProxy:
    """Forwards connections made to `port` on to `target` until silenced."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._silent = threading.Event()
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._upstreams: list[socket.socket] = []
        self._sockets: list[socket.socket] = []

    def silence(self) -> None:
        """From now on nothing is carried (a pump in the middle of a wait checks again before
        it forwards what woke it, and is done with that wait when this returns)."""
        self._silent.set()
        time.sleep(2 * _WAIT_S)

    def cut_upstream(self) -> None:
        with self._lock:
            for upstream in self._upstreams:
                with contextlib.suppress(OSError):
                    upstream.shutdown(socket.SHUT_RDWR)

    def serve(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # the listener closed by `close()`
            self._accept()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            readable, _, _ = select.select([self._listener], [], [], _WAIT_S)
            if readable:
                client, _ = self._listener.accept()
                upstream = socket.create_connection(self._target)
                with self._lock:
                    self._upstreams.append(upstream)
                    self._sockets += [client, upstream]
                threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        with contextlib.suppress(OSError, ValueError):  # a socket closed by `close()`
            self._carry({client: upstream, upstream: client})

    def _carry(self, peer: dict[socket.socket, socket.socket]) -> None:
        while not self._stopped.is_set():
            if self._silent.is_set():
                self._stopped.wait(_WAIT_S)  # hold both sockets open, carry nothing
                continue
            readable, _, _ = select.select(list(peer), [], [], _WAIT_S)
            if self._silent.is_set():
                continue
            for source in readable:
                data = source.recv(_CHUNK)
                if not data:
                    return
                peer[source].sendall(data)

    def close(self) -> None:
        self._stopped.set()
        with self._lock:
            for sock in [self._listener, *self._sockets]:
                sock.close()


@contextmanager
def silent_proxy(target: tuple[str, int]) -> Iterator[SilentProxy]:
    proxy = SilentProxy(target)
    server = threading.Thread(target=proxy.serve, daemon=True)
    server.start()
    try:
        yield proxy
    finally:
        proxy.close()
        server.join(timeout=5)


def url_through(proxy: SilentProxy, url: str, query: str = "") -> str:
    """`url` (postgresql://user@host:port/db) pointed at the proxy instead of its server."""
    parts = urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}", query=query or parts.query))


def server_of(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 5432
