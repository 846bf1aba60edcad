"""Small figures helpers."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (nearest rank) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def ratio(numerator: float | None, denominator: float | None, digits: int = 2) -> float | None:
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, digits)


def raise_fd_limit() -> None:
    """Raise RLIMIT_NOFILE to its hard limit (thousands of streams, a few sockets each)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def rss_kib(pid: int) -> int:
    """Resident set size of a process, in KiB (Linux)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, every thread) a process has used so far, in seconds (Linux:
    ``utime`` + ``stime`` of ``/proc/PID/stat``)."""
    user, system = cpu_split(pid)
    return user + system


def cpu_split(pid: int) -> tuple[float, float]:
    """The CPU time a process has used so far in user space and in the kernel (every thread),
    in seconds: ``utime`` and ``stime`` of ``/proc/PID/stat`` (Linux)."""
    import os

    with open(f"/proc/{pid}/stat") as stat:
        text = stat.read()
    fields = text[text.rindex(")") + 2:].split()  # after the command name, which may hold spaces
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick  # fields 14 and 15 of proc(5)
