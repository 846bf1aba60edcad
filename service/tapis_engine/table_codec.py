"""A table as JSON, and its inputs as journal records: explicit, no pickle.

``encode_table`` / ``decode_table`` write and read a whole table (the snapshots and the creation
record); ``encode_input`` / ``decode_input`` the inputs of the journal. Each decode is the exact
inverse of its encode (tests/engine and the conformance suite check it for every game).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tapis_engine.cards import cards_from_text
from tapis_engine.protocol import JSON, GameSetup, Rules
from tapis_engine.table import (
    Abandon,
    Act,
    BotMove,
    Claim,
    GameRecord,
    Input,
    NextGame,
    Reclaim,
    Replace,
    Resume,
    SeatSlot,
    Table,
    Timeout,
)


def encode_table(rules: Rules[Any, Any, Any], table: Table) -> JSON:
    """A JSON-safe dict of the whole table (explicit, no pickle)."""
    setup = table.setup
    return {
        "kind": table.kind,
        "setup": {
            "seats": setup.seats,
            "seed": setup.seed,
            "options": rules.encode_options(setup.options),
            "stacked_deck": None if setup.stacked_deck is None
            else [str(c) for c in setup.stacked_deck],
            "stacked_first": setup.stacked_first,
            # new keys only when set, so that records written before them still compare equal
            **({"salt": setup.salt} if setup.salt else {}),
            **({"seed_chosen": True} if setup.seed_chosen else {}),
        },
        "turn_time_ms": table.turn_time_ms,
        "seats": [[s.bot, s.claimed, s.taken_over] for s in table.seats],
        "game_number": table.game_number,
        "state": None if table.state is None else rules.encode_state(table.state),
        "records": [[r.number, r.seed, list(r.winners), list(r.scores), r.summary]
                    for r in table.records],
        "deadlines": [list(d) for d in table.deadlines],
        "version": table.version,
        "next_sequence": table.next_sequence,
        **({"abandoned": True} if table.abandoned else {}),
        **({"resumes": table.resumes} if table.resumes else {}),
    }


def decode_table(rules: Rules[Any, Any, Any], data: Mapping[str, Any]) -> Table:
    """Inverse of ``encode_table``."""
    s = data["setup"]
    setup = GameSetup(
        seats=s["seats"],
        seed=s["seed"],
        options=rules.decode_options(s["options"]),
        stacked_deck=None if s["stacked_deck"] is None else cards_from_text(s["stacked_deck"]),
        stacked_first=s["stacked_first"],
        salt=s.get("salt", ""),
        seed_chosen=bool(s.get("seed_chosen", False)),
    )
    return Table(
        kind=data["kind"],
        setup=setup,
        turn_time_ms=data["turn_time_ms"],
        seats=tuple(SeatSlot(bot, claimed, taken) for bot, claimed, taken in data["seats"]),
        game_number=data["game_number"],
        state=None if data["state"] is None else rules.decode_state(data["state"]),
        records=tuple(GameRecord(n, seed, tuple(w), tuple(sc), summ)
                      for n, seed, w, sc, summ in data["records"]),
        deadlines=tuple((seat, at) for seat, at in data["deadlines"]),
        version=data["version"],
        next_sequence=data["next_sequence"],
        abandoned=bool(data.get("abandoned", False)),
        resumes=int(data.get("resumes", 0)),
    )


def encode_input(rules: Rules[Any, Any, Any], move: Input) -> JSON:
    """A JSON-safe journal record of an input."""
    name = type(move).__name__
    if isinstance(move, Act):
        return {"input": name, "seat": move.seat, "action": rules.encode_action(move.action)}
    if isinstance(move, (Abandon, Resume)):
        return {"input": name}
    return {"input": name, "seat": move.seat}


_INPUTS: dict[str, type] = {c.__name__: c for c in (Claim, BotMove, Timeout, Reclaim, NextGame,
                                                     Replace)}


def decode_input(rules: Rules[Any, Any, Any], data: Mapping[str, Any]) -> Input:
    """Inverse of ``encode_input``."""
    if data["input"] == "Act":
        return Act(data["seat"], rules.decode_action(data["action"]))
    if data["input"] == "Abandon":
        return Abandon()
    if data["input"] == "Resume":
        return Resume()
    move: Input = _INPUTS[data["input"]](data["seat"])
    return move
