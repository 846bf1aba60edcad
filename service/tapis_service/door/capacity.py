"""Server-wide caps sized for the machine: open gRPC and WebSocket connections and open event
streams, all addresses together, and one address's share of each port's connections
(docs/limits.md).

A setting of 0 means "sized here": connections from the file-descriptor limit (each is one;
2,100 idle connections once exhausted the default 1,024 and locked a new client out; the
WebSocket port gets what gRPC's connections leave, so that the two together never run the
process out of descriptors), streams
from the memory the process may use (each open stream held about 25 KB: 60,000 of them took
1.46 GB). Spectators' streams and seated players' (and backends') streams have caps of their
own, so strangers watching can never use up the players' share.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

from tapis_service.settings import Settings

STREAM_BYTES = 25_000
"""What an open event stream costs, measured (issue 24: 60,000 streams, 1.46 GB)."""
STREAM_SHARE = 0.25
"""The share of the memory each class of streams (spectators', players') may take."""
MIN_STREAMS, MAX_STREAMS = 1_000, 500_000
RESERVED_FILES = 256
"""File descriptors kept for everything but client connections (store, logs, database pool,
cluster tunnels, metrics)."""
MIN_CONNECTIONS = 16
ADDRESS_SHARE = 16
"""An address may hold a sixteenth of a port's connections (when not set)..."""
MIN_PER_ADDRESS = 8
"""...and at least this many."""
CGROUP_MEMORY = (Path("/sys/fs/cgroup/memory.max"),
                 Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))


def memory_bytes() -> int:
    """The memory this process may use: the machine's, or its container's limit if lower."""
    found = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in CGROUP_MEMORY:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            found = min(found, int(text))
    return found


def open_files_limit() -> int:
    """The process's file-descriptor limit (its soft limit)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft


def stream_cap(memory: int) -> int:
    """Streams of one class for ``memory`` bytes."""
    return max(MIN_STREAMS, min(MAX_STREAMS, int(memory * STREAM_SHARE) // STREAM_BYTES))


def connection_cap(open_files: int, websocket: bool) -> int:
    """gRPC connections for ``open_files`` descriptors (half of them when WebSocket players
    share them)."""
    usable = open_files - RESERVED_FILES
    return max(MIN_CONNECTIONS, usable // 2 if websocket else usable)


def websocket_cap(open_files: int, grpc_connections: int) -> int:
    """WebSocket connections for ``open_files`` descriptors: what gRPC's connections leave."""
    return max(MIN_CONNECTIONS, open_files - RESERVED_FILES - grpc_connections)


def over_descriptors(settings: Settings, open_files: int) -> str | None:
    """Why the connection caps set ask more descriptors than ``open_files`` has (None: they
    fit). Beyond the limit, grpc's core fails to accept and retries each second (new clients
    wait for their deadline, refused by nobody), and a WebSocket port left its minimum share
    resets every connection past 16: the server refuses to start instead."""
    websocket = settings.ws_port is not None
    usable = open_files - RESERVED_FILES - (MIN_CONNECTIONS if websocket else 0)
    if settings.max_connections > usable:
        kept = f", less {MIN_CONNECTIONS} for the WebSocket port" if websocket else ""
        return (f"--max-connections {settings.max_connections} is more than the {usable} "
                f"connections the descriptor limit leaves (ulimit -n {open_files}, less "
                f"{RESERVED_FILES} kept for the store, logs and metrics{kept}): raise the "
                "limit, or lower --max-connections (0 sizes it)")
    if websocket and settings.ws_max_sockets:
        connections, share = connection_caps(settings, open_files)
        if settings.ws_max_sockets > share:
            return (f"--ws-max-sockets {settings.ws_max_sockets} is more than the {share} "
                    f"connections the WebSocket port can have (ulimit -n {open_files}, less "
                    f"{RESERVED_FILES} and gRPC's {connections}): raise the limit, or lower "
                    "--ws-max-sockets or --max-connections (0 sizes them)")
    return None


def connection_caps(settings: Settings, open_files: int) -> tuple[int, int]:
    """gRPC's connections in force (the setting, else sized) and the WebSocket port's share
    of what they leave of ``open_files`` descriptors."""
    connections = (settings.max_connections
                   or connection_cap(open_files, settings.ws_port is not None))
    return connections, websocket_cap(open_files, connections)


def address_cap(connections: int) -> int:
    """One address's share of a port's ``connections``."""
    return max(MIN_PER_ADDRESS, connections // ADDRESS_SHARE)


@dataclass(frozen=True, slots=True)
class Capacity:
    """The server-wide caps in force."""

    connections: int
    spectator_streams: int
    seat_streams: int
    connections_per_address: int = 0
    """gRPC connections one address may hold."""
    ws_connections: int = 0
    """WebSocket connections (upgraded or not) in all: the descriptors gRPC's leave."""
    ws_connections_per_address: int = 0

    @classmethod
    def of(cls, settings: Settings) -> Capacity:
        """The settings' caps, each 0 sized for this machine."""
        streams = stream_cap(memory_bytes()) if not (settings.max_spectator_streams
                                                     and settings.max_seat_streams) else 0
        connections, ws = connection_caps(settings, open_files_limit())
        return cls(connections, settings.max_spectator_streams or streams,
                   settings.max_seat_streams or streams,
                   settings.max_connections_per_address or address_cap(connections), ws,
                   settings.ws_max_connections_per_address or address_cap(ws))
