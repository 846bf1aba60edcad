"""The seats a person holds, kept in a local file so that one who quits can come back:
`tapis join GAME_ID` offers the seat again with its stored token. A client playing a seat holds
a lock on it (``locks/GAME_ID.SEAT.lock`` beside the file), so that a second terminal of the
same person never plays it at the same time.

The file is ``$TAPIS_STATE_DIR/seats.json``, else ``$XDG_STATE_HOME/tapis/seats.json``, else
``~/.local/state/tapis/seats.json``; readable by its owner only (a token is a seat's secret).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

KEPT = 200
"""The most recent seats kept; older ones are forgotten."""


@dataclass(frozen=True)
class HeldSeat:
    game_id: str
    seat: int
    token: str
    target: str
    name: str
    bots: list[list[object]] = field(default_factory=list)
    """Seats the CLI's own computer players hold at this table: ``[seat, token]`` each."""
    bot_ms: int = 0
    """Their reaction time (``--bot-speed``), in milliseconds."""


def path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("TAPIS_STATE_DIR"):
        return Path(env["TAPIS_STATE_DIR"]) / "seats.json"
    base = Path(env["XDG_STATE_HOME"]) if env.get("XDG_STATE_HOME") else \
        Path.home() / ".local" / "state"
    return base / "tapis" / "seats.json"


def _load(file: Path) -> list[dict[str, object]]:
    try:
        entries = json.loads(file.read_text())
    except (OSError, ValueError):
        return []
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def _held(entry: dict[str, object]) -> HeldSeat | None:
    try:
        bots = entry.get("bots", [])
        return HeldSeat(str(entry["game_id"]), int(str(entry["seat"])), str(entry["token"]),
                        str(entry.get("target", "")), str(entry.get("name", "")),
                        [list(b) for b in bots] if isinstance(bots, list) else [],
                        int(str(entry.get("bot_ms", 0))))
    except (KeyError, ValueError, TypeError):
        return None


def find_all(game_id: str, file: Path | None = None) -> list[HeldSeat]:
    """Every seat this person holds at ``game_id``, the latest first."""
    found = [_held(e) for e in reversed(_load(file or path())) if e.get("game_id") == game_id]
    return [held for held in found if held is not None]


def find(game_id: str, file: Path | None = None) -> HeldSeat | None:
    """The seat held at ``game_id`` most lately, if this person holds one."""
    held = find_all(game_id, file)
    return held[0] if held else None


def _write(file: Path, entries: list[dict[str, object]]) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    temporary = file.with_suffix(".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        json.dump(entries[-KEPT:], out, indent=1)
    os.replace(temporary, file)


def remember(held: HeldSeat, file: Path | None = None) -> None:
    file = file or path()
    entries = [e for e in _load(file)
               if (e.get("game_id"), e.get("seat")) != (held.game_id, held.seat)]
    entries.append(asdict(held))
    _write(file, entries)


def forget(game_id: str, file: Path | None = None, seat: int | None = None) -> None:
    """Forget the seats held at ``game_id`` (only ``seat`` when given)."""
    file = file or path()
    entries = _load(file)
    kept = [e for e in entries if e.get("game_id") != game_id
            or (seat is not None and e.get("seat") != seat)]
    if len(kept) != len(entries):
        _write(file, kept)


class SeatLock:
    """A seat played by this terminal: an exclusive lock, held until ``release`` (or the
    process ends: the system drops it with the file descriptor)."""

    def __init__(self, game_id: str, seat: int, file: Path | None = None) -> None:
        folder = (file or path()).parent / "locks"
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{game_id}.{seat}.lock"
        self.fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock; False when another client plays the seat now."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self.fd = fd
        return True

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
