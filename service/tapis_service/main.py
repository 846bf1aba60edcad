"""`tapis-server`: run the Tapis game server."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import NoReturn

import orjson
import structlog

from tapis_service import configuration, gctune, logcontext, metrics
from tapis_service.configuration import BadSetting
from tapis_service.exposure import Exposed
from tapis_service.recovery import RecoveryError
from tapis_service.security import CannotSecure
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


def loop_factory(settings: Settings) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop (it won side by side: less server CPU per action, see
    docs/performance.md), unless ``--event-loop asyncio`` or uvloop is not installed."""
    if settings.event_loop != "uvloop":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def parse_args(argv: list[str] | None = None) -> Settings:
    """The settings from the flags and ``TAPIS_*`` variables (tapis_service/settings.py)."""
    return configuration.parse(argv, os.environ)


async def serve(settings: Settings) -> None:
    if settings.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(settings.metrics_port, addr=settings.host)
    running = await create_server(settings)
    # after start-up and recovery: what they built is frozen out of collections
    gctune.tune(settings.gc_thresholds)
    watchers = [asyncio.create_task(gctune.freeze_periodically()),
                asyncio.create_task(metrics.watch_loop_lag())]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if running.security is not None:  # certificates and keys are read again on SIGHUP
        loop.add_signal_handler(signal.SIGHUP, running.security.reload)
    await stop.wait()
    log = structlog.get_logger("tapis.server")
    log.info("stopping", grace_s=settings.grace_s)
    for watcher in watchers:
        watcher.cancel()
    await running.stop(settings.grace_s)
    log.info("stopped")


def refuse(why: object) -> NoReturn:
    """The server does not start: one line on stderr, exit status 2."""
    print(f"tapis-server: refusing to start: {why}", file=sys.stderr)
    raise SystemExit(2)


def main(argv: list[str] | None = None) -> None:
    try:
        settings = parse_args(argv)
    except BadSetting as error:
        refuse(error)
    configure_logging(settings.log_level)
    try:
        with asyncio.Runner(loop_factory=loop_factory(settings)) as runner:
            runner.run(serve(settings))
    except (StoreCorrupt, StoreInUse, RecoveryError, CannotListen, CannotSecure,
            Exposed) as error:
        # the store cannot be read or is another server's, the port is taken, the TLS or key
        # files cannot be used, or it would listen beyond loopback unprotected: one line
        refuse(error)


if __name__ == "__main__":
    main()
