"""A command never inherits this process's descriptors above 2, even inheritable ones."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator

import pytest

from bashgraph.tools import run_command
from bashgraph.tools.runner import spawn as descriptors


@pytest.fixture
def inheritable_pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    os.set_inheritable(read_end, True)
    os.set_inheritable(write_end, True)
    yield read_end, write_end
    for fd in (read_end, write_end):
        os.close(fd)


def open_in_shell() -> set[int]:
    """The descriptors the shell itself has open (`$$`: the shell, not `ls`)."""
    result = run_command("ls /proc/$$/fd")
    assert result.exit_code == 0, result
    return {int(name) for name in result.stdout.split()}


def test_inheritable_descriptors_are_found(inheritable_pipe: tuple[int, int]) -> None:
    assert set(inheritable_pipe) <= set(descriptors.inheritable_descriptors())


def test_an_inheritable_pipe_does_not_reach_the_command(inheritable_pipe: tuple[int, int]) -> None:
    assert open_in_shell().isdisjoint(inheritable_pipe)
    assert os.get_inheritable(inheritable_pipe[0])  # ours is left as it was


def test_the_shell_gets_only_its_three_streams() -> None:
    assert open_in_shell() - {255} == {0, 1, 2}  # 255: bash's own copy of the script's input


def test_a_listing_descriptor_closed_behind_our_back_is_replaced(
    inheritable_pipe: tuple[int, int],
) -> None:
    descriptors.inheritable_descriptors()  # opens the kept listing
    kept = descriptors._LISTING.fd
    os.close(kept)
    impostor = os.open("/", os.O_RDONLY | os.O_DIRECTORY)  # somebody's directory...
    if impostor != kept:  # ...under the same number
        impostor = os.dup2(moved := impostor, kept, inheritable=False)
        os.close(moved)
    try:
        assert set(inheritable_pipe) <= set(descriptors.inheritable_descriptors())
        os.fstat(impostor)  # somebody else's descriptor was left open
    finally:
        os.close(impostor)


def test_a_forked_child_lists_its_own_descriptors() -> None:
    descriptors.inheritable_descriptors()  # the parent's listing is open before the fork
    report_read, report_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a pipe of its own, made inheritable after the fork
        try:
            _, own_write = os.pipe()
            os.set_inheritable(own_write, True)
            found = descriptors.inheritable_descriptors()
            leaked = own_write in open_in_shell()
            os.write(report_write, json.dumps([own_write in found, leaked]).encode())
        finally:
            os._exit(0)
    os.close(report_write)
    try:
        report = json.loads(os.read(report_read, 1000))
    finally:
        os.close(report_read)
        os.waitpid(pid, 0)
    assert report == [True, False]


def test_threads_listing_at_once_each_see_every_descriptor(
    inheritable_pipe: tuple[int, int],
) -> None:
    """The graph spawns several commands at once: no listing may see only part of the table."""
    misses: list[int] = []

    def lister() -> None:
        for _ in range(1500):
            if not set(inheritable_pipe) <= set(descriptors.inheritable_descriptors()):
                misses.append(1)

    threads = [threading.Thread(target=lister) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert misses == []


def test_a_forked_child_keeps_a_file_it_opens_under_the_parents_listing_number() -> None:
    descriptors.inheritable_descriptors()
    kept = descriptors._LISTING.fd
    report_read, report_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            own = os.open(os.devnull, os.O_WRONLY)
            if own != kept:  # e.g. after a closerange: the child's file under that number
                own = os.dup2(moved := own, kept, inheritable=False)
                os.close(moved)
            descriptors.inheritable_descriptors()  # what every spawn in the child does
            os.write(own, b"still open")
            os.write(report_write, b"ok")
        finally:
            os._exit(0)
    os.close(report_write)
    try:
        report = os.read(report_read, 100)
    finally:
        os.close(report_read)
        os.waitpid(pid, 0)
    assert report == b"ok"
