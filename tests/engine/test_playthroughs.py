"""Golden playthroughs (after OpenSpiel's): each recorded game replays event for event and view
for view, so a rules change fails here; an intended one is re-recorded with ``make
playthroughs`` (``tools/playthroughs.py``) and its diff reviewed."""

from __future__ import annotations

import json

import pytest

from tapis_engine.registry import DESCRIPTORS
from tools import playthroughs
from tools.playthroughs import FOLDER, Playthrough, replay

PLAYS = playthroughs.playthroughs()


def _text(play: Playthrough) -> str:
    assert play.path.exists(), f"no golden playthrough for {play.name}: run `make playthroughs`"
    return play.path.read_text(encoding="utf-8")


@pytest.mark.parametrize("play", PLAYS, ids=[p.name for p in PLAYS])
def test_the_recorded_game_replays_event_for_event(play: Playthrough) -> None:
    mismatch = replay(play, _text(play))
    assert mismatch is None, (
        f"{play.path.name} no longer replays ({mismatch}). If the rules change is intended, "
        "run `make playthroughs` and review the diff.")


def test_every_game_and_variant_of_the_registry_has_one_file() -> None:
    names = {p.name for p in PLAYS}
    assert {d.kind for d in DESCRIPTORS} <= names
    assert names == {path.stem for path in FOLDER.glob("*.jsonl")}


def test_the_game_is_played_to_its_end_with_every_seat_moving() -> None:
    for play in PLAYS:
        rows = [json.loads(row) for row in _text(play).splitlines()]
        assert rows[-1]["events"][-1]["type"] == "GameEnded", play.name
        movers = {row["input"]["seat"] for row in rows[2:]}
        assert movers == set(range(play.seats)), play.name


def test_a_changed_event_is_reported_at_its_step() -> None:
    play = PLAYS[0]
    rows = _text(play).splitlines()
    line = json.loads(rows[6])
    line["events"][0]["seq"] += 100
    rows[6] = playthroughs.encode(line)
    mismatch = replay(play, "\n".join(rows))
    assert mismatch is not None
    assert mismatch.startswith(f"step {line['step']}: .events[0].seq: recorded ")


def test_a_changed_view_is_reported_with_its_field() -> None:
    play = next(p for p in PLAYS if p.descriptor.private_cards is not None)
    rows = _text(play).splitlines()
    index = next(i for i, row in enumerate(rows) if '"seats":{' in row and i > 3)
    line = json.loads(rows[index])
    seat, own = next(iter(line["seats"].items()))
    field = next(iter(own))
    own[field] = "changed"
    rows[index] = playthroughs.encode(line)
    mismatch = replay(play, "\n".join(rows))
    assert mismatch is not None
    assert mismatch.startswith(f'step {line["step"]}: .seats.{seat}.{field}: recorded "changed"')


def test_a_game_cut_short_or_longer_or_a_changed_setup_is_reported() -> None:
    play = PLAYS[0]
    rows = _text(play).splitlines()
    assert replay(play, rows[0]) is not None
    assert replay(play, "\n".join(rows[:-1])) == (
        f"the game is not over after the recorded step {len(rows) - 3}")
    extra = json.loads(rows[-1])
    extra["step"] += 1
    assert replay(play, "\n".join([*rows, playthroughs.encode(extra)])) == (
        f"the game now ends at step {extra['step'] - 1}, it was recorded ending at step "
        f"{extra['step']}")
    header = json.loads(rows[0])
    header["seed"] += 1
    mismatch = replay(play, "\n".join([playthroughs.encode(header), *rows[1:]]))
    assert mismatch is not None and mismatch.startswith("the setup differs: .seed: recorded ")
