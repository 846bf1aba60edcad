"""Golden playthroughs: one recorded, seeded game per game and rules variant (after OpenSpiel's).

Each game of the registry (``tapis_engine.registry.DESCRIPTORS``), with its short options and
with each of its descriptor's ``variants``, is played to its end by its own server bots (seat i
plays ``bot_strategies[i % len]``; the lowest seat with a move moves first). The record is a JSON
Lines file in ``tests/engine/playthroughs/``: the setup on the first line, then one line per
input: the input, the action the bot chose, the public events (as a spectator gets them) and what
each seat is shown (its view). ``tests/engine/test_playthroughs.py`` replays every file and fails
on the first line that differs, so an unintended rules change fails loudly.

``python -m tools.playthroughs`` (``make playthroughs``) records them all again, on purpose:
after an intended rules change, re-record and review the diff (``git diff tests/engine``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from dataclasses import dataclass, fields, is_dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from tapis_engine import table as tbl
from tapis_engine import table_codec
from tapis_engine.cards import Card
from tapis_engine.descriptor import GameDescriptor
from tapis_engine.errors import RuleError
from tapis_engine.protocol import GameSetup
from tapis_engine.registry import DESCRIPTORS

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "tests" / "engine" / "playthroughs"
SEED = 33
MAX_STEPS = 5_000
"""A bot game longer than this is a bug (or options that do not keep the game short)."""
DEFAULT = "default"


@dataclass(frozen=True, slots=True)
class Playthrough:
    """One golden game: a registered game with one set of options."""

    descriptor: GameDescriptor
    variant: str
    options: Any

    @property
    def name(self) -> str:
        """The file's stem: the game's kind, then the variant unless it is the default."""
        kind = self.descriptor.kind
        return kind if self.variant == DEFAULT else f"{kind}-{self.variant}"

    @property
    def path(self) -> Path:
        return FOLDER / f"{self.name}.jsonl"

    @property
    def seats(self) -> int:
        """Three seats when the game allows them, else the nearest count it allows."""
        rules = self.descriptor.rules
        return max(rules.min_seats, min(3, rules.max_seats))


def playthroughs() -> list[Playthrough]:
    """Every golden game: each registered game with its short options, then its variants."""
    out = []
    for game in DESCRIPTORS:
        out.append(Playthrough(game, DEFAULT, game.short_options))
        out.extend(Playthrough(game, name, options) for name, options in game.variants)
    return out


def plain(value: Any) -> Any:
    """A view, event or action as JSON data: dataclasses as objects named by their type, cards
    as their text (``"10D"``), sets sorted."""
    if isinstance(value, Card):
        return str(value)
    if isinstance(value, Enum):
        return plain(value.value)
    if is_dataclass(value) and not isinstance(value, type):
        return {"type": type(value).__name__,
                **{f.name: plain(getattr(value, f.name)) for f in fields(value)}}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {"type": type(value).__name__,
                **{k: plain(v) for k, v in value._asdict().items()}}
    if isinstance(value, (tuple, list)):
        return [plain(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((plain(item) for item in value), key=repr)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot record a {type(value).__name__}")


def header(play: Playthrough) -> dict[str, Any]:
    """The first line: what the game is and how it was set up."""
    rules = play.descriptor.rules
    return {"game": play.descriptor.kind, "variant": play.variant, "seed": SEED,
            "seats": play.seats, "options": rules.encode_options(play.options),
            "bots": bots(play)}


def bots(play: Playthrough) -> list[str]:
    """Each seat's bot: the game's strategies in turn, so that each one plays."""
    strategies = play.descriptor.rules.bot_strategies
    return [strategies[seat % len(strategies)] for seat in range(play.seats)]


def start(play: Playthrough) -> tuple[tbl.Table, list[tbl.TableEvent]]:
    rules = play.descriptor.rules
    setup = GameSetup(play.seats, SEED, play.options)
    return tbl.new_table(rules, setup, bots(play), 0, 0)


class Recorder:
    """Turns the table after each input into a line; views are recorded as what changed."""

    def __init__(self, play: Playthrough) -> None:
        self.play = play
        self.rules = play.descriptor.rules
        self.seen: dict[str, dict[str, Any]] = {}
        """The last view of each recipient ("all": a spectator, "0"…: the seats)."""

    def line(self, table: tbl.Table, step: int, move: tbl.Input | None,
             events: list[tbl.TableEvent], action: Any = None) -> dict[str, Any]:
        """One step: the input, the bot's action, the public events (a spectator's), and the
        view fields that changed: a spectator's under "view", then under "seats" each seat's
        fields that changed and are not the spectator's."""
        rules = self.rules
        out: dict[str, Any] = {"step": step}
        if move is not None:
            out["input"] = table_codec.encode_input(rules, move)
        if action is not None:
            out["action"] = plain(action)
        out["events"] = [{"seq": e.sequence, **self._public(e.body)} for e in events]
        if table.state is None:
            return out
        public = self._view(table, None)
        changed = self._changed("all", public)
        out["view"] = changed
        seats: dict[str, Any] = {}
        for seat in range(self.play.seats):
            key = str(seat)
            own = {k: v for k, v in self._changed(key, self._view(table, seat)).items()
                   if not (k in changed and public.get(k) == v)}
            if own:
                seats[key] = own
        if seats:
            out["seats"] = seats
        return out

    def _view(self, table: tbl.Table, seat: int | None) -> dict[str, Any]:
        data = plain(self.rules.view(table.state, seat))
        assert isinstance(data, dict)
        data.pop("type", None)
        return data

    def _changed(self, key: str, view: dict[str, Any]) -> dict[str, Any]:
        before = self.seen.get(key, {})
        self.seen[key] = view
        return {k: v for k, v in view.items() if k not in before or before[k] != v}

    def _public(self, body: Any) -> dict[str, Any]:
        data = plain(body if _is_table_event(body) else self.rules.redact(body, None))
        assert isinstance(data, dict)
        return data


def _is_table_event(body: Any) -> bool:
    return type(body).__module__ == tbl.__name__


def lines(play: Playthrough) -> Iterator[dict[str, Any]]:
    """The playthrough, line by line (deterministic: the same lines on every run)."""
    rules = play.descriptor.rules
    recorder = Recorder(play)
    yield header(play)
    table, events = start(play)
    yield recorder.line(table, 0, None, events)
    step = 0
    while not table.game_over(rules):
        step += 1
        if step > MAX_STEPS:
            raise RuntimeError(f"{play.name} did not end in {MAX_STEPS} steps")
        seat = min(tbl.pending_bot_seats(rules, table))
        action = tbl.bot_move(rules, table, seat)
        move = tbl.BotMove(seat)
        table, events = tbl.step(rules, table, move, step)
        yield recorder.line(table, step, move, events, action)


def replay(play: Playthrough, text: str) -> str | None:
    """Replay a recorded file's inputs and compare line for line: None when every line is the
    same, else where the first difference is (the step, the field, recorded and now)."""
    rules = play.descriptor.rules
    recorded = [json.loads(row) for row in text.splitlines() if row.strip()]
    if len(recorded) < 2:
        return "the file has no game (a setup line, then one line per step)"
    if (now := _roundtrip(header(play))) != recorded[0]:
        return "the setup differs: " + difference(recorded[0], now)
    recorder = Recorder(play)
    table, events = start(play)
    if (mismatch := _compare(recorded[1], recorder.line(table, 0, None, events))) is not None:
        return mismatch
    for data in recorded[2:]:
        if table.game_over(rules):
            return (f"the game now ends at step {data['step'] - 1}, it was recorded ending "
                    f"at step {recorded[-1]['step']}")
        move = table_codec.decode_input(rules, data["input"])
        seat = getattr(move, "seat", 0)
        action = tbl.bot_move(rules, table, seat) if isinstance(move, tbl.BotMove) else None
        try:
            table, events = tbl.step(rules, table, move, data["step"])
        except RuleError as error:
            return f"step {data['step']}: the recorded input {data['input']} fails now: {error!r}"
        line = recorder.line(table, data["step"], move, events, action)
        if (mismatch := _compare(data, line)) is not None:
            return mismatch
    if not table.game_over(rules):
        return f"the game is not over after the recorded step {recorded[-1]['step']}"
    return None


def _compare(recorded: dict[str, Any], line: dict[str, Any]) -> str | None:
    now = _roundtrip(line)
    return None if now == recorded else f"step {line['step']}: " + difference(recorded, now)


def _roundtrip(data: dict[str, Any]) -> Any:
    """``data`` as it reads back from its line (tuples as lists)."""
    return json.loads(encode(data))


def difference(recorded: Any, now: Any, where: str = "") -> str:
    """The first place where ``now`` differs from ``recorded``, with both values there."""
    if isinstance(recorded, dict) and isinstance(now, dict):
        for key in [*recorded, *(k for k in now if k not in recorded)]:
            if key not in now:
                return f"{where}.{key} was {_short(recorded[key])}, now absent"
            if key not in recorded:
                return f"{where}.{key} is new: {_short(now[key])}"
            if recorded[key] != now[key]:
                return difference(recorded[key], now[key], f"{where}.{key}")
    if isinstance(recorded, list) and isinstance(now, list):
        for index, (old, new) in enumerate(zip(recorded, now, strict=False)):
            if old != new:
                return difference(old, new, f"{where}[{index}]")
        if len(recorded) != len(now):
            return (f"{where} had {len(recorded)} items, now {len(now)}: "
                    f"recorded {_short(recorded)}, now {_short(now)}")
    return f"{where or 'the line'}: recorded {_short(recorded)}, now {_short(now)}"


def _short(value: Any, limit: int = 300) -> str:
    text = encode(value) if isinstance(value, dict) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "…"


def encode(data: Any) -> str:
    """One line of a playthrough file (compact, keys in their order)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def record(play: Playthrough) -> str:
    """The whole file's text."""
    return "".join(encode(data) + "\n" for data in lines(play))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="only these playthroughs (e.g. basra-iraqi)")
    args = parser.parse_args(argv)
    FOLDER.mkdir(parents=True, exist_ok=True)
    for play in playthroughs():
        if args.names and play.name not in args.names:
            continue
        text = record(play)
        old = play.path.read_text(encoding="utf-8") if play.path.exists() else None
        play.path.write_text(text, encoding="utf-8")
        state = "new" if old is None else "unchanged" if old == text else "CHANGED"
        print(f"{play.path.relative_to(ROOT)}: {text.count(chr(10)) - 1} steps, "
              f"{len(text) // 1024} KB, {state}")


if __name__ == "__main__":
    main()
