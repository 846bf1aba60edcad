"""Server settings: each declared once, here.

A setting is one field of ``Settings`` made by ``setting(default, help, ...)``: its name, type
(the annotation), default and help live in that one line, and from it come the flag
(``--port``), the environment variable (``TAPIS_PORT``) and the row of the docs table
(``tapis_service.configuration`` builds the parser, reads the environment and writes the
table; a test keeps docs/operations.md and docs/limits.md in sync). To add a setting, add a
field here; nothing else lists them.
"""

from __future__ import annotations

import dataclasses
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


def setting(default: Any, help: str, group: str, *, flag: str | None = None,
            choices: tuple[str, ...] | None = None, metavar: str | None = None,
            default_text: str | None = None) -> Any:
    """A field of ``Settings``: its default and its option (flag, variable, help)."""
    option = Option(help=help, group=group, flag=flag, choices=choices, metavar=metavar,
                    default_text=default_text)
    return dataclasses.field(default=default, metadata={"option": option})


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the server can be told at start-up (``tapis-server --help``)."""

    # --- server ------------------------------------------------------------------------------
    host: str = setting("127.0.0.1", "the address to listen on (0.0.0.0 or ::: every "
                        "interface)", "server")
    port: int = setting(50051, "the port to listen on", "server")
    metrics_port: int = setting(0, "serve Prometheus metrics on this port (0: off)", "server")
    ws_port: int | None = setting(None, "serve players over WebSocket (docs/websocket.md) and "
                                  "the web client at http://HOST:WS_PORT/ on this port (0: a "
                                  "free one; unset: off)", "server")
    log_level: str = setting("info", "JSON log lines on stderr from this level up", "server",
                             choices=("debug", "info", "warning", "error"))
    grace_s: float = setting(5.0, "on SIGTERM: how long calls in flight may take to finish "
                             "(the drain)", "server", flag="--grace", metavar="SECONDS")
    event_loop: str = setting("uvloop", "the event loop (uvloop costs less CPU per action, "
                              "see docs/performance.md; asyncio: the standard one)", "server",
                              choices=("uvloop", "asyncio"))
    otel: bool = setting(False, "OpenTelemetry tracing of every call, exported as the standard "
                         "OTEL_* variables say (needs pip install 'tapis[otel]'; "
                         "docs/operations.md)", "server")
    gc_thresholds: str = setting("", "the collector's young thresholds GEN0,GEN1, for "
                                 "measuring (empty: tapis_service/gctune.py's)", "server",
                                 metavar="GEN0,GEN1")
    # --- store -------------------------------------------------------------------------------
    store: str = setting("memory", "sqlite (durable, under --data-dir), postgres (shared, "
                         "--database-url) or memory (keeps nothing)", "store",
                         choices=("sqlite", "postgres", "memory"),
                         default_text="sqlite with --data-dir, postgres with --database-url, "
                                      "else memory")
    data_dir: Path | None = setting(None, "where the durable store keeps its files", "store")
    database_url: str | None = setting(None, "PostgreSQL URL (postgresql://...): the store a "
                                       "cluster shares", "store")
    db_wait_s: float = setting(0.0, "at start, how long to wait for an unreachable database "
                               "before refusing to start (0: for ever, NOT_SERVING meanwhile)",
                               "store", flag="--db-wait", metavar="SECONDS")
    snapshot_every: int = setting(200, "a checkpoint of a table every N inputs (and at each "
                                  "game end)", "store")
    finished_retention: int = setting(10_000, "finished tables kept queryable (oldest dropped "
                                      "first)", "store", flag="--retention")
    results_max_age_s: float = setting(7 * 24 * 3600.0, "drop a backend's results it has not "
                                       "acknowledged (AckResults) after this long, which "
                                       "frees their tables (0: never)", "store",
                                       flag="--results-max-age", metavar="SECONDS",
                                       default_text="604800 (7 days)")
    store_retry_ms: int = setting(500, "after a failed write: how often the store is probed "
                                  "until it commits again", "store")
    # --- cluster -----------------------------------------------------------------------------
    advertise: str | None = setting(None, "run as a cluster node that other nodes reach at "
                                    "HOST:PORT (needs --database-url; an IPv6 host in "
                                    "brackets: [::1]:50051)", "cluster", metavar="HOST:PORT")
    node_ttl_s: float = setting(3.0, "a node's membership lasts this long unless renewed "
                                "(every second)", "cluster", flag="--node-ttl",
                                metavar="SECONDS")
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
                                   metavar="CIDR,...")
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
    bot_delay_ms: int = setting(600, "how long a server bot waits before it moves (people "
                                "like to see the cards)", "games")
    slap_rate_per_s: float = setting(10.0, "slaps per second per seat", "games",
                                     flag="--slap-rate")
    slap_burst: int = setting(5, "slaps a seat may send at once before --slap-rate applies",
                              "games")
    # --- limits (docs/limits.md) -------------------------------------------------------------
    max_games: int = setting(100_000, "tables held at most (beyond: RESOURCE_EXHAUSTED / "
                             "TOO_MANY_GAMES)", "limits")
    create_rate_per_s: float = setting(5.0, "CreateGame calls per second per client address "
                                       "(0: no limit)", "limits", flag="--create-rate")
    create_burst: int = setting(100, "CreateGame calls an address may make at once", "limits")
    keyless_create_rate_per_s: float = setting(50.0, "CreateGame calls per second without a "
                                               "backend key, all addresses together (0: no "
                                               "limit)", "limits",
                                               flag="--keyless-create-rate")
    keyless_create_burst: int = setting(200, "keyless CreateGame calls the server takes at once",
                                        "limits")
    keyless_max_tables: int = setting(20_000, "tables created without a backend key held at "
                                      "most (beyond: TOO_MANY_GAMES; 0: no cap but "
                                      "--max-games)", "limits")
    backend_max_tables: int = setting(50_000, "tables one backend holds at most (beyond: "
                                      "TOO_MANY_GAMES; 0: no cap but --max-games)", "limits")
    backend_create_rate_per_s: float = setting(200.0, "CreateGame calls per second per backend "
                                               "key (0: no limit)", "limits",
                                               flag="--backend-create-rate")
    backend_create_burst: int = setting(1000, "CreateGame calls a backend may make at once",
                                        "limits")
    join_rate_per_s: float = setting(500.0, "JoinGame calls per second without a backend key, "
                                     "all addresses together (0: no limit)", "limits",
                                     flag="--join-rate")
    join_burst: int = setting(1000, "keyless JoinGame calls the server takes at once", "limits")
    list_rate_per_s: float = setting(50.0, "ListGames calls per second without a backend key, "
                                     "all addresses together, and per backend (0: no limit)",
                                     "limits", flag="--list-rate")
    list_burst: int = setting(100, "ListGames calls taken at once (keyless, or one backend)",
                              "limits")
    keyless_address_share: float = setting(0.25, "the part of each keyless budget above "
                                           "(--keyless-create-rate, --join-rate, --list-rate: "
                                           "their rate and burst) one client address may take, "
                                           "so one address never takes it all (0: no share)",
                                           "limits")
    bad_token_rate_per_s: float = setting(1.0, "calls with a wrong seat token per second per "
                                          "client address (0: no limit)", "limits",
                                          flag="--bad-token-rate")
    bad_token_burst: int = setting(20, "wrong-token calls an address may make at once",
                                   "limits")
    unjoined_ttl_s: float = setting(600.0, "drop a table no person joined after this long "
                                    "(0: never)", "limits", flag="--unjoined-ttl",
                                    metavar="SECONDS")
    abandon_after_s: float = setting(3600.0, "end as abandoned a table not over where no "
                                     "person acted this long (0: never)", "limits",
                                     flag="--abandon-after", metavar="SECONDS")
    max_streams_per_table: int = setting(256, "open event streams on one table (beyond: "
                                         "TOO_MANY_STREAMS)", "limits")
    max_spectator_streams: int = setting(0, "open event streams of spectators in all, every "
                                         "address together (beyond: TOO_MANY_STREAMS; 0: "
                                         "sized for the machine's memory)", "limits",
                                         default_text="0 (a quarter of the memory, "
                                                      "25 KB each)")
    max_seat_streams: int = setting(0, "open event streams of seated players and backends in "
                                    "all, counted apart from spectators' (beyond: "
                                    "TOO_MANY_STREAMS; 0: sized for the machine's memory)",
                                    "limits", default_text="0 (a quarter of the memory, "
                                                           "25 KB each)")
    max_connections: int = setting(0, "open gRPC connections in all, every address together "
                                   "(beyond: grpc's core closes a new one at once; 0: sized "
                                   "for the file-descriptor limit)", "limits",
                                   default_text="0 (the descriptors but 256, half of them "
                                                "with --ws-port)")
    max_streams_per_connection: int = setting(1000, "open event streams on one HTTP/2 "
                                              "connection", "limits")
    max_streams_per_peer: int = setting(20_000, "open event streams from one client address",
                                        "limits")
    stream_stall_ms: int = setting(20_000, "cut a stream whose client has not taken a message "
                                   "for this long (STREAM_TOO_SLOW)", "limits")
    stream_queue_size: int = setting(4096, "events buffered per open stream; a stream further "
                                     "behind is cut off (it may resume)", "limits")
    max_in_flight: int = setting(1000, "unary calls handled at once (beyond: "
                                 "RESOURCE_EXHAUSTED / OVERLOADED)", "limits")
    max_pending_calls: int = setting(20_000, "calls grpc's core queues before the server takes "
                                     "them (beyond: some are cancelled, all of them beyond "
                                     "twice as many)", "limits")
    ws_max_sockets: int = setting(20_000, "open WebSocket connections in all (beyond: "
                                  "TOO_MANY_STREAMS, closed)", "limits")
    ws_max_sockets_per_peer: int = setting(1000, "open WebSocket connections from one client "
                                           "address", "limits")
    ws_max_in_flight: int = setting(64, "requests in flight on one WebSocket (beyond: "
                                    "OVERLOADED)", "limits")
    ws_max_streams: int = setting(64, "event streams (tables followed) on one WebSocket "
                                  "(beyond: TOO_MANY_STREAMS)", "limits")
    keepalive_time_ms: int = setting(60_000, "ping a connection idle this long (dead peers are "
                                     "noticed and their calls ended)", "limits")
    max_connection_idle_ms: int = setting(300_000, "close a connection with no call in flight "
                                          "for this long (0: never)", "limits")
    max_connection_age_ms: int = setting(0, "ask a connection to reconnect once it is this old "
                                         "(its open streams end after "
                                         "--max-connection-age-grace-ms and resume; 0: never)",
                                         "limits")
    max_connection_age_grace_ms: int = setting(30_000, "how long calls may go on once a "
                                               "connection was asked to reconnect", "limits")
    keepalive_timeout_ms: int = setting(20_000, "drop a connection whose ping is not answered "
                                        "within this", "limits")


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
