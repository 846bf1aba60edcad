"""Basra on screen: hand, floor, sides (captured cards, basras, scores), stock and whose turn."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tapis.v1 import basra_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis.v1.cards_pb2 import Card
from tapis_clients.games import card_markup, card_text, verdict

_VARIANTS = {basra_pb2.BASRA_VARIANT_UNSPECIFIED: "Egyptian",
             basra_pb2.BASRA_VARIANT_EGYPTIAN: "Egyptian",
             basra_pb2.BASRA_VARIANT_LEBANESE: "Lebanese",
             basra_pb2.BASRA_VARIANT_IRAQI: "Iraqi"}
_SWEEPS = {basra_pb2.BASRA_SWEEP_KIND_SUM: "", basra_pb2.BASRA_SWEEP_KIND_RANK: "",
           basra_pb2.BASRA_SWEEP_KIND_SEVEN: " (7♦ sweep)",
           basra_pb2.BASRA_SWEEP_KIND_JACK: " (jack)",
           basra_pb2.BASRA_SWEEP_KIND_MATCH: ""}


def _cards(cards: list[Card] | tuple[Card, ...], plain: bool = False) -> str:
    if not cards:
        return "—"
    if plain:
        return "+".join(card_text(card) for card in cards)
    return " ".join(card_markup(card) for card in cards)


def _side_name(side: basra_pb2.BasraSide, me: int | None) -> str:
    seats = list(side.seats)
    label = "+".join(f"s{s}" for s in seats)
    if len(seats) > 1:
        label = f"team {side.side} ({label})"
    return label + (" (you)" if me is not None and me in seats else "")


def render(view: pb.GameView) -> RenderableType:
    """The table as the viewer sees it."""
    b = view.basra
    me = view.your_seat if view.HasField("your_seat") else None
    variant = _VARIANTS.get(b.variant, "?") + (" · two-card jack basra"
                                               if b.two_card_jack_basra else "")
    sides = Table(show_header=True, header_style="bold cyan",
                  title=f"Basra · deal {b.deal} · {variant} · to {b.target}")
    sides.add_column("side")
    sides.add_column("captured", justify="right")
    sides.add_column("basras", justify="right")
    sides.add_column("score", justify="right")
    for side in b.sides:
        sides.add_row(_side_name(side, me), str(side.captured_cards), str(side.basras),
                      str(side.score))
    hands = "  ".join(
        f"s{seat}:{size}" + (" ◀" if b.HasField("to_move") and b.to_move == seat else "")
        + (" (dealer)" if seat == b.dealer else "")
        for seat, size in enumerate(b.hand_sizes) if seat in b.playing_seats)
    lines: list[RenderableType] = [
        sides,
        Text.from_markup(f"floor: {_cards(list(b.floor))}"),
        Text.from_markup(f"stock: {b.stock_size} cards · hands: {hands}"),
    ]
    if me is not None:
        lines.append(Text.from_markup(f"your hand: {_cards(list(b.hand))}"))
    if b.HasField("to_move"):
        whose = "your turn" if b.to_move == me else f"seat {b.to_move} to play"
        lines.append(Text.from_markup(f"[bold]{whose}[/]"))
    if b.over:
        names = ", ".join(_side_name(b.sides[s], me) for s in b.winning_sides)
        lines.append(Text.from_markup(f"[bold green]{names} win[/]"))
    return Group(*lines)


def describe_action(action: pb.Action) -> str:
    """``play 7♦ taking 3♣+4♥``; ``play K♠`` when it takes nothing."""
    play = action.basra.play_card
    text = f"play {card_text(play.card)}"
    if play.HasField("capture"):
        if play.capture.cards:
            text += f" taking {_cards(list(play.capture.cards), plain=True)}"
    else:
        text += " (best capture)"
    return text


def hotkey(action: pb.Action) -> str | None:
    """No single-key shortcut: a card may have several capture options."""
    return None


def describe_event(event: pb.Event, seat: int | None) -> str | None:
    """One line for a person, or None."""
    b = event.basra
    which = b.WhichOneof("event")
    if which == "hands_dealt":
        dealt = b.hands_dealt
        own = [h for h in dealt.hands if h.visible and h.seat == seat]
        tail = f": your hand {_cards(list(own[0].cards))}" if own else ""
        return f"deal {dealt.deal}, hand {dealt.round} (dealer seat {dealt.dealer}){tail}"
    if which == "floor_laid":
        laid = b.floor_laid
        buried = f" ({_cards(list(laid.buried))} buried)" if laid.buried else ""
        return f"floor: {_cards(list(laid.floor))}{buried}"
    if which == "card_played":
        played = b.card_played
        return f"seat {played.seat} plays {card_markup(played.card)}"
    if which == "captured":
        cap = b.captured
        return f"seat {cap.seat} takes {_cards(list(cap.taken))}"
    if which == "basra":
        scored = b.basra
        return f"[bold yellow]Basra![/] seat {scored.seat}{_SWEEPS.get(scored.kind, '')}"
    if which == "leftover_swept":
        left = b.leftover_swept
        who = f"seat {left.seat}" if left.HasField("seat") else "nobody"
        return f"end of deal: {who} takes the floor {_cards(list(left.cards))}"
    if which == "deal_scored":
        sheet = b.deal_scored
        parts = [f"side {line.side}: {line.points} ({line.cards} cards"
                 + (", most +30" if line.most_cards else "")
                 + (f", {line.basras} basra" if line.basras else "") + f") → {line.total}"
                 for line in sheet.lines]
        return f"deal {sheet.deal} scored: " + "; ".join(parts)
    if which == "tie_deal":
        tie = b.tie_deal
        return "tie at the target: another deal between seats " + ", ".join(map(str, tie.seats))
    if which == "ended":
        end = b.ended
        return "game over: " + verdict(list(end.winning_seats), seat)
    return None
