"""`tapis-server`: run the Tapis game server."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import traceback
from collections.abc import Callable

import orjson
import structlog

from tapis_service import configuration, gctune, logcontext, metrics, startup
from tapis_service.configuration import BadSetting
from tapis_service.entry import StopDuringStartup, refuse, stop_at_once_on_signals
from tapis_service.exposure import Exposed
from tapis_service.joinkey import JoinKeyMissing
from tapis_service.recovery import RecoveryError
from tapis_service.security import CannotSecure, Security
from tapis_service.server import CannotListen, RunningServer, create_server
from tapis_service.settings import Settings
from tapis_service.startup import StartupFailed, WaitingRoom
from tapis_service.store import StoreCorrupt, StoreInUse
from tapis_service.tracing import TracingUnavailable


def configure_logging(level: str) -> None:
    """JSON logs on stderr, one object per line, with the bound context (rpc, game, seat).

    structlog's fast path: lines below ``level`` cost one method call; a written line is
    rendered to bytes by orjson and written by a bytes logger (no str round trip)."""
    number = logging.getLevelNamesMapping()[level.upper()]
    logcontext.per_action_lines = number <= logging.INFO
    logcontext.debug_lines = number <= logging.DEBUG
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
    """Start (the waiting room holds the port while the store opens and recovery runs), serve
    until SIGTERM or SIGINT, then stop gracefully."""
    running = await start(settings)
    # after start-up and recovery: what they built is frozen out of collections
    gctune.tune(settings.gc_thresholds)
    watchers = [asyncio.create_task(gctune.freeze_periodically()),
                asyncio.create_task(metrics.watch_loop_lag())]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):  # from here, a signal is a graceful stop
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


async def start(settings: Settings) -> RunningServer:
    """The server, serving; any failure on the way is a ``StartupFailed`` (or one of the
    known refusals) with a one-line reason."""
    # before anything listens: TLS and keys that cannot be used, or a server that would listen
    # beyond loopback without both, refuse to start (CannotSecure, Exposed)
    security = Security.from_settings(settings)
    if settings.metrics_port:
        metrics.serve_metrics(settings.metrics_port, settings.host)
    room = await WaitingRoom.open(settings, security)
    try:
        store = await startup.open_store(settings)
        return await create_server(settings, store=store, room=room, security=security)
    except KNOWN_REFUSALS:
        raise
    except OSError as error:  # a directory or file the server cannot use, a port
        raise StartupFailed(f"{error.strerror or error}: "
                            f"{error.filename or settings.data_dir}") from error
    except Exception as error:
        raise StartupFailed(f"{type(error).__name__}: {error}") from error
    finally:
        if room is not None:
            await room.close()


KNOWN_REFUSALS = (StoreCorrupt, StoreInUse, RecoveryError, CannotListen, JoinKeyMissing,
                  CannotSecure, Exposed, TracingUnavailable)
"""Start-up failures whose message says it all."""


def main(argv: list[str] | None = None) -> None:
    try:
        settings = parse_args(argv)
    except BadSetting as error:
        refuse(error)
    configure_logging(settings.log_level)
    stop_at_once_on_signals()
    runner = asyncio.Runner(loop_factory=loop_factory(settings))
    try:
        runner.run(serve(settings))
    except StopDuringStartup as stopped:
        # at once: nothing was acknowledged yet, and what the store committed is durable (no
        # loop clean-up, which would cancel the health calls in flight noisily)
        structlog.get_logger("tapis.server").info("stopped during start-up",
                                                  signal=signal.Signals(stopped.signum).name)
        sys.stderr.flush()
        os._exit(0)
    except (*KNOWN_REFUSALS, StartupFailed) as error:
        # the store cannot be read or is another server's, or the port is taken: one line
        if settings.log_level == "debug":
            traceback.print_exception(error)
        runner.close()
        refuse(error)
    finally:
        runner.close()


if __name__ == "__main__":
    main()
