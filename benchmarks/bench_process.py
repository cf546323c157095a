"""Execution layer: run_command / arun_command against their baselines, side by side in one run.

    python benchmarks/bench_process.py            # full run (figures in docs/benchmarks.md)
    python benchmarks/bench_process.py --quick    # CI smoke test, well under 30 s

1. Per-call cost of `run_command("true")` and `arun_command("true")` against the floor,
   `os.posix_spawn` of `bash -c true` + `waitpid`, and `subprocess.run`, as ratios to the floor.
   Every round calls each variant once, so all of them see the same machine; the median of each
   variant's calls is compared (and the 10th percentile, the quiet end of the noise). The
   "capture floor" is the floor plus the kernel work any runner that captures output does.
2. timeout=1 s on four commands that leave processes behind: seconds until control is back and
   processes still running right after it, against `subprocess.run(..., timeout=1)` (whose
   leftovers are then killed by this script).
3. 500 MB of output (50 MB with --quick): wall time and peak RSS above the process's baseline,
   each variant in a fresh Python, against `subprocess.run(capture_output=True)` and against the
   same command `> /dev/null` (and `> file`, the cost of writing the spill file alone). Two
   commands: `seq` (output that costs something to make) and `head -c /dev/zero` (output that
   costs nothing, so the spill file's disk writes are all that is measured).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import spawn_floors

from bashgraph.tools import arun_command, run_command

LEAVERS = [
    "sleep 30 & sleep 30",
    "(sleep 30 &); sleep 30",
    "trap '' TERM; sleep 30",
    "setsid sleep 30 & sleep 30",
]


def per_call(rounds: int) -> None:
    """Each round calls every variant once, in the same order, on one event loop's thread; the
    median of each variant's per-call times is compared (with p10: the quiet end of the noise)."""
    elsewhere = tempfile.gettempdir()
    variants: dict[str, Callable[[], Awaitable[object] | None]] = {
        "os.posix_spawn (floor)": spawn_floors.floor,
        "capture floor": spawn_floors.capture_floor,
        "bare runner": _bare,
        "bare runner, no fd scan": functools.partial(_bare, close_inherited=False),
        "subprocess.run": _subprocess_true,
        "run_command": functools.partial(_sync, "true"),
        "arun_command": functools.partial(arun_command, "true"),
        "run_command, cwd=/tmp": functools.partial(_sync, "true", cwd=elsewhere),
        "run_command `cd . && true`": functools.partial(_sync, "cd . && true"),
    }
    times = asyncio.run(_alternate(variants, rounds))
    floor_median, floor_p10 = _quantile(times["os.posix_spawn (floor)"], 0.5), _quantile(
        times["os.posix_spawn (floor)"], 0.1)
    print(f"\n1. per call: `true`, {rounds} rounds, each variant once per round (alternating)")
    print(f"   {'variant':<28} {'median ms':>9} {'x floor':>8} {'p10 ms':>8} {'x floor':>8}")
    for name, samples in times.items():
        median, p10 = _quantile(samples, 0.5), _quantile(samples, 0.1)
        print(f"   {name:<28} {median * 1e3:9.3f} {median / floor_median:8.2f} "
              f"{p10 * 1e3:8.3f} {p10 / floor_p10:8.2f}")
    print("   (capture floor: the floor plus what any runner that captures output must do — two")
    print("    pipes, stdin from /dev/null, a new session, reading both pipes to their end;")
    print("    bare runner: the least a runner with run_command's guarantees pays, see spawn_floors)")
    print("   (cwd=/tmp: the preamble `cd`s; `cd`: the command may move, an EXIT trap reports where)")
    medians = {name: _quantile(samples, 0.5) for name, samples in times.items()}
    for ours, anchor, target in PER_CALL_TARGETS:
        _verdict(f"{ours} / {anchor}", medians[ours] / medians[anchor], target)


#: (ours, anchor, most allowed): the per-call targets, compared by the medians of one run.
PER_CALL_TARGETS = (
    ("run_command", "subprocess.run", 1.0),
    ("run_command", "bare runner", 1.10),
    ("arun_command", "subprocess.run", 1.15),
)
#: Output that costs nothing to make: run_command against the shell's own `> file`.
ZERO_COST_TARGET = 1.2


def _verdict(label: str, ratio: float, target: float) -> None:
    print(f"   {label:<34} {ratio:6.3f}x   target ≤ {target:.2f}x: {'holds' if ratio <= target else 'NOT met'}")


def _bare(close_inherited: bool = True) -> None:
    spawn_floors.bare_runner(close_inherited=close_inherited)


def _sync(command: str, cwd: str | None = None) -> None:
    run_command(command, cwd=cwd)


def _subprocess_true() -> None:
    subprocess.run(["bash", "-c", "true"], capture_output=True, check=False)


async def _alternate(
    variants: dict[str, Callable[[], Awaitable[object] | None]], rounds: int
) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, call in variants.items():
            started = time.perf_counter()
            pending = call()
            if pending is not None:
                await pending
            times[name].append(time.perf_counter() - started)
    return times


def _quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(int(len(ordered) * q), len(ordered) - 1)]


def external_program(calls: int, rounds: int) -> None:
    """A real program as the last command: without a trap the shell execs it, with one it forks."""
    variants: dict[str, Callable[[], float]] = {}
    for command in ("ls /", "cd / && ls /"):
        argv = ["bash", "-c", command]
        variants[f"subprocess.run {command!r}"] = _measured(
            functools.partial(subprocess.run, argv, capture_output=True, check=False), calls)
        variants[f"run_command {command!r}"] = _measured(
            functools.partial(run_command, command), calls)
    best = _fastest_rounds(variants, rounds)
    print(f"\n1b. per call, an external program, {rounds} rounds of {calls} calls, fastest round")
    for name, seconds in best.items():
        print(f"   {name:<34} {seconds * 1e3:8.3f} ms")


def _measured(action: Callable[[], object], calls: int) -> Callable[[], float]:
    return lambda: _mean(action, calls)


def _fastest_rounds(variants: dict[str, Callable[[], float]], rounds: int) -> dict[str, float]:
    best = {name: float("inf") for name in variants}
    for _ in range(rounds):
        for name, measure in variants.items():
            best[name] = min(best[name], measure())
    return best


def _mean(action: Callable[[], object], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        action()
    return (time.perf_counter() - started) / calls


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def timeouts() -> None:
    print("\n2. timeout=1 s: seconds until control is back / processes still running then")
    print(f"   {'command':<30} {'run_command':>16} {'subprocess.run':>16}")
    for command in LEAVERS:
        ours = _leave_test(command, _ours_with_timeout)
        theirs = _leave_test(command, _subprocess_with_timeout)
        print(f"   {command:<30} {ours[0]:9.2f}s / {ours[1]:<3} {theirs[0]:9.2f}s / {theirs[1]:<3}")
    print("   (grace 2 s: a command that ignores SIGTERM gets SIGKILL at timeout + 2 s)")


def _ours_with_timeout(command: str, env: dict[str, str]) -> None:
    run_command(command, timeout=1, env=env)


def _subprocess_with_timeout(command: str, env: dict[str, str]) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run(["bash", "-c", command], capture_output=True, timeout=1,
                       env={**os.environ, **env}, check=False)


def _leave_test(command: str, runner: Callable[[str, dict[str, str]], None]) -> tuple[float, int]:
    mark = uuid.uuid4().hex
    started = time.perf_counter()
    runner(command, {"BENCH_MARK": mark})
    elapsed = time.perf_counter() - started
    left = _marked(mark)
    for pid in left:  # the baseline's leftovers: clean up after it
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return elapsed, len(left)


def _marked(mark: str) -> list[int]:
    """Running (not zombie) processes whose environment carries BENCH_MARK=mark."""
    found = []
    needle = f"BENCH_MARK={mark}".encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
            environ = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:
            continue
        state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
        if needle in environ and state not in (b"Z", b"X"):
            found.append(int(name))
    return found


CHILD = r"""
import json, os, resource, subprocess, sys, time
from bashgraph.tools import run_command
variant, command, spill = sys.argv[1], sys.argv[2], sys.argv[3]
def peak_kib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
base = peak_kib()
started = time.perf_counter()
if variant == "run_command":
    result = run_command(command, timeout=600, spill_dir=spill)
    assert result.stdout_file and os.path.getsize(result.stdout_file) == result.stdout_bytes
    kept = len(result.stdout)
elif variant == "capture_output":
    kept = len(subprocess.run(["bash", "-c", command], capture_output=True).stdout)
else:
    target = "/dev/null" if variant == "devnull" else os.path.join(spill, "plain.out")
    subprocess.run(["bash", "-c", f"{command} > {target}"])
    kept = 0
wall = time.perf_counter() - started
print(json.dumps({"wall": wall, "rss_mib": (peak_kib() - base) / 1024, "kept": kept}))
"""


def big_output(size: int, repeats: int, quick: bool) -> None:
    commands = {
        "seq | head -c N": f"seq 1 {size // 4} | head -c {size}",
        "head -c N /dev/zero": f"head -c {size} /dev/zero",
    }
    if quick:  # each variant starts a fresh Python: keep the smoke test short
        commands.pop("head -c N /dev/zero")
    variants = ["devnull", "file", "run_command", "capture_output"]
    labels = {"devnull": "cmd > /dev/null", "file": "cmd > file",
              "run_command": "run_command", "capture_output": "capture_output=True"}
    print(f"\n3. {size / 1e6:.0f} MB of output: wall s (x of > /dev/null) / peak RSS above "
          f"baseline MiB; fastest of {repeats}")
    for title, command in commands.items():
        print(f"   {title}:")
        rows = _fastest_children(variants, command, repeats)
        base_wall = rows["devnull"]["wall"]
        for variant in variants:
            row = rows[variant]
            print(f"     {labels[variant]:<20} {row['wall']:7.3f}s ({row['wall'] / base_wall:5.2f}x)"
                  f" {row['rss_mib']:8.1f} MiB   text kept: {int(row['kept']):,} chars")
        if "/dev/zero" in command:
            _verdict("run_command / cmd > file", rows["run_command"]["wall"] / rows["file"]["wall"],
                     ZERO_COST_TARGET)


def _fastest_children(variants: list[str], command: str, repeats: int) -> dict[str, dict[str, float]]:
    """The fastest of `repeats` runs of each variant, taken in turns (variant after variant,
    round after round): the disk's write-back of one variant's 500 MB then weighs on all of
    them alike, not on whichever runs after the others' batches."""
    best: dict[str, dict[str, float]] = {}
    for _ in range(repeats):
        for variant in variants:
            row = _child_run(variant, command)
            if variant not in best or row["wall"] < best[variant]["wall"]:
                best[variant] = row
    return best


def _child_run(variant: str, command: str) -> dict[str, float]:
    # Every variant starts with no dirty pages left by the one before: the write-back of the
    # previous variant's 500 MB would otherwise slow whichever comes after a writer.
    os.sync()
    with tempfile.TemporaryDirectory(prefix="bench-spill-") as spill:
        done = subprocess.run([sys.executable, "-c", CHILD, variant, command, spill],
                              capture_output=True, text=True, check=True)
    row: dict[str, float] = json.loads(done.stdout)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a CI smoke test")
    quick = parser.parse_args().quick
    started = time.perf_counter()
    print(f"bench_process {'--quick' if quick else '(full)'}: python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    per_call(rounds=200 if quick else 2000)
    external_program(calls=50, rounds=2 if quick else 15)
    timeouts()
    big_output(size=50_000_000 if quick else 500_000_000, repeats=1 if quick else 5,
               quick=quick)
    print(f"\ntotal {time.perf_counter() - started:.1f}s")


if __name__ == "__main__":
    main()
