"""Server settings: each declared once, here.

A setting is one field of ``Settings`` made by ``setting(default, help, ...)``: its name, type
(the annotation), default and help live in that one line, and from it come the flag
(``--port``), the environment variable (``TAPIS_PORT``) and the row of the docs table
(``tapis_service.process.configuration`` builds the parser, reads the environment and writes the
table; a test keeps docs/operations.md and docs/limits.md in sync). To add a setting, add a
field here; nothing else lists them.
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GROUPS = {
    "server": "where it listens and how it runs",
    "store": "the store",
    "security": "TLS and backend keys (docs/integration.md)",
    "cluster": "the cluster (docs/cluster.md)",
    "games": "the games",
    "limits": "limits (docs/limits.md)",
}
"""The sections of ``--help`` and of the docs table, in order."""


MAX_COUNT = 1_000_000_000
"""The most a count, a size or a rate may be."""
MAX_MS = 2**31 - 1
"""The longest duration in milliseconds (grpc's core takes a 32-bit int: 24.8 days)."""
MAX_S = 10 * 365 * 86_400.0
"""The longest duration in seconds (10 years)."""
MAX_PORT = 65_535


def whole_ms(seconds: float) -> int:
    """A duration in seconds as whole milliseconds, rounded up: a positive one never becomes 0,
    which the settings read as "never" (``--unjoined-ttl 0.0004`` is one millisecond)."""
    return math.ceil(seconds * 1000)


def redacted(url: str) -> str:
    """The URL without its password (a URL setting's value in messages and logs)."""
    return re.sub(r"(://[^:/@?]*):[^@/?]*@", r"\1:***@", url)


def _number(value: float) -> str:
    """A bound as the docs and the refusals write it (``1,000,000``, ``0.5``)."""
    return f"{int(value):,}" if value == int(value) else f"{value:g}"


@dataclass(frozen=True, slots=True)
class Bounds:
    """The values a number may take: ``low`` to ``high`` (``low`` itself excluded when
    ``above``); never NaN or infinite."""

    low: float
    high: float
    above: bool = False

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, int | float) or not math.isfinite(value):
            return False
        return (value > self.low if self.above else value >= self.low) and value <= self.high

    def __str__(self) -> str:
        if self.above:
            return f"more than {_number(self.low)} up to {_number(self.high)}"
        return f"{_number(self.low)} to {_number(self.high)}"


@dataclass(frozen=True, slots=True)
class Option:
    """What a setting declares beyond its name, type and default."""

    help: str
    group: str
    flag: str | None = None
    """The long flag, when it is not the field's name (``--retention`` for
    ``finished_retention``)."""
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    default_text: str | None = None
    """How the default reads in ``--help`` and the docs, when not its value."""
    bounds: Bounds | None = None
    """A number's range (every int and float setting has one)."""
    schemes: tuple[str, ...] | None = None
    """A URL's schemes."""
    address: bool = False
    """``HOST:PORT``, the port from 1 to 65,535."""
    takes: str | None = None
    """What a text of a form of its own takes (checked by ``configuration.parse``)."""

    @property
    def allowed(self) -> str:
        """The values the setting takes, as the docs table and a refusal say them."""
        if self.takes is not None:
            return self.takes
        if self.bounds is not None:
            return str(self.bounds)
        if self.choices is not None:
            return ", ".join(self.choices)
        if self.schemes is not None:
            return " or ".join(f"{scheme}://..." for scheme in self.schemes)
        if self.address:
            return f"HOST:PORT, the port 1 to {MAX_PORT:,}"
        return ""


def setting(default: Any, help: str, group: str, *, flag: str | None = None,
            choices: tuple[str, ...] | None = None, metavar: str | None = None,
            default_text: str | None = None, low: float | None = None,
            high: float | None = None, above: bool = False,
            schemes: tuple[str, ...] | None = None, address: bool = False,
            takes: str | None = None) -> Any:
    """A field of ``Settings``: its default and its option (flag, variable, help, and the
    values it takes: ``low`` to ``high`` for a number)."""
    bounds = None
    if low is not None or high is not None:
        assert low is not None and high is not None, "a number's range has both ends"
        bounds = Bounds(low, high, above)
    option = Option(help=help, group=group, flag=flag, choices=choices, metavar=metavar,
                    default_text=default_text, bounds=bounds, schemes=schemes,
                    address=address, takes=takes)
    return dataclasses.field(default=default, metadata={"option": option})


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the server can be told at start-up (``tapis-server --help``)."""

    # --- server ------------------------------------------------------------------------------
    host: str = setting("127.0.0.1", "the address to listen on (0.0.0.0 or ::: every "
                        "interface)", "server")
    port: int = setting(50051, "the port to listen on (0: a free one, named in the "
                        "`serving` log line)", "server", low=0, high=MAX_PORT)
    metrics_port: int = setting(0, "serve Prometheus metrics on this port (0: off)", "server",
                                low=0, high=MAX_PORT)
    ws_port: int | None = setting(None, "serve players over WebSocket (docs/websocket.md) and "
                                  "the web client at http://HOST:WS_PORT/ on this port (0: a "
                                  "free one; unset: off)", "server", low=0, high=MAX_PORT)
    health_port: int = setting(0, "serve the health service alone (grpc.health.v1: "
                               "liveness, readiness) in plaintext on this port, for "
                               "Kubernetes' native gRPC probes, whatever --tls-cert says "
                               "(0: off)", "server", low=0, high=MAX_PORT)
    log_level: str = setting("info", "JSON log lines on stderr from this level up", "server",
                             choices=("debug", "info", "warning", "error"))
    grace_s: float = setting(5.0, "on SIGTERM: how long calls in flight may take to finish "
                             "(the drain; a cluster node's hand-off too)", "server",
                             flag="--grace", metavar="SECONDS", low=0, high=86_400)
    event_loop: str = setting("uvloop", "the event loop (uvloop costs less CPU per action, "
                              "see docs/performance.md; asyncio: the standard one)", "server",
                              choices=("uvloop", "asyncio"))
    otel: bool = setting(False, "OpenTelemetry tracing of every call, exported as the standard "
                         "OTEL_* variables say (needs pip install 'tapis[otel]'; "
                         "docs/operations.md)", "server")
    gc_thresholds: str = setting("", "the collector's young thresholds GEN0,GEN1, for "
                                 "measuring (empty: tapis_service/process/gctune.py's; GEN0 0: "
                                 "no automatic collection at all)", "server",
                                 metavar="GEN0,GEN1", takes="empty, or two whole numbers "
                                 "GEN0,GEN1 from 0")
    # --- store -------------------------------------------------------------------------------
    store: str = setting("memory", "sqlite (durable, under --data-dir), postgres (shared, "
                         "--database-url) or memory (keeps nothing)", "store",
                         choices=("sqlite", "postgres", "memory"),
                         default_text="sqlite with --data-dir, postgres with --database-url, "
                                      "else memory")
    data_dir: Path | None = setting(None, "where the durable store keeps its files", "store")
    database_url: str | None = setting(None, "PostgreSQL URL (postgresql://...): the store a "
                                       "cluster shares", "store", schemes=("postgresql",
                                       "postgres"))
    db_wait_s: float = setting(0.0, "at start, how long to wait for an unreachable database "
                               "before refusing to start (0: for ever, NOT_SERVING meanwhile)",
                               "store", flag="--db-wait", metavar="SECONDS", low=0, high=MAX_S)
    snapshot_every: int = setting(200, "a checkpoint of a table every N inputs (and at each "
                                  "game end)", "store", low=1, high=MAX_COUNT)
    finished_retention: int = setting(10_000, "finished tables kept queryable (oldest dropped "
                                      "first)", "store", flag="--retention", low=0, high=MAX_COUNT)
    results_max_age_s: float = setting(7 * 24 * 3600.0, "drop a backend's results it has not "
                                       "acknowledged (AckResults) after this long, which "
                                       "frees their tables (0: never)", "store",
                                       flag="--results-max-age", metavar="SECONDS",
                                       default_text="604800 (7 days)", low=0, high=MAX_S)
    store_retry_ms: int = setting(500, "after a failed write: how often the store is probed "
                                  "until it commits again", "store", low=1, high=MAX_MS)
    # --- cluster -----------------------------------------------------------------------------
    advertise: str | None = setting(None, "run as a cluster node that other nodes reach at "
                                    "HOST:PORT (needs --database-url; an IPv6 host in "
                                    "brackets: [::1]:50051)", "cluster", metavar="HOST:PORT",
                                    address=True)
    node_ttl_s: float = setting(3.0, "a node that has not renewed its membership for this "
                                "long, on another node's clock, is dead to it (renewed 3 "
                                "times per TTL, every second at most)", "cluster",
                                flag="--node-ttl",
                                metavar="SECONDS", low=0.5, high=3600)
    node_id: str | None = setting(None, "this node's id", "cluster",
                                  default_text="a fresh random one per process")
    # --- security ----------------------------------------------------------------------------
    tls_cert: Path | None = setting(None, "serve the gRPC and WebSocket ports over TLS "
                                    "with this certificate chain (PEM; reloaded on SIGHUP)",
                                    "security", metavar="FILE")
    tls_key: Path | None = setting(None, "the private key of --tls-cert (PEM)", "security",
                                   metavar="FILE")
    tls_client_ca: Path | None = setting(None, "require client certificates signed by this CA "
                                         "(PEM): mutual TLS", "security", metavar="FILE")
    api_keys_file: Path | None = setting(None, "the backends' API keys, one per line (or "
                                         "sha256:HEX), each with an optional backend name; "
                                         "reloaded on SIGHUP", "security", metavar="FILE")
    insecure: bool = setting(False, "listen beyond loopback without TLS and API keys anyway "
                             "(else the server refuses to start)", "security")
    trusted_proxies: str = setting("", "take a call's client address from x-forwarded-for (its "
                                   "right-most entry not in these networks) when it comes "
                                   "from one of them, a TLS-terminating ingress; never "
                                   "otherwise (empty: never)", "security",
                                   metavar="CIDR,...", takes="addresses and CIDR networks, "
                                   "comma-separated")
    cluster_tls_cert: Path | None = setting(None, "the certificate a cluster node presents to "
                                            "the others (PEM)", "security", metavar="FILE",
                                            default_text="--tls-cert")
    cluster_tls_key: Path | None = setting(None, "the private key of --cluster-tls-cert",
                                           "security", metavar="FILE",
                                           default_text="--tls-key")
    cluster_tls_ca: Path | None = setting(None, "the CA that signed the cluster nodes' "
                                          "certificates (PEM)", "security", metavar="FILE",
                                          default_text="--tls-client-ca")
    cluster_tls_name: str | None = setting(None, "the name the nodes' certificates carry, "
                                           "checked instead of each node's address",
                                           "security", metavar="NAME",
                                           default_text="the address dialled")
    # --- games -------------------------------------------------------------------------------
    allow_stacked_decks: bool = setting(False, "accept explicit deck orders and chosen seeds "
                                        "(tests, tutorials, bug reports); every view then says "
                                        "the deal was chosen", "games")
    bot_delay_ms: int = setting(1000, "a server bot's median reaction time: each move waits "
                                "a draw around it, as a person's would (docs/rulings.md, "
                                "\"Server bots' reaction time\"); a table may ask for its own "
                                "(CreateGameRequest.bot_reaction_ms); 0: at once", "games",
                                low=0, high=60_000)
    bot_delay_spread: float = setting(0.2, "the spread of the bots' reaction times: the "
                                      "standard deviation of their logarithm (0: always the "
                                      "median; 0.2: half of them within 0.87-1.14 times it)",
                                      "games", low=0, high=1)
    slap_rate_per_s: float = setting(10.0, "slaps per second per seat", "games",
                                     flag="--slap-rate", low=0, high=MAX_COUNT, above=True)
    slap_burst: int = setting(5, "slaps a seat may send at once before --slap-rate applies",
                              "games", low=1, high=MAX_COUNT)
    presence_debounce_ms: int = setting(5000, "a person seat whose last event stream ended is "
                                        "announced gone (StreamEventsResponse.presence) when "
                                        "none opened within this long", "games",
                                        flag="--presence-debounce", metavar="MS", low=0,
                                        high=MAX_MS)
    seat_idle_after_s: float = setting(0.0, "file a seat_idle record in the backend's results "
                                       "feed when a person seat its table awaits has had no "
                                       "event stream this long (0: never)", "games",
                                       flag="--seat-idle-after", metavar="SECONDS", low=0,
                                       high=MAX_S)
    # --- limits (docs/limits.md) -------------------------------------------------------------
    max_games: int = setting(100_000, "tables held at most (beyond: RESOURCE_EXHAUSTED / "
                             "TOO_MANY_GAMES)", "limits", low=1, high=MAX_COUNT)
    create_rate_per_s: float = setting(5.0, "CreateGame calls per second per client address "
                                       "(0: no limit)", "limits", flag="--create-rate", low=0,
                                       high=MAX_COUNT)
    create_burst: int = setting(100, "CreateGame calls an address may make at once", "limits",
                                low=1, high=MAX_COUNT)
    keyless_create_rate_per_s: float = setting(50.0, "CreateGame calls per second without a "
                                               "backend key, all addresses together (0: no "
                                               "limit)", "limits",
                                               flag="--keyless-create-rate", low=0, high=MAX_COUNT)
    keyless_create_burst: int = setting(200, "keyless CreateGame calls the server takes at once",
                                        "limits", low=1, high=MAX_COUNT)
    keyless_max_tables: int = setting(20_000, "tables created without a backend key held at "
                                      "most (beyond: TOO_MANY_GAMES; 0: no cap but "
                                      "--max-games)", "limits", low=0, high=MAX_COUNT)
    backend_max_tables: int = setting(50_000, "tables one backend holds at most (beyond: "
                                      "TOO_MANY_GAMES; 0: no cap but --max-games)", "limits", low=0,
                                      high=MAX_COUNT)
    backend_create_rate_per_s: float = setting(200.0, "CreateGame calls per second per backend "
                                               "key (0: no limit)", "limits",
                                               flag="--backend-create-rate", low=0, high=MAX_COUNT)
    backend_create_burst: int = setting(1000, "CreateGame calls a backend may make at once",
                                        "limits", low=1, high=MAX_COUNT)
    join_rate_per_s: float = setting(500.0, "JoinGame calls per second without a backend key, "
                                     "all addresses together (0: no limit)", "limits",
                                     flag="--join-rate", low=0, high=MAX_COUNT)
    join_burst: int = setting(1000, "keyless JoinGame calls the server takes at once", "limits",
                              low=1, high=MAX_COUNT)
    list_rate_per_s: float = setting(50.0, "ListGames calls per second without a backend key, "
                                     "all addresses together, and per backend (0: no limit)",
                                     "limits", flag="--list-rate", low=0, high=MAX_COUNT)
    list_burst: int = setting(100, "ListGames calls taken at once (keyless, or one backend)",
                              "limits", low=1, high=MAX_COUNT)
    keyless_address_share: float = setting(0.25, "the part of each keyless budget above "
                                           "(--keyless-create-rate, --join-rate, --list-rate: "
                                           "their rate and burst) one client address may take, "
                                           "so one address never takes it all (0: no share)",
                                           "limits", low=0, high=1)
    bad_token_rate_per_s: float = setting(1.0, "calls with a wrong seat token per second per "
                                          "client address (0: no limit)", "limits",
                                          flag="--bad-token-rate", low=0, high=MAX_COUNT)
    bad_token_burst: int = setting(20, "wrong-token calls an address may make at once",
                                   "limits", low=1, high=MAX_COUNT)
    unjoined_ttl_s: float = setting(600.0, "drop a table no person joined after this long "
                                    "(0: never)", "limits", flag="--unjoined-ttl",
                                    metavar="SECONDS", low=0, high=MAX_S)
    abandon_after_s: float = setting(3600.0, "end as abandoned a table not over where no "
                                     "person acted this long (0: never)", "limits",
                                     flag="--abandon-after", metavar="SECONDS", low=0, high=MAX_S)
    max_streams_per_table: int = setting(256, "open event streams on one table (beyond: "
                                         "TOO_MANY_STREAMS)", "limits", low=1, high=MAX_COUNT)
    max_spectator_streams: int = setting(0, "open event streams of spectators in all, every "
                                         "address together (beyond: TOO_MANY_STREAMS; 0: "
                                         "sized for the machine's memory)", "limits",
                                         default_text="0 (a quarter of the memory, "
                                                      "25 KB each)", low=0, high=MAX_COUNT)
    max_seat_streams: int = setting(0, "open event streams of seated players and backends in "
                                    "all, counted apart from spectators' (beyond: "
                                    "TOO_MANY_STREAMS; 0: sized for the machine's memory)",
                                    "limits", default_text="0 (a quarter of the memory, "
                                                           "25 KB each)", low=0, high=MAX_COUNT)
    max_connections: int = setting(0, "open gRPC connections in all, every address together "
                                   "(beyond: grpc's core closes a new one at once; 0: sized "
                                   "for the file-descriptor limit)", "limits",
                                   default_text="0 (the descriptors but 256, half of them "
                                                "with --ws-port)", low=0, high=MAX_COUNT)
    max_connections_per_address: int = setting(0, "open gRPC connections from one client "
                                               "address (an IPv6 /64; beyond: closed; 0: a "
                                               "sixteenth of --max-connections, at least 8)",
                                               "limits", default_text="0 (a sixteenth of "
                                                                      "--max-connections)",
                                               low=0, high=MAX_COUNT)
    handshake_timeout_ms: int = setting(5_000, "close a new connection (either port) whose "
                                        "TLS handshake and first request (gRPC: HTTP/2 "
                                        "settings; WebSocket: the upgrade) do not come within "
                                        "this", "limits", low=100, high=MAX_MS)
    refusal_rate_per_s: float = setting(2.0, "calls refused for want of a key or a right "
                                        "token (UNAUTHENTICATED) per second per client "
                                        "address; past it the address is cut (0: no limit)",
                                        "limits", flag="--refusal-rate", low=0, high=MAX_COUNT)
    refusal_burst: int = setting(100, "such refused calls an address may make at once",
                                 "limits", low=1, high=MAX_COUNT)
    refusal_cooldown_s: float = setting(60.0, "how long an address past its refusals is cut: "
                                        "its connections closed, its new ones dropped",
                                        "limits", flag="--refusal-cooldown",
                                        metavar="SECONDS", low=0, high=MAX_S)
    max_streams_per_connection: int = setting(1000, "open event streams on one HTTP/2 "
                                              "connection", "limits", low=1, high=MAX_MS)
    max_streams_per_peer: int = setting(20_000, "open event streams from one client address",
                                        "limits", low=1, high=MAX_COUNT)
    stream_stall_ms: int = setting(20_000, "cut a stream whose client has not taken a message "
                                   "for this long (STREAM_TOO_SLOW)", "limits", low=1_000,
                                   high=MAX_MS)
    stream_queue_size: int = setting(4096, "events buffered per open stream; a stream further "
                                     "behind is cut off (it may resume)", "limits", low=1,
                                     high=MAX_COUNT)
    max_in_flight: int = setting(1000, "unary calls handled at once (beyond: "
                                 "RESOURCE_EXHAUSTED / OVERLOADED)", "limits", low=1,
                                 high=MAX_COUNT)
    max_pending_calls: int = setting(20_000, "calls grpc's core queues before the server takes "
                                     "them (beyond: some are cancelled, all of them beyond "
                                     "twice as many)", "limits", low=1, high=MAX_MS // 2)
    ws_max_sockets: int = setting(0, "open WebSocket sockets in all (beyond: "
                                  "TOO_MANY_STREAMS, closed; 0: the descriptors gRPC's "
                                  "connections leave)", "limits",
                                  default_text="0 (the descriptors but 256 and "
                                               "--max-connections)", low=0, high=MAX_COUNT)
    ws_max_connections_per_address: int = setting(0, "open WebSocket connections, upgraded or "
                                                  "not, from one address (an IPv6 /64; "
                                                  "beyond: closed at once; 0: a sixteenth of "
                                                  "the port's share)", "limits",
                                                  default_text="0 (a sixteenth of the port's "
                                                               "share)", low=0, high=MAX_COUNT)
    ws_max_sockets_per_peer: int = setting(1000, "open WebSocket connections from one client "
                                           "address", "limits", low=1, high=MAX_COUNT)
    ws_max_in_flight: int = setting(64, "requests in flight on one WebSocket (beyond: "
                                    "OVERLOADED)", "limits", low=1, high=MAX_COUNT)
    ws_max_streams: int = setting(64, "event streams (tables followed) on one WebSocket "
                                  "(beyond: TOO_MANY_STREAMS)", "limits", low=1, high=MAX_COUNT)
    keepalive_time_ms: int = setting(60_000, "ping a connection idle this long (dead peers are "
                                     "noticed and their calls ended)", "limits", low=100,
                                     high=MAX_MS)
    max_connection_idle_ms: int = setting(300_000, "close a connection with no call in flight "
                                          "for this long (0: never)", "limits", low=0, high=MAX_MS)
    max_connection_age_ms: int = setting(0, "ask a connection to reconnect once it is this old "
                                         "(its open streams end after "
                                         "--max-connection-age-grace-ms and resume; 0: never)",
                                         "limits", low=0, high=MAX_MS)
    max_connection_age_grace_ms: int = setting(30_000, "how long calls may go on once a "
                                               "connection was asked to reconnect", "limits", low=0,
                                               high=MAX_MS)
    keepalive_timeout_ms: int = setting(20_000, "drop a connection whose ping is not answered "
                                        "within this (on the WebSocket port, within the "
                                        "keepalive time at most)", "limits", low=100,
                                        high=MAX_MS)


@dataclass(frozen=True, slots=True)
class Declared:
    """One setting as declared: the field, its value type, its default and its option."""

    name: str
    kind: type
    """The value's type (``int``, ``float``, ``str``, ``bool``, ``Path``)."""
    optional: bool
    """None is a value (no default)."""
    default: Any
    option: Option

    @property
    def flag(self) -> str:
        return self.option.flag or "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        """The environment variable: TAPIS_ and the flag's name."""
        return "TAPIS_" + self.flag[2:].upper().replace("-", "_")


def declared() -> list[Declared]:
    """Every setting, in declaration order."""
    hints = typing.get_type_hints(Settings)
    found = []
    for item in dataclasses.fields(Settings):
        hint = hints[item.name]
        arguments = [a for a in typing.get_args(hint) if a is not type(None)]
        optional = len(arguments) < len(typing.get_args(hint))
        kind = arguments[0] if optional else hint
        found.append(Declared(item.name, kind, optional, item.default,
                              item.metadata["option"]))
    return found
