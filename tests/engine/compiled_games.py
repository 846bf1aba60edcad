"""Seeded series of every game, written out as bytes: what ``test_compiled.py`` runs once on the
compiled modules and once on the pure ones, and compares byte for byte.

    python tests/engine/compiled_games.py OUT

Its first line names the compiled modules it ran on (none on the pure sources); then, for every
input of every series (each game kind with its fewest seats and with four or its most, seats
acting at random, turn timers running out, bots taking over, seats reclaimed, next games,
a table abandoned), the input, and for every new event its bytes for every view (each seat and
a spectator: ``wire.events_wire``, the SubmitAction answer: ``wire.answer_wire``); after each
input every seat's and a spectator's ``GameView`` (``convert.view``, the rules' views and
legal actions); at the end of each series the table's snapshot (``table_codec``).
"""

from __future__ import annotations

import importlib
import json
import random
import sys

from tapis_engine import table as tbl
from tapis_engine.errors import RuleError
from tapis_engine.protocol import GameSetup
from tapis_engine.registry import DESCRIPTORS
from tapis_engine.table_codec import encode_input, encode_table
from tapis_service.codec import convert, wire
from tapis_service.codec.adapters import ADAPTERS
from tapis_service.tables.session import Session

KINDS = [(game.kind, seats) for game in DESCRIPTORS
         for seats in sorted({game.rules.min_seats, min(game.rules.max_seats, 4)})]
SEEDS = (1, 2)
STEPS = 250


def compiled(names: list[str]) -> list[str]:
    """The modules of ``names`` that were loaded from an extension module."""
    return [name for name in names
            if not str(importlib.import_module(name).__spec__.origin).endswith(".py")]


def series(kind: str, seats: int, seed: int, out: list[bytes]) -> None:
    """One seeded series at a table of ``seats``, written into ``out``."""
    chooser = random.Random(f"{kind}-{seats}-{seed}")
    rules = DESCRIPTORS[[game.kind for game in DESCRIPTORS].index(kind)].rules
    setup = GameSetup(seats=seats, seed=seed, options=rules.default_options(), salt="s")
    table, events = tbl.new_table(rules, setup, [None] * seats, 500, 1_000)
    session = Session(game_id="g", rules=rules, adapter=ADAPTERS[kind], table=table,
                      created_ms=1_000, names=[f"p{seat}" for seat in range(seats)])
    session.record(events)
    views: list[int | None] = [None, *range(seats)]
    now = 2_000
    moves: list[tbl.Input] = [tbl.Claim(seat) for seat in range(seats)]
    for step in range(STEPS):
        table = session.table
        if not moves:
            if table.game_over(rules):
                if table.game_number >= 3:
                    break
                moves = [tbl.NextGame(0)]
            elif chooser.random() < 0.002:
                moves = [tbl.Abandon()]
            else:
                moves = [tbl.Act(s, a) for s in range(seats)
                         for a in rules.legal_actions(table.state, s)]
                moves += [tbl.Timeout(s) for s, at in table.deadlines if at <= now]
                moves += [tbl.Reclaim(s) for s, slot in enumerate(table.seats)
                          if slot.taken_over]
                moves += [tbl.BotMove(s) for s, slot in enumerate(table.seats)
                          if slot.taken_over]
                moves = [chooser.choice(moves)] if moves else []
        if not moves:
            now += 700
            continue
        move = moves.pop(0)
        now += chooser.randrange(0, 400)
        out.append(f"{kind} {seats} {seed} {step} {json.dumps(encode_input(rules, move))}"
                   .encode())
        try:
            applied = session.apply(move, now)
        except RuleError as error:  # a take-over's bot may have no move now
            out.append(f"refused {error.reason} {error}".encode())
            continue
        for seat in views:
            out.append(wire.events_wire(session, applied.events, seat))
            out.append(wire.answer_wire(session, applied, seat))
            out.append(convert.view(session, seat).SerializeToString())
            if session.table.state is not None:
                out.append(repr(rules.view(session.table.state, seat)).encode())
            if seat is not None and session.table.state is not None:
                out.append(repr(rules.legal_actions(session.table.state, seat)).encode())
        out.append(repr([logged.event for logged in applied.events]).encode())
        if session.table.abandoned:
            break
    out.append(json.dumps(encode_table(rules, session.table), sort_keys=True).encode())


def main(path: str, names: list[str]) -> None:
    out: list[bytes] = []
    for kind, seats in KINDS:
        for seed in SEEDS:
            series(kind, seats, seed, out)
    with open(path, "wb") as file:
        file.write((" ".join(compiled(names)) + "\n").encode())
        for record in out:
            file.write(len(record).to_bytes(4, "big") + record)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
