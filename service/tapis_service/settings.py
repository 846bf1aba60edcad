"""Server settings, from the command line and the environment."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the server can be told at start-up."""

    host: str = "127.0.0.1"
    port: int = 50051
    store: str = "memory"
    """``"sqlite"`` (durable, under ``data_dir``), ``"postgres"`` (``database_url``) or
    ``"memory"``."""
    data_dir: Path | None = None
    database_url: str | None = None
    """PostgreSQL (``postgresql://...``): the shared store of a cluster."""
    advertise: str | None = None
    """HOST:PORT other nodes reach this one at: set, the server is a cluster node."""
    node_ttl_s: float = 3.0
    """A cluster node's membership lasts this long unless renewed (every second)."""
    node_id: str | None = None
    """A cluster node's id (default: a fresh random one per process)."""
    allow_stacked_decks: bool = False
    bot_delay_ms: int = 600
    """How long a server bot waits before it moves (people like to see the cards)."""
    stream_queue_size: int = 4096
    """Events buffered per open stream; a stream further behind is cut off (it may resume)."""
    max_games: int = 100_000
    slap_rate_per_s: float = 10.0
    slap_burst: int = 5
    snapshot_every: int = 200
    """Durable store: write a snapshot of a table every N inputs (and at each game end)."""
    finished_retention: int = 10_000
    """Finished tables kept queryable (oldest dropped first)."""
    grace_s: float = 5.0
    log_level: str = "info"
    metrics_port: int = 0
    """Serve Prometheus metrics on this port (0: off)."""
