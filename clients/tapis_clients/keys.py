"""Keys from the terminal for the interactive client: read as they are typed (no line
buffering), ``q`` or Ctrl-C quit at any moment, keys typed ahead can be thrown away, and the
terminal is always put back as it was."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from types import TracebackType
from typing import Any

QUIT_KEYS = frozenset({"q", "Q", "\x03", "\x04"})
"""q, Ctrl-C (in raw mode), Ctrl-D."""


class KeyReader:
    """Keys typed on ``fd`` (stdin), put in ``keys`` as they come; ``quit`` is set on ``q``,
    Ctrl-C or the end of input. A terminal is switched to cbreak mode (no echo, key by key)
    while the reader is open and restored when it closes."""

    def __init__(self, fd: int | None = None, quit_on_eof: bool = True) -> None:
        self.fd = sys.stdin.fileno() if fd is None else fd
        self.is_tty = os.isatty(self.fd)
        self.quit_on_eof = quit_on_eof
        self.keys: asyncio.Queue[str] = asyncio.Queue()
        self.quit = asyncio.Event()
        self.interrupted = False
        self._saved: list[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __enter__(self) -> KeyReader:
        self._loop = asyncio.get_running_loop()
        if self.is_tty:
            import termios
            import tty

            self._saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd)
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread
            self._loop.add_signal_handler(signal.SIGINT, self._interrupt)
        try:
            self._loop.add_reader(self.fd, self._read)
        except (OSError, ValueError, PermissionError):  # e.g. a regular file: no input
            if self.quit_on_eof:
                self.quit.set()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Stop reading and give the terminal back as it was."""
        if self._loop is not None:
            self._loop.remove_reader(self.fd)
            with contextlib.suppress(NotImplementedError, RuntimeError):
                self._loop.remove_signal_handler(signal.SIGINT)
            self._loop = None
        if self._saved is not None:
            import termios

            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
            self._saved = None

    def _interrupt(self) -> None:
        self.interrupted = True
        self.quit.set()

    def _read(self) -> None:
        try:
            data = os.read(self.fd, 1024)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            if self._loop is not None:
                self._loop.remove_reader(self.fd)
            if self.quit_on_eof:
                self.quit.set()
            return
        for key in data.decode(errors="replace"):
            if key in QUIT_KEYS:
                self.interrupted = key == "\x03"
                self.quit.set()
                return
            self.keys.put_nowait(key)

    def discard_typed_ahead(self) -> None:
        """Throw away every key typed so far, read or not (they were meant for an older
        screen). Input from a pipe or a file is a script: nothing is thrown away."""
        if not self.is_tty:
            return
        import termios

        termios.tcflush(self.fd, termios.TCIFLUSH)
        while not self.keys.empty():
            self.keys.get_nowait()
