"""`tapis-server`: run the Tapis game server."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import orjson
import structlog

from tapis_service import gctune, logcontext, metrics
from tapis_service.recovery import RecoveryError
from tapis_service.server import CannotListen, create_server
from tapis_service.settings import Settings
from tapis_service.store import StoreCorrupt, StoreInUse


def configure_logging(level: str) -> None:
    """JSON logs on stderr, one object per line, with the bound context (rpc, game, seat).

    structlog's fast path: lines below ``level`` cost one method call; a written line is
    rendered to bytes by orjson and written by a bytes logger (no str round trip)."""
    number = logging.getLevelNamesMapping()[level.upper()]
    logcontext.per_action_lines = number <= logging.INFO
    structlog.configure(
        processors=[
            logcontext.merge,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(serializer=orjson.dumps),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(number),
        logger_factory=structlog.BytesLoggerFactory(file=sys.stderr.buffer),
        cache_logger_on_first_use=True,
    )


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop (it won side by side: less server CPU per action, see
    docs/performance.md), unless ``TAPIS_EVENT_LOOP=asyncio`` or uvloop is not installed."""
    if os.environ.get("TAPIS_EVENT_LOOP", "uvloop") != "uvloop":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


DEFAULT = Settings()
"""Where every flag's default comes from (one place: ``Settings``)."""


def parse_args(argv: list[str] | None = None) -> Settings:
    parser = argparse.ArgumentParser(
        prog="tapis-server", description=__doc__,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        epilog="Environment: TAPIS_HOST, TAPIS_PORT, TAPIS_DATA_DIR, TAPIS_DATABASE_URL, "
               "TAPIS_ADVERTISE, TAPIS_NODE_ID and TAPIS_LOG_LEVEL give the defaults of the "
               "flags of the same names. Exit status 2: the server refused to start (a damaged "
               "store, a directory or port in use); see docs/durability.md and docs/limits.md.")
    parser.add_argument("--host", default=os.environ.get("TAPIS_HOST", "127.0.0.1"),
                        help="the address to listen on (0.0.0.0: every interface)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("TAPIS_PORT", "50051")),
                        help="the port to listen on")
    parser.add_argument("--data-dir", type=Path, default=os.environ.get("TAPIS_DATA_DIR"),
                        help="where the durable store keeps its file (default: memory only)")
    parser.add_argument("--store", choices=("sqlite", "postgres", "memory"), default=None,
                        help="sqlite (the default with --data-dir), postgres (the default "
                        "with --database-url) or memory")
    parser.add_argument("--database-url", default=os.environ.get("TAPIS_DATABASE_URL"),
                        help="PostgreSQL URL (postgresql://...): the shared store")
    parser.add_argument("--advertise", default=os.environ.get("TAPIS_ADVERTISE"),
                        metavar="HOST:PORT",
                        help="run as a cluster node that other nodes reach at HOST:PORT "
                        "(needs --database-url)")
    parser.add_argument("--node-ttl", type=float, default=DEFAULT.node_ttl_s,
                        help="seconds a cluster node's membership lasts unless renewed")
    parser.add_argument("--node-id", default=os.environ.get("TAPIS_NODE_ID"),
                        help="this cluster node's id (default: a fresh random one)")
    parser.add_argument("--allow-stacked-decks", action="store_true",
                        help="accept explicit deck orders and chosen seeds (tests, tutorials, "
                             "bug reports); every view then says the deal was chosen")
    parser.add_argument("--bot-delay-ms", type=int, default=DEFAULT.bot_delay_ms,
                        help="how long server bots wait before moving")
    parser.add_argument("--slap-rate", type=float, default=DEFAULT.slap_rate_per_s,
                        help="slaps per second per seat")
    parser.add_argument("--slap-burst", type=int, default=DEFAULT.slap_burst,
                        help="slaps a seat may send at once before --slap-rate applies")
    parser.add_argument("--snapshot-every", type=int, default=DEFAULT.snapshot_every,
                        help="durable store: a checkpoint of a table every N inputs")
    parser.add_argument("--retention", type=int, default=DEFAULT.finished_retention,
                        help="finished games kept queryable")
    parser.add_argument("--max-games", type=int, default=DEFAULT.max_games,
                        help="tables held at most (beyond: RESOURCE_EXHAUSTED/TOO_MANY_GAMES)")
    parser.add_argument("--metrics-port", type=int, default=DEFAULT.metrics_port,
                        help="serve Prometheus metrics on this port (0: off)")
    parser.add_argument("--log-level", default=os.environ.get("TAPIS_LOG_LEVEL", "info"),
                        type=str.lower, choices=("debug", "info", "warning", "error"),
                        help="JSON log lines on stderr from this level up")
    limits = parser.add_argument_group("limits (docs/limits.md)")
    limits.add_argument("--create-rate", type=float, default=DEFAULT.create_rate_per_s,
                        help="CreateGame calls per second per client address (0: no limit)")
    limits.add_argument("--create-burst", type=int, default=DEFAULT.create_burst,
                        help="CreateGame calls an address may make at once")
    limits.add_argument("--bad-token-rate", type=float, default=DEFAULT.bad_token_rate_per_s,
                        help="calls with a wrong seat token per second per address (0: none)")
    limits.add_argument("--bad-token-burst", type=int, default=DEFAULT.bad_token_burst,
                        help="wrong-token calls an address may make at once")
    limits.add_argument("--unjoined-ttl", type=float, default=DEFAULT.unjoined_ttl_s,
                        metavar="SECONDS",
                        help="drop a table no person joined after this long (0: never)")
    limits.add_argument("--abandon-after", type=float, default=DEFAULT.abandon_after_s,
                        metavar="SECONDS",
                        help="end as abandoned a table where no person acted this long "
                             "(0: never)")
    limits.add_argument("--max-streams-per-table", type=int, default=DEFAULT.max_streams_per_table,
                        help="open event streams on one table (beyond: TOO_MANY_STREAMS)")
    limits.add_argument("--max-streams-per-connection", type=int,
                        default=DEFAULT.max_streams_per_connection,
                        help="open event streams on one HTTP/2 connection")
    limits.add_argument("--max-streams-per-peer", type=int, default=DEFAULT.max_streams_per_peer,
                        help="open event streams from one client address")
    limits.add_argument("--stream-stall-ms", type=int, default=DEFAULT.stream_stall_ms,
                        help="cut a stream whose client has not read for this long")
    limits.add_argument("--max-in-flight", type=int, default=DEFAULT.max_in_flight,
                        help="unary calls handled at once (beyond: RESOURCE_EXHAUSTED)")
    limits.add_argument("--max-pending-calls", type=int, default=DEFAULT.max_pending_calls,
                        help="calls grpc queues before the server takes them (beyond: some "
                             "are cancelled, all of them beyond twice as many)")
    limits.add_argument("--keepalive-time-ms", type=int, default=DEFAULT.keepalive_time_ms,
                        help="ping an idle connection this often (HTTP/2 keepalive)")
    limits.add_argument("--keepalive-timeout-ms", type=int, default=DEFAULT.keepalive_timeout_ms,
                        help="drop a connection whose ping is not answered within this")
    args = parser.parse_args(argv)
    store = args.store or ("postgres" if args.database_url
                           else "sqlite" if args.data_dir else "memory")
    if store == "sqlite" and args.data_dir is None:
        parser.error("--store sqlite needs --data-dir")
    if store == "postgres" and not args.database_url:
        parser.error("--store postgres needs --database-url")
    if args.advertise and store != "postgres":
        parser.error("--advertise (a cluster node) needs --database-url")
    return Settings(host=args.host, port=args.port, store=store, data_dir=args.data_dir,
                    database_url=args.database_url, advertise=args.advertise,
                    node_ttl_s=args.node_ttl, node_id=args.node_id,
                    allow_stacked_decks=args.allow_stacked_decks, bot_delay_ms=args.bot_delay_ms,
                    slap_rate_per_s=args.slap_rate, slap_burst=args.slap_burst,
                    snapshot_every=args.snapshot_every, finished_retention=args.retention,
                    max_games=args.max_games, metrics_port=args.metrics_port,
                    log_level=args.log_level,
                    create_rate_per_s=args.create_rate, create_burst=args.create_burst,
                    bad_token_rate_per_s=args.bad_token_rate,
                    bad_token_burst=args.bad_token_burst,
                    unjoined_ttl_s=args.unjoined_ttl, abandon_after_s=args.abandon_after,
                    max_streams_per_table=args.max_streams_per_table,
                    max_streams_per_connection=args.max_streams_per_connection,
                    max_streams_per_peer=args.max_streams_per_peer,
                    stream_stall_ms=args.stream_stall_ms, max_in_flight=args.max_in_flight,
                    max_pending_calls=args.max_pending_calls,
                    keepalive_time_ms=args.keepalive_time_ms,
                    keepalive_timeout_ms=args.keepalive_timeout_ms)


async def serve(settings: Settings) -> None:
    if settings.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(settings.metrics_port, addr=settings.host)
    running = await create_server(settings)
    gctune.tune()  # after start-up and recovery: what they built is frozen out of collections
    watchers = [asyncio.create_task(gctune.freeze_periodically()),
                asyncio.create_task(metrics.watch_loop_lag())]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log = structlog.get_logger("tapis.server")
    log.info("stopping", grace_s=settings.grace_s)
    for watcher in watchers:
        watcher.cancel()
    await running.stop(settings.grace_s)
    log.info("stopped")


def main(argv: list[str] | None = None) -> None:
    settings = parse_args(argv)
    configure_logging(settings.log_level)
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            runner.run(serve(settings))
    except (StoreCorrupt, StoreInUse, RecoveryError, CannotListen) as error:
        # the store cannot be read or is another server's, or the port is taken: one line
        print(f"tapis-server: refusing to start: {error}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
