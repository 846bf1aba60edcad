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
    store_retry_ms: int = 500
    """After a failed write: how often the store is probed until it commits again."""
    log_level: str = "info"
    metrics_port: int = 0
    """Serve Prometheus metrics on this port (0: off)."""
    # --- limits (docs/limits.md) -------------------------------------------------------------
    create_rate_per_s: float = 5.0
    """CreateGame calls per second per client address (0: no limit), with ``create_burst``."""
    create_burst: int = 100
    bad_token_rate_per_s: float = 1.0
    """Calls with a wrong seat token per second per client address (0: no limit)."""
    bad_token_burst: int = 20
    unjoined_ttl_s: float = 600.0
    """A table that no person joined is dropped after this long (0: never)."""
    abandon_after_s: float = 3600.0
    """A table not over where no person acted for this long ends as abandoned (0: never)."""
    max_streams_per_table: int = 256
    max_streams_per_connection: int = 1000
    max_streams_per_peer: int = 20_000
    """Open StreamEvents calls per table, per connection and per client address."""
    stream_stall_ms: int = 20_000
    """A stream whose client has not taken a message for this long is cut (STREAM_TOO_SLOW)."""
    max_in_flight: int = 1000
    """Unary calls handled at once; beyond, RESOURCE_EXHAUSTED / OVERLOADED."""
    max_pending_calls: int = 20_000
    """Calls grpc's core queues before the server takes them (its default, 1,000, cancels
    arrivals at random beyond it: 7.8% CANCELLED at 2,000 concurrent calls)."""
    keepalive_time_ms: int = 60_000
    """Ping a connection idle this long (dead peers are noticed and their calls ended)."""
    keepalive_timeout_ms: int = 20_000
