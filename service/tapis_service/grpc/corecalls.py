"""The calls grpc's core holds that this server's Python has not taken yet, read from channelz.

grpc.aio asks the core for one call at a time. A call that arrives while none is asked for
waits in the core's queue; when the server's shutdown begins, the core kills every call so
queued with ``RST_STREAM CANCEL``: its client gets ``CANCELLED`` with no reason, and no Python
code ever sees it (``docs/cluster.md``, "A stop's calls"). A stop therefore first lets Python
take what the core holds (``caught_up``: the core's calls in flight, started minus ended, no
more than the calls Python serves), and begins the shutdown in the same step.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from grpc._cython import cygrpc  # channelz's reading functions (grpcio-channelz's own)

CATCH_UP_S = 1.0
"""The longest a stop waits for Python to take what the core holds (a core count that never
comes down, a call it dropped before any Python saw it, holds the stop no longer)."""


def server_ids() -> set[int]:
    """The channelz ids of every gRPC server of this process."""
    servers = json.loads(cygrpc.channelz_get_servers(0)).get("server", ())
    return {int(server["ref"]["serverId"]) for server in servers}


def created(before: set[int]) -> int | None:
    """The id of the one server created since ``before`` was read (None: not one)."""
    new = server_ids() - before
    return new.pop() if len(new) == 1 else None


def in_core(server_id: int) -> int | None:
    """The server's calls the core counts in flight: started, not ended (None: unknown)."""
    try:
        data = json.loads(cygrpc.channelz_get_server(server_id))["server"]["data"]
    except (ValueError, KeyError):
        return None
    return (int(data.get("callsStarted", 0)) - int(data.get("callsSucceeded", 0))
            - int(data.get("callsFailed", 0)))


async def caught_up(server_id: int | None, in_python: Callable[[], int],
                    within_s: float = CATCH_UP_S) -> bool:
    """Once every call the core holds is in Python's hands (``in_python``: the calls its
    handlers serve), returning right after the reading that says so: the caller's next step
    (the shutdown) runs before the loop takes anything more. Two readings in a row, a
    millisecond apart, must say so: a call ended by an abort (its status sent, the core's
    count down: a stream ended from another task, a tunnel refused) is still counted by
    Python until its task resumes, which one reading could take for a queued call in Python's
    hands. False past ``within_s``; True at once when channelz does not know the server
    (none, or shut down already)."""
    ends = asyncio.get_running_loop().time() + within_s
    agreed = 0
    while True:
        held = None if server_id is None else in_core(server_id)
        if held is None:
            return True
        agreed = agreed + 1 if held <= in_python() else 0
        if agreed == 2:
            return True
        if asyncio.get_running_loop().time() > ends:
            return False
        await asyncio.sleep(0.001)
