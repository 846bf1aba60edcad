"""The seats a person holds, kept in a local file so that one who quits can come back:
`tapis join GAME_ID` offers the seat again with its stored token.

The file is ``$TAPIS_STATE_DIR/seats.json``, else ``$XDG_STATE_HOME/tapis/seats.json``, else
``~/.local/state/tapis/seats.json``; readable by its owner only (a token is a seat's secret).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
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


def find(game_id: str, file: Path | None = None) -> HeldSeat | None:
    """The seat held at ``game_id``, if this person holds one."""
    for entry in reversed(_load(file or path())):
        if entry.get("game_id") == game_id:
            try:
                return HeldSeat(str(entry["game_id"]), int(str(entry["seat"])),
                                str(entry["token"]), str(entry.get("target", "")),
                                str(entry.get("name", "")))
            except (KeyError, ValueError):
                return None
    return None


def _write(file: Path, entries: list[dict[str, object]]) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    temporary = file.with_suffix(".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        json.dump(entries[-KEPT:], out, indent=1)
    os.replace(temporary, file)


def remember(held: HeldSeat, file: Path | None = None) -> None:
    file = file or path()
    entries = [e for e in _load(file) if e.get("game_id") != held.game_id]
    entries.append(asdict(held))
    _write(file, entries)


def forget(game_id: str, file: Path | None = None) -> None:
    file = file or path()
    entries = _load(file)
    kept = [e for e in entries if e.get("game_id") != game_id]
    if len(kept) != len(entries):
        _write(file, kept)
