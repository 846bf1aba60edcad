"""The ``tapis-server`` command: signals are handled from the first instant.

SIGTERM and SIGINT are caught before anything heavy is imported, and until the server serves
they end the process at once with status 0 (``StopDuringStartup``, raised from the signal
handler, which Python runs between two bytecodes: also in the middle of imports or of a long
recovery). Nothing is acknowledged before serving, and what the store committed is durable.
Once the server serves, the event loop's handlers replace these: a signal is then a graceful
stop (drain, hand-off).

The settings are read and checked before the server's modules are imported: a value out of
its range refuses the start in a fraction of a second (one line, exit 2).
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType
from typing import NoReturn


class StopDuringStartup(SystemExit):
    """SIGTERM or SIGINT before the server serves: the process ends, status 0."""

    def __init__(self, signum: int) -> None:
        super().__init__(0)
        self.signum = signum


def _stop_now(signum: int, frame: FrameType | None) -> None:
    raise StopDuringStartup(signum)


def stop_at_once_on_signals() -> None:
    """From now on SIGTERM/SIGINT raise ``StopDuringStartup`` (until the event loop's own
    handlers replace these)."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _stop_now)


def refuse(why: object) -> NoReturn:
    """The server does not start: one line on stderr, exit status 2."""
    print(f"tapis-server: refusing to start: {why}", file=sys.stderr)
    raise SystemExit(2)


def main() -> None:
    stop_at_once_on_signals()
    try:
        from tapis_service.process.configuration import BadSetting, parse

        try:
            parse(sys.argv[1:], os.environ)
        except BadSetting as error:
            refuse(error)
        from tapis_service.process.main import main as run_server
    except StopDuringStartup:
        raise SystemExit(0) from None
    run_server()
