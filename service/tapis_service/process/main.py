"""`tapis-server`: run the Tapis game server."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import secrets
import signal
import sys
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

import orjson
import structlog

from tapis_service.door import logcontext
from tapis_service.door.exposure import Exposed
from tapis_service.door.security import CannotSecure, Security
from tapis_service.observe import metrics
from tapis_service.observe.tracing import TracingUnavailable
from tapis_service.process import configuration, gctune, startup
from tapis_service.process.configuration import BadSetting
from tapis_service.process.entry import StopDuringStartup, refuse, stop_at_once_on_signals
from tapis_service.process.server import CannotListen, RunningServer, create_server
from tapis_service.process.startup import ProbePort, StartupFailed, WaitingRoom
from tapis_service.settings import Settings
from tapis_service.stores.joinkey import JoinKeyMissing
from tapis_service.stores.store import StoreCorrupt, StoreInUse
from tapis_service.tables.recovery import RecoveryError


def configure_logging(level: str, node: str | None = None) -> None:
    """JSON logs on stderr, one object per line, with the bound context (rpc, game, seat) and
    ``node`` (this process's node id) on every line.

    structlog's fast path: lines below ``level`` cost one method call; a written line is
    rendered to bytes by orjson and written by a bytes logger (no str round trip). The
    server's process also routes every other logger through the same renderer
    (``route_other_loggers``)."""
    number = logging.getLevelNamesMapping()[level.upper()]
    logcontext.per_action_lines = number <= logging.INFO
    logcontext.debug_lines = number <= logging.DEBUG
    if node is not None:
        logcontext.bind_process(node=node)
    structlog.configure(
        processors=[
            logcontext.merge,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(serializer=orjson.dumps),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(number),
        logger_factory=structlog.BytesLoggerFactory(file=sys.stderr.buffer),
        cache_logger_on_first_use=True,
    )


def _json_text(value: Any, **options: Any) -> str:
    return orjson.dumps(value, default=str).decode()


def route_other_loggers(level: int) -> None:
    """Every other logger of the process (asyncpg, grpc, picows, asyncio: the standard
    library's ``logging``), ``warnings``, and an exception nothing caught (in a thread too), as
    JSON lines through structlog's renderer (``ProcessorFormatter``) with the same context (the
    node id, the call's request id): one line each, a traceback in its ``exception`` field."""
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            logcontext.merge,
            structlog.processors.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
        ],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(serializer=_json_text),
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(True)
    uncaught = logging.getLogger("tapis.uncaught")

    def on_exception(kind: type[BaseException], error: BaseException,
                     trace: TracebackType | None) -> None:
        uncaught.error("uncaught_exception", exc_info=(kind, error, trace))

    def in_thread(args: threading.ExceptHookArgs) -> None:
        if args.exc_value is not None and not isinstance(args.exc_value, SystemExit):
            uncaught.error("uncaught_exception_in_thread %s",
                           args.thread.name if args.thread else "?",
                           exc_info=(args.exc_type, args.exc_value, args.exc_traceback))

    def unraisable(args: sys.UnraisableHookArgs) -> None:
        error = args.exc_value
        uncaught.warning("exception_ignored %s: %s", args.err_msg or "in", args.object,
                         exc_info=(args.exc_type, error, args.exc_traceback)
                         if error is not None else None)

    sys.excepthook = on_exception
    threading.excepthook = in_thread
    sys.unraisablehook = unraisable


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
    probes = await ProbePort.open(settings)
    room = None
    try:
        room = await WaitingRoom.open(settings, security)
        store = await startup.open_store(settings)
        running = await create_server(settings, store=store, room=room, security=security)
        if probes is not None:
            probes.follow(running.health)
            running.probes, probes = probes, None
        return running
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
        if probes is not None:  # the start failed
            await probes.close()


KNOWN_REFUSALS = (StoreCorrupt, StoreInUse, RecoveryError, CannotListen, JoinKeyMissing,
                  CannotSecure, Exposed, TracingUnavailable)
"""Start-up failures whose message says it all."""


def main(argv: list[str] | None = None) -> None:
    try:
        settings = parse_args(argv)
    except BadSetting as error:
        refuse(error)
    if settings.node_id is None:  # one id for the process: on every log line
        settings = dataclasses.replace(settings, node_id=secrets.token_hex(6))
    configure_logging(settings.log_level, settings.node_id)
    route_other_loggers(logging.getLevelNamesMapping()[settings.log_level.upper()])
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
        structlog.get_logger("tapis.server").debug("refusing_to_start", exc_info=error)
        runner.close()
        refuse(error)
    finally:
        runner.close()


if __name__ == "__main__":
    main()
