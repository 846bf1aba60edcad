"""Bataille Corse on screen (the bots' play is in tapis_clients.strategies.corse)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tapis.v1 import bataille_corse_pb2 as corse_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis_clients.games import card_markup, verdict

COMBINATION_NAMES = {
    corse_pb2.BATAILLE_CORSE_COMBINATION_DOUBLE: "double",
    corse_pb2.BATAILLE_CORSE_COMBINATION_SANDWICH: "sandwich",
    corse_pb2.BATAILLE_CORSE_COMBINATION_BIG_MAC: "big mac",
    corse_pb2.BATAILLE_CORSE_COMBINATION_SUITE: "suite",
    corse_pb2.BATAILLE_CORSE_COMBINATION_TEN: "ten",
    corse_pb2.BATAILLE_CORSE_COMBINATION_SEVEN: "seven",
}
_STATUS = {
    corse_pb2.BATAILLE_CORSE_SEAT_STATUS_IN_PLAY: "in play",
    corse_pb2.BATAILLE_CORSE_SEAT_STATUS_ELIMINATED: "[yellow]eliminated[/]",
    corse_pb2.BATAILLE_CORSE_SEAT_STATUS_OUT: "[red]out for good[/]",
}
_END = {
    corse_pb2.BATAILLE_CORSE_END_REASON_LAST_IN_PLAY: "last player in play, holds every card",
    corse_pb2.BATAILLE_CORSE_END_REASON_FLIP_CAP: "the flip cap was reached: most cards",
}
SHOWN_PILE_CARDS = 6


def render(view: pb.GameView) -> RenderableType:
    corse = view.bataille_corse
    me = view.your_seat if view.HasField("your_seat") else None
    grid = Table(show_header=True, header_style="bold cyan", title="Bataille Corse")
    grid.add_column("seat")
    grid.add_column("deck", justify="right")
    grid.add_column("status")
    grid.add_column("strikes", justify="right")
    for seat in corse.seats:
        label = f"{seat.seat}" + (" (you)" if seat.seat == me else "")
        if corse.HasField("turn") and corse.turn == seat.seat:
            label += " ◀"
        grid.add_row(label, str(seat.deck_size), _STATUS.get(seat.status, "?"),
                     str(seat.strikes) if seat.strikes else "")
    shown = list(corse.pile_top)[-SHOWN_PILE_CARDS:]
    hidden = corse.pile_size - len(shown)
    pile = "  ".join(card_markup(card) for card in shown) or "—"
    if hidden:
        pile = f"[dim]({hidden} under)[/] " + pile
    lines: list[RenderableType] = [
        grid,
        Text.from_markup(f"pile ({corse.pile_size}): {pile}"
                         + (f"  [dim]#{corse.top_sequence}[/]"
                            if corse.HasField("top_sequence") else "")),
    ]
    if corse.HasField("challenger"):
        owes = corse.owes if corse.HasField("owes") else corse.turn
        lines.append(Text.from_markup(
            f"[bold yellow]challenge[/]: seat {corse.challenger} challenges seat {owes}, "
            f"{corse.tries_left} {'try' if corse.tries_left == 1 else 'tries'} left"))
    lines.append(Text.from_markup(f"[dim]flips {corse.flips}/{corse.flip_cap}[/]"))
    if corse.end_reason:
        me = view.your_seat if view.HasField("your_seat") else None
        who = verdict([corse.winner] if corse.HasField("winner") else [], me,
                      [s.display_name for s in view.seats])
        lines.append(Text.from_markup(f"[bold green]{who}: {_END[corse.end_reason]}[/]"))
    return Group(*lines)


def key_hint(view: pb.GameView, typed: str) -> str | None:
    """``f`` when another seat is due to flip: say whose turn it is."""
    corse = view.bataille_corse
    me = view.your_seat if view.HasField("your_seat") else None
    if typed == "f" and me is not None and corse.HasField("turn") and corse.turn != me:
        return f"not your turn: seat {corse.turn} flips"
    return None


def describe_action(action: pb.Action) -> str:
    which = action.bataille_corse.WhichOneof("action")
    if which == "slap":
        return f"slap the pile (card #{action.bataille_corse.slap.pile_sequence})"
    return "flip your top card"


def hotkey(action: pb.Action) -> str | None:
    if action.WhichOneof("action") != "bataille_corse":
        return None
    which = action.bataille_corse.WhichOneof("action")
    return {"flip": "f", "slap": "s"}.get(which or "")


def _reason(won: corse_pb2.BatailleCorsePileWon) -> str:
    if won.reason == corse_pb2.BATAILLE_CORSE_PILE_REASON_CHALLENGE:
        return "challenge"
    if won.reason == corse_pb2.BATAILLE_CORSE_PILE_REASON_LAST_IN_PLAY:
        return "last in play"
    return COMBINATION_NAMES.get(won.combination, "combination")


def describe_event(event: pb.Event, seat: int | None) -> str | None:
    corse = event.bataille_corse
    which = corse.WhichOneof("event")
    if which == "card_flipped":
        e = corse.card_flipped
        drawn = (f" (drawn from seat {e.drawn_from}'s deck)" if e.HasField("drawn_from")
                 else "")
        return f"seat {e.seat} flips {card_markup(e.card)}{drawn}"
    if which == "challenge_started":
        e1 = corse.challenge_started
        return f"seat {e1.challenger} challenges: {e1.tries} {'try' if e1.tries == 1 else 'tries'}"
    if which == "challenge_passed":
        e2 = corse.challenge_passed
        return (f"seat {e2.challenger} answers seat {e2.previous_challenger}'s challenge: "
                f"{e2.tries} {'try' if e2.tries == 1 else 'tries'}")
    if which == "pile_won":
        won = corse.pile_won
        return f"[bold]seat {won.seat} takes the pile ({_reason(won)})[/]: {won.cards} cards"
    if which == "false_slap":
        e3 = corse.false_slap
        if e3.penalty_cards:
            return (f"seat {e3.seat} slaps falsely: {e3.penalty_cards} "
                    f"{'card' if e3.penalty_cards == 1 else 'cards'} under the pile")
        return f"seat {e3.seat} slaps falsely (strike {e3.strikes})"
    if which == "eliminated":
        return f"[yellow]seat {corse.eliminated.seat} is eliminated[/]"
    if which == "reentered":
        return f"[green]seat {corse.reentered.seat} is back in play[/]"
    if which == "out_for_good":
        return f"[red]seat {corse.out_for_good.seat} is out for good[/]"
    if which == "dealt":
        sizes = "-".join(str(size) for size in corse.dealt.deck_sizes)
        return f"cards dealt ({sizes}); seat 0 flips first"
    if which == "ended":
        ended = corse.ended
        who = verdict([ended.winner] if ended.HasField("winner") else [], seat)
        return f"{who}: {_END.get(ended.reason, 'game over')}"
    return None
