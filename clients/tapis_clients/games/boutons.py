"""La bataille des boutons on screen: each player's laid-out cards with the buttons bet on them,
their buttons by colour and score; the centre, the reserve, the black aces out and deck B.
Each colour has its own hue and symbol (for colour-blind players), and each bet a key that
keeps its meaning from turn to turn: the colour's letter then the card's suit (``rc``: red on
clubs), both in the reader's language (``rt``: rouge sur trèfle)."""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterable

from rich.console import Group, RenderableType
from rich.table import Table as Grid
from rich.text import Text

from tapis.v1 import boutons_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis.v1.cards_pb2 import Card
from tapis_clients import i18n
from tapis_clients.cards import card_markup
from tapis_clients.game import ClientGame, Memory
from tapis_clients.i18n import N_, NP_, _, labelled, then
from tapis_clients.options import bounded
from tapis_clients.people import Table, as_table
from tapis_clients.strategies import Strategy, random_legal

MAX_ROUNDS = 100
"""The most rounds a table plays (the server refuses more, INVALID_OPTIONS; 6 by default)."""

_COLOURS: dict[int, tuple[str, str, str, str]] = {
    # colour: (name, key, symbol, style)
    boutons_pb2.BOUTONS_COLOUR_RED: (N_("red"), "r", "●", "bold red"),
    boutons_pb2.BOUTONS_COLOUR_BLUE: (N_("blue"), "b", "■", "bold dodger_blue1"),
    boutons_pb2.BOUTONS_COLOUR_GREEN: (N_("green"), "g", "▲", "bold green"),
    boutons_pb2.BOUTONS_COLOUR_YELLOW: (N_("yellow"), "y", "◆", "bold yellow"),
    boutons_pb2.BOUTONS_COLOUR_BLACK: (N_("black"), "k", "▼", "bold black on grey82"),
    boutons_pb2.BOUTONS_COLOUR_WHITE: (N_("white"), "w", "○", "bold white"),
    boutons_pb2.BOUTONS_COLOUR_ORANGE: (N_("orange"), "o", "◐", "bold dark_orange"),
    boutons_pb2.BOUTONS_COLOUR_PURPLE: (N_("purple"), "p", "✚", "bold magenta"),
    boutons_pb2.BOUTONS_COLOUR_RESERVE: (N_("reserve"), "x", "◎", "bold cyan"),
}
SUIT_KEYS = {1: "c", 2: "d", 3: "h", 4: "s"}
"""The suits' keys in English: clubs, diamonds, hearts, spades."""
_KEYS_IN: dict[str, tuple[dict[int, str], dict[int, str]]] = {
    # language: (colour -> key, suit -> key), where it differs from English. In French:
    # rouge, bleu, vert, jaune, noir, bLanc, orange, vIolet; trèfle, Karreau, cœur, pique
    # (n, l, i: b and v are taken; q quits, f flips).
    "fr": ({boutons_pb2.BOUTONS_COLOUR_RED: "r", boutons_pb2.BOUTONS_COLOUR_BLUE: "b",
            boutons_pb2.BOUTONS_COLOUR_GREEN: "v", boutons_pb2.BOUTONS_COLOUR_YELLOW: "j",
            boutons_pb2.BOUTONS_COLOUR_BLACK: "n", boutons_pb2.BOUTONS_COLOUR_WHITE: "l",
            boutons_pb2.BOUTONS_COLOUR_ORANGE: "o", boutons_pb2.BOUTONS_COLOUR_PURPLE: "i",
            boutons_pb2.BOUTONS_COLOUR_RESERVE: "x"},
           {1: "t", 2: "k", 3: "c", 4: "p"}),
}


def colour_key(colour: int) -> str:
    """The key of a colour in the reader's language (``k`` black, ``n`` noir)."""
    keys = _KEYS_IN.get(i18n.language())
    if keys and colour in keys[0]:
        return keys[0][colour]
    return _COLOURS.get(colour, ("?", "?", "?", ""))[1]


def suit_key(suit: int) -> str:
    """The key of a suit in the reader's language (``h`` hearts, ``c`` cœur)."""
    keys = _KEYS_IN.get(i18n.language())
    return (keys[1] if keys else SUIT_KEYS).get(suit, "?")
_PHASES = {boutons_pb2.BOUTONS_PHASE_BETTING: N_("betting"),
           boutons_pb2.BOUTONS_PHASE_DRAWING: N_("drawing"),
           boutons_pb2.BOUTONS_PHASE_OVER: N_("game over")}
_ROUND_END = {boutons_pb2.BOUTONS_ROUND_END_REASON_SECOND_BLACK_ACE: N_("the second black ace"),
              boutons_pb2.BOUTONS_ROUND_END_REASON_NO_BUTTONS_LEFT: N_("no button left to take")}
_END = {boutons_pb2.BOUTONS_END_REASON_RESERVE_EMPTY: N_("the reserve is empty"),
        boutons_pb2.BOUTONS_END_REASON_NO_BUTTON_TO_BET: N_("a player had no button left to bet")}
RAN_OUT = (N_("you had no button left to bet"), N_("{name} had no button left to bet"))
"""Why the game ended when a player could not bet, naming them (from the betting_stopped
event; the view does not say who)."""


def colour_name(colour: int) -> str:
    return _(_COLOURS.get(colour, (N_("?"), "?", "?", "white"))[0])


def button(colour: int, count: int | None = None) -> str:
    """A colour's symbol in its hue (and a count): ``●2``."""
    _name, _key, symbol, style = _COLOURS.get(colour, ("?", "?", "?", "white"))
    return f"[{style}]{symbol}[/]" + ("" if count is None else str(count))


def piles(buttons: Iterable[boutons_pb2.BoutonsButtonPile]) -> str:
    """``●2 ■1`` (a dash when there are none)."""
    shown = " ".join(button(pile.colour, pile.count) for pile in buttons)
    return shown or "—"


def legend(colours: Iterable[int]) -> str:
    """``●r red ■b blue``: each colour's symbol, key and name."""
    return "  ".join(f"{button(colour)}{colour_key(colour)} {colour_name(colour)}"
                     for colour in colours if colour in _COLOURS)


def board(view: pb.GameView, reader: Table | int | None = None) -> RenderableType:
    """The table as the viewer sees it (deck B's order is never known)."""
    table = as_table(reader)
    b = view.boutons
    players = Grid.grid(padding=(0, 2))  # two spaces: a name never runs into a card
    for _column in range(4):
        players.add_column()
    for player in b.players:
        acting = b.HasField("to_move") and b.to_move == player.seat
        timer = table.timers.get(player.seat, "")
        name = ("[bold]▶ " if acting else "  ") + table.name(player.seat) + (
            " " + _("(you)") if player.seat == table.me else "") + (
            " ★" if player.seat == b.first_seat else "") + ("[/]" if acting else "") + (
            f" [bold reverse] {timer} [/]" if timer and acting else "")
        cards = " ".join(f"{card_markup(laid.card)}{piles(laid.buttons) if laid.buttons else ''}"
                         for laid in player.cards)
        players.add_row(name, cards, piles(player.buttons),
                        _("score {score}").format(score=player.score))
    aces = " ".join(card_markup(card) for card in b.black_aces) or "—"
    last = card_markup(b.last_flip) if b.HasField("last_flip") else "—"
    lines: list[RenderableType] = [
        Text.from_markup("[bold cyan]" + _("round {round} of {rounds} · {phase}").format(
            round=b.round, rounds=b.rounds, phase=_(_PHASES.get(b.phase, N_("?"))))
            + ("  [bold yellow]" + _("last round") + "[/]" if b.last_round else "") + "[/]"
            + "  [dim]" + _("★ bets first this round") + "[/]"),
        players,
        Text.from_markup(_("centre {centre} · reserve {reserve} · black aces out {aces} · "
                           "deck B {deck} · last flip {last}").format(
            centre=button(boutons_pb2.BOUTONS_COLOUR_RESERVE, b.centre),
            reserve=b.reserve, aces=aces, deck=b.deck_left, last=last)),
    ]
    if b.phase == boutons_pb2.BOUTONS_PHASE_OVER:
        lines.append(Text.from_markup("[bold green]" + labelled(
            table.verdict(list(b.winners)), _(_END.get(b.end_reason, N_("game over")))) + "[/]"))
    return Group(*lines)


def render(view: pb.GameView, reader: Table | int | None = None) -> RenderableType:
    """The board under the game's title (for a one-off print)."""
    return Group(Text.from_markup(f"[bold]{GAME.title}[/]"), board(view, reader))


def menu(view: pb.GameView, actions: list[pb.Action], table: Table) -> RenderableType | None:
    """The bets as a grid, one row per laid-out card and one column per colour held, each cell
    the bet's key; None when the moves are not bets (the plain menu then)."""
    bets = [a for a in actions if a.WhichOneof("action") == "boutons"
            and a.boutons.WhichOneof("action") == "bet"]
    if not bets:
        return None
    colours = sorted({a.boutons.bet.colour for a in bets})
    cards: list[tuple[int, int]] = []
    for a in bets:
        card = (a.boutons.bet.card.rank, a.boutons.bet.card.suit)
        if card not in cards:
            cards.append(card)
    keys: dict[tuple[int, int, int], str | None] = {
        (a.boutons.bet.colour, a.boutons.bet.card.rank, a.boutons.bet.card.suit): hotkey(a)
        for a in bets}
    grid = Grid(box=None, padding=(0, 1), show_edge=False, header_style="bold")
    grid.add_column(_("bet"), no_wrap=True)
    for colour in colours:
        grid.add_column(button(colour) + colour_name(colour), no_wrap=True, justify="center")
    for rank, suit in cards:
        shown = card_markup(Card(rank=rank, suit=suit))  # type: ignore[arg-type]
        grid.add_row(shown, *(f"[bold]{keys.get((c, rank, suit)) or '·'}[/]" for c in colours))
    return grid


def describe_action(action: pb.Action, reader: Table | int | None = None) -> str:
    b = action.boutons
    if b.WhichOneof("action") == "bet":
        return _("bet {button} {colour} on {card}").format(
            button=button(b.bet.colour), colour=colour_name(b.bet.colour),
            card=card_markup(b.bet.card))
    return _("flip the top card of deck B")


def hotkey(action: pb.Action) -> str | None:
    """``f`` flips; a bet is its colour's key (``k`` black, ``x`` reserve) and the card's suit
    letter, e.g. ``rc`` for red on clubs (in French ``rt``, rouge sur trèfle)."""
    if action.WhichOneof("action") != "boutons":
        return None
    b = action.boutons
    if b.WhichOneof("action") == "flip":
        return "f"
    if b.WhichOneof("action") == "bet":
        return colour_key(b.bet.colour) + suit_key(b.bet.card.suit)
    return None


def describe_event(event: pb.Event, reader: Table | int | None = None) -> str | None:
    """One line for a person, or None."""
    table = as_table(reader)
    b = event.boutons
    which = b.WhichOneof("event")
    if which == "reserve_to_centre":
        e = b.reserve_to_centre
        return labelled(_("round {round}").format(round=e.round), table.said_n(
            e.first_seat, NP_("you move a reserve button to the centre ({left} left)",
                              "you move a reserve button to the centre ({left} left)"),
            NP_("{name} moves a reserve button to the centre ({left} left)",
                "{name} moves a reserve button to the centre ({left} left)"),
            e.reserve_left, left=e.reserve_left))
    if which == "bet_placed":
        bet = b.bet_placed
        return table.said(bet.seat, N_("you bet {button} on {card}"),
                          N_("{name} bets {button} on {card}"),
                          button=button(bet.colour), card=card_markup(bet.card))
    if which == "betting_stopped":
        return table.said(b.betting_stopped.seat,
                          N_("you have no button to bet: betting stops, last round"),
                          N_("{name} has no button to bet: betting stops, last round"))
    if which == "draw_started":
        return then(_("deck B is shuffled"), table.said(
            b.draw_started.seat, N_("you flip first"), N_("{name} flips first")))
    if which == "card_flipped":
        flip = b.card_flipped
        return table.said_n(flip.seat, NP_("you flip {card} ({left} left)",
                                           "you flip {card} ({left} left)"),
                            NP_("{name} flips {card} ({left} left)",
                                "{name} flips {card} ({left} left)"),
                            flip.deck_left, card=card_markup(flip.card), left=flip.deck_left)
    if which == "buttons_taken":
        taken = b.buttons_taken
        where = (_("from {card}").format(card=card_markup(taken.card)) if taken.HasField("card")
                 else _("from the centre"))
        return table.said(taken.seat, N_("you take {buttons} {where}"),
                          N_("{name} takes {buttons} {where}"),
                          buttons=piles(taken.buttons), where=where)
    if which == "black_ace_set_aside":
        ace = b.black_ace_set_aside
        return _("{card} set aside ({count} of 2)").format(card=card_markup(ace.card),
                                                          count=ace.black_aces_out)
    if which == "round_ended":
        end = b.round_ended
        return _("round {round} ends: {why}").format(
            round=end.round, why=_(_ROUND_END.get(end.reason, N_("?"))))
    if which == "ended":
        ended = b.ended
        scores = ", ".join(f"{table.who(p.seat)} {p.score}" for p in ended.players)
        return _("game over ({why}): {scores}").format(
            why=_(_END.get(ended.reason, N_("?"))), scores=scores)
    return None


class BoutonsMemory(Memory):
    def __init__(self) -> None:
        super().__init__()
        self.out_of_buttons: int | None = None
        """The seat that had no button to bet (betting stopped), this game."""

    def see(self, event: pb.Event, table: Table) -> None:
        if event.WhichOneof("body") != "boutons":
            return
        which = event.boutons.WhichOneof("event")
        if which == "reserve_to_centre" and event.boutons.reserve_to_centre.round == 1:
            self.out_of_buttons = None
        elif which == "betting_stopped":
            self.out_of_buttons = event.boutons.betting_stopped.seat
        elif which == "ended":
            self.end_reasons[event.game_number] = self.end_reason(event.boutons.ended.reason,
                                                                  table)

    def end_reason(self, reason: boutons_pb2.BoutonsEndReason.ValueType, table: Table) -> str:
        """Why the game ended, naming who ran out of buttons when one did."""
        if reason == boutons_pb2.BOUTONS_END_REASON_NO_BUTTON_TO_BET and \
                self.out_of_buttons is not None:
            return table.said(self.out_of_buttons, *RAN_OUT)
        return _(_END.get(reason, N_("game over")))

    def caption(self, table: Table) -> str:
        """Who ran out of buttons (the board's own end line says only that one did)."""
        if self.out_of_buttons is None:
            return ""
        return table.said(self.out_of_buttons,
                          N_("you have no button to bet: betting stops, last round"),
                          N_("{name} has no button to bet: betting stops, last round"))


def strategy(rng: random.Random) -> Strategy:
    return random_legal(rng)


def add_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [parser.add_argument(
        "--rounds", type=bounded(1, MAX_ROUNDS), default=0, metavar="N", help=_(
            "La bataille des boutons: rounds to play (1 to {most}; default 6)").format(
            most=MAX_ROUNDS))]


def set_options(request: pb.CreateGameRequest, args: argparse.Namespace) -> None:
    """``--rounds`` into the request (not given: the server's 6); its bounds are argparse's."""
    if args.rounds:
        request.boutons.rounds = args.rounds


def _describe(action: pb.Action, view: pb.GameView, table: Table) -> str:
    return describe_action(action, table)


GAME = ClientGame(
    kind=pb.GAME_KIND_BOUTONS, field="boutons", commands=("boutons",),
    title="La bataille des boutons", min_size=(80, 24), board=board,
    describe_action=_describe, describe_event=describe_event, hotkey=hotkey,
    reserved_keys=frozenset({"f"}),
    strategy=strategy, seats=(2, 4), memory=BoutonsMemory, menu=menu, add_options=add_options,
    set_options=set_options)
