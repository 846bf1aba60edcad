"""La bataille des boutons on screen: each player's laid-out cards with their buttons, their piles
by colour and score, the centre, the reserve, the black aces out and deck B."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tapis.v1 import boutons_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis_clients.games import card_markup, verdict

_COLOURS: dict[int, tuple[str, str]] = {
    boutons_pb2.BOUTONS_COLOUR_RED: ("red", "red"),
    boutons_pb2.BOUTONS_COLOUR_BLUE: ("blue", "blue"),
    boutons_pb2.BOUTONS_COLOUR_GREEN: ("green", "green"),
    boutons_pb2.BOUTONS_COLOUR_YELLOW: ("yellow", "yellow"),
    boutons_pb2.BOUTONS_COLOUR_BLACK: ("black", "bright_black"),
    boutons_pb2.BOUTONS_COLOUR_WHITE: ("white", "white"),
    boutons_pb2.BOUTONS_COLOUR_ORANGE: ("orange", "dark_orange"),
    boutons_pb2.BOUTONS_COLOUR_PURPLE: ("purple", "magenta"),
    boutons_pb2.BOUTONS_COLOUR_RESERVE: ("reserve", "grey70"),
}
_HOTKEY_COLOURS = {boutons_pb2.BOUTONS_COLOUR_BLACK: "k", boutons_pb2.BOUTONS_COLOUR_RESERVE: "x"}
_PHASES = {boutons_pb2.BOUTONS_PHASE_BETTING: "betting",
           boutons_pb2.BOUTONS_PHASE_DRAWING: "drawing",
           boutons_pb2.BOUTONS_PHASE_OVER: "game over"}
_ROUND_END = {boutons_pb2.BOUTONS_ROUND_END_REASON_SECOND_BLACK_ACE: "the second black ace",
              boutons_pb2.BOUTONS_ROUND_END_REASON_NO_BUTTONS_LEFT: "no button left to take"}
_END = {boutons_pb2.BOUTONS_END_REASON_RESERVE_EMPTY: "the reserve is empty",
        boutons_pb2.BOUTONS_END_REASON_NO_BUTTON_TO_BET: "a player had no button left to bet"}


def colour_name(colour: int) -> str:
    return _COLOURS.get(colour, ("?", "white"))[0]


def _button(colour: int, count: int) -> str:
    name, style = _COLOURS.get(colour, ("?", "white"))
    return f"[{style}]●[/]{name}×{count}"


def piles(buttons: list[boutons_pb2.BoutonsButtonPile]) -> str:
    """``●red×2 ●blue×1`` (or a dash when there are none)."""
    if not buttons:
        return "—"
    return " ".join(_button(pile.colour, pile.count) for pile in buttons)


def render(view: pb.GameView) -> RenderableType:
    """The table as the viewer sees it (deck B's order is never known)."""
    b = view.boutons
    me = view.your_seat if view.HasField("your_seat") else None
    title = (f"La bataille des boutons · round {b.round}/{b.rounds} · "
             f"{_PHASES.get(b.phase, '?')}")
    players = Table(show_header=True, header_style="bold cyan", title=title)
    players.add_column("seat")
    players.add_column("laid-out cards (buttons bet)")
    players.add_column("buttons by colour")
    players.add_column("score", justify="right")
    for player in b.players:
        label = f"{player.seat}" + (" (you)" if player.seat == me else "")
        if player.seat == b.first_seat:
            label += " ★"
        if b.HasField("to_move") and b.to_move == player.seat:
            label += " ◀"
        cards = "\n".join(f"{card_markup(laid.card)}: {piles(list(laid.buttons))}"
                          for laid in player.cards)
        players.add_row(label, cards, piles(list(player.buttons)), str(player.score))
    aces = " ".join(card_markup(card) for card in b.black_aces) or "—"
    last = card_markup(b.last_flip) if b.HasField("last_flip") else "—"
    lines: list[RenderableType] = [
        players,
        Text.from_markup(f"centre: {_button(boutons_pb2.BOUTONS_COLOUR_RESERVE, b.centre)} · "
                         f"reserve left: {b.reserve} · black aces out: {aces} · "
                         f"deck B: {b.deck_left} cards · last flip: {last}"),
        Text.from_markup(f"★ first player: seat {b.first_seat} · bets this round: "
                         f"{b.bets_placed}"
                         + (" · [bold yellow]last round[/]" if b.last_round else "")),
    ]
    if b.phase == boutons_pb2.BOUTONS_PHASE_OVER:
        me = view.your_seat if view.HasField("your_seat") else None
        who = verdict(list(b.winners), me, [s.display_name for s in view.seats])
        lines.append(Text.from_markup(f"[bold green]{who}: {_END.get(b.end_reason, '')}[/]"))
    return Group(*lines)


def describe_action(action: pb.Action) -> str:
    b = action.boutons
    if b.WhichOneof("action") == "bet":
        return f"bet {colour_name(b.bet.colour)} on {card_markup(b.bet.card)}"
    return "flip the top card of deck B"


def hotkey(action: pb.Action) -> str | None:
    """``f`` flips; a bet is its colour's initial (``k`` black, ``x`` reserve) and the card's
    suit letter, e.g. ``rc`` for red on clubs."""
    if action.WhichOneof("action") != "boutons":
        return None
    b = action.boutons
    if b.WhichOneof("action") == "flip":
        return "f"
    if b.WhichOneof("action") == "bet":
        colour = _HOTKEY_COLOURS.get(b.bet.colour, colour_name(b.bet.colour)[:1])
        suit = {1: "c", 2: "d", 3: "h", 4: "s"}.get(b.bet.card.suit, "?")
        return colour + suit
    return None


def _who(seat: int, me: int | None) -> str:
    return f"seat {seat} (you)" if seat == me else f"seat {seat}"


def describe_event(event: pb.Event, seat: int | None) -> str | None:
    """One line for a person, or None."""
    b = event.boutons
    which = b.WhichOneof("event")
    if which == "reserve_to_centre":
        e = b.reserve_to_centre
        return (f"round {e.round}: {_who(e.first_seat, seat)} moves a reserve button to the "
                f"centre ({e.centre} there, {e.reserve_left} left in the reserve)")
    if which == "bet_placed":
        bet = b.bet_placed
        return (f"{_who(bet.seat, seat)} bets {_button(bet.colour, 1)} on "
                f"{card_markup(bet.card)}")
    if which == "betting_stopped":
        return (f"{_who(b.betting_stopped.seat, seat)} has no button to bet: betting stops, "
                "this is the last round")
    if which == "draw_started":
        return f"deck B is shuffled; {_who(b.draw_started.seat, seat)} flips first"
    if which == "card_flipped":
        flip = b.card_flipped
        return (f"{_who(flip.seat, seat)} flips {card_markup(flip.card)} "
                f"({flip.deck_left} left)")
    if which == "buttons_taken":
        taken = b.buttons_taken
        where = (f"from {card_markup(taken.card)}" if taken.HasField("card")
                 else "from the centre")
        return f"{_who(taken.seat, seat)} takes {piles(list(taken.buttons))} {where}"
    if which == "black_ace_set_aside":
        ace = b.black_ace_set_aside
        return f"{card_markup(ace.card)} set aside ({ace.black_aces_out} of 2)"
    if which == "round_ended":
        end = b.round_ended
        return f"round {end.round} ends: {_ROUND_END.get(end.reason, '?')}"
    if which == "ended":
        ended = b.ended
        scores = ", ".join(f"{_who(p.seat, seat)} {p.score} ({piles(list(p.buttons))})"
                           for p in ended.players)
        return (f"game over ({_END.get(ended.reason, '?')}): {scores}; left over, for no one: "
                f"{ended.left_on_cards} on cards, {ended.left_in_centre} in the centre")
    return None
