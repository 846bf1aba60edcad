"""Bataille Corse on screen: each player's deck and status, the face-up pile, the challenge in
progress, and after each slap a caption with the combination, its cards, who slapped and how
fast (the bots' play is in tapis_clients.strategies.corse)."""

from __future__ import annotations

import argparse
import random

from rich.console import Group, RenderableType
from rich.table import Table as Grid
from rich.text import Text

from tapis.v1 import bataille_corse_pb2 as corse_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis.v1.cards_pb2 import Card
from tapis_clients.cards import card_markup, cards_markup
from tapis_clients.game import ClientGame, Memory
from tapis_clients.i18n import N_, NP_, _, labelled, ngettext, then
from tapis_clients.options import bounded
from tapis_clients.people import Table, as_table
from tapis_clients.strategies import Strategy
from tapis_clients.strategies.corse import CorseFollower, slap_or_flip

COMBINATION_NAMES = {
    corse_pb2.BATAILLE_CORSE_COMBINATION_DOUBLE: N_("double"),
    corse_pb2.BATAILLE_CORSE_COMBINATION_SANDWICH: N_("sandwich"),
    corse_pb2.BATAILLE_CORSE_COMBINATION_BIG_MAC: N_("big mac"),
    corse_pb2.BATAILLE_CORSE_COMBINATION_SUITE: N_("suite"),
    corse_pb2.BATAILLE_CORSE_COMBINATION_TEN: N_("ten"),
    corse_pb2.BATAILLE_CORSE_COMBINATION_SEVEN: N_("seven"),
}
COMBINATION_CARDS = {
    corse_pb2.BATAILLE_CORSE_COMBINATION_DOUBLE: 2,
    corse_pb2.BATAILLE_CORSE_COMBINATION_SANDWICH: 3,
    corse_pb2.BATAILLE_CORSE_COMBINATION_BIG_MAC: 4,
    corse_pb2.BATAILLE_CORSE_COMBINATION_SUITE: 2,
    corse_pb2.BATAILLE_CORSE_COMBINATION_TEN: 2,
    corse_pb2.BATAILLE_CORSE_COMBINATION_SEVEN: 1,
}
"""How many of the top cards make each combination (the caption shows them)."""
_STATUS = {
    corse_pb2.BATAILLE_CORSE_SEAT_STATUS_IN_PLAY: N_("in play"),
    corse_pb2.BATAILLE_CORSE_SEAT_STATUS_ELIMINATED: N_("eliminated"),
    corse_pb2.BATAILLE_CORSE_SEAT_STATUS_OUT: N_("out for good"),
}
_END = {
    corse_pb2.BATAILLE_CORSE_END_REASON_LAST_IN_PLAY: N_("last player in play, holds every card"),
    corse_pb2.BATAILLE_CORSE_END_REASON_FLIP_CAP: N_("the flip cap was reached: most cards"),
}
SHOWN_PILE_CARDS = 8
COMBINATION = N_("combination")
COMBINATION_CHOICES = {
    corse_pb2.BatailleCorseCombination.Name(combination)
    .removeprefix("BATAILLE_CORSE_COMBINATION_").lower(): combination
    for combination in corse_pb2.BatailleCorseCombination.values()
    if combination != corse_pb2.BATAILLE_CORSE_COMBINATION_UNSPECIFIED}
"""``--no-combination``'s choices: every combination of the contract, by its lower-case name
(the engine takes any of them off, all six included: docs/rulings.md)."""
DEFAULT_FLIP_CAP = 10_000
MAX_FLIP_CAP = 1_000_000
"""The cards flipped a game ends after: the server takes 1 to ``MAX_FLIP_CAP`` (more or none is
INVALID_OPTIONS), ``DEFAULT_FLIP_CAP`` when the request says none (``flip_cap`` 0)."""


def combination_name(combination: corse_pb2.BatailleCorseCombination.ValueType) -> str:
    return _(COMBINATION_NAMES.get(combination, COMBINATION))


def board(view: pb.GameView, reader: Table | int | None = None) -> RenderableType:
    """The table: one row per player, the pile, the challenge, the last slap."""
    table = as_table(reader)
    corse = view.bataille_corse
    rows = Grid.grid(padding=(0, 2))
    for _column in range(4):
        rows.add_column()
    for seat in corse.seats:
        acting = corse.HasField("turn") and corse.turn == seat.seat
        name = table.name(seat.seat) + (" " + _("(you)") if seat.seat == table.me else "")
        status = _(_STATUS.get(seat.status, N_("in play")))
        if seat.status != corse_pb2.BATAILLE_CORSE_SEAT_STATUS_IN_PLAY:
            status = f"[yellow]{status}[/]"
        strikes = ngettext("{count} strike", "{count} strikes", seat.strikes).format(
            count=seat.strikes) if seat.strikes else ""
        timer = table.timers.get(seat.seat, "")
        rows.add_row(("[bold]▶ " if acting else "  ") + name + ("[/]" if acting else ""),
                     _("deck {count}").format(count=seat.deck_size), status,
                     strikes + (f" [bold reverse] {timer} [/]" if timer and acting else ""))
    shown = list(corse.pile_top)[-SHOWN_PILE_CARDS:]
    hidden = corse.pile_size - len(shown)
    pile = "  ".join(card_markup(card) for card in shown) or "—"
    if hidden:
        pile = "[dim]" + _("({count} under)").format(count=hidden) + "[/] " + pile
    lines: list[RenderableType] = [
        rows, Text(""),
        Text.from_markup(_("pile ({count}): {cards}").format(count=corse.pile_size, cards=pile)),
    ]
    if corse.HasField("challenger"):
        owes = corse.owes if corse.HasField("owes") else corse.turn
        tries = ngettext("{count} try left", "{count} tries left", corse.tries_left).format(
            count=corse.tries_left)
        lines.append(Text.from_markup(labelled("[bold yellow]" + _("challenge") + "[/]", _(
            "{challenger} against {owes}, {tries}").format(
            challenger=table.who(corse.challenger), owes=table.who(owes), tries=tries))))
    else:
        lines.append(Text(""))
    off = [name for combination, name in COMBINATION_NAMES.items()
           if combination not in corse.combinations]
    lines.append(Text.from_markup("[dim]" + _("flips {flips} of {cap}").format(
        flips=corse.flips, cap=corse.flip_cap)
        + ("  · " + _("off: {combinations}").format(
            combinations=", ".join(_(name) for name in off)) if off else "") + "[/]"))
    if corse.end_reason:
        winners = [corse.winner] if corse.HasField("winner") else []
        lines.append(Text.from_markup("[bold green]" + labelled(
            table.verdict(winners), _(_END[corse.end_reason])) + "[/]"))
    return Group(*lines)


def render(view: pb.GameView, reader: Table | int | None = None) -> RenderableType:
    """The board under the game's title (for a one-off print)."""
    return Group(Text.from_markup(f"[bold]{GAME.title}[/]"), board(view, reader))


def key_hint(view: pb.GameView, typed: str, reader: Table | int | None = None) -> str | None:
    """``f`` when another seat is due to flip: say whose turn it is."""
    table = as_table(reader)
    corse = view.bataille_corse
    me = view.your_seat if view.HasField("your_seat") else table.me
    if typed == "f" and me is not None and corse.HasField("turn") and corse.turn != me:
        return _("not your turn: {name} flips").format(name=table.name(corse.turn))
    return None


def describe_action(action: pb.Action, reader: Table | int | None = None) -> str:
    which = action.bataille_corse.WhichOneof("action")
    if which == "slap":
        return _("slap the pile")
    return _("flip your top card")


def hotkey(action: pb.Action) -> str | None:
    if action.WhichOneof("action") != "bataille_corse":
        return None
    which = action.bataille_corse.WhichOneof("action")
    return {"flip": "f", "slap": "s"}.get(which or "")


def is_slap(action: pb.Action) -> bool:
    return action.WhichOneof("action") == "bataille_corse" and \
        action.bataille_corse.WhichOneof("action") == "slap"


def _reason(won: corse_pb2.BatailleCorsePileWon) -> str:
    if won.reason == corse_pb2.BATAILLE_CORSE_PILE_REASON_CHALLENGE:
        return _("challenge")
    if won.reason == corse_pb2.BATAILLE_CORSE_PILE_REASON_LAST_IN_PLAY:
        return _("last in play")
    return combination_name(won.combination)


def describe_event(event: pb.Event, reader: Table | int | None = None) -> str | None:
    table = as_table(reader)
    corse = event.bataille_corse
    which = corse.WhichOneof("event")
    if which == "card_flipped":
        e = corse.card_flipped
        line = table.said(e.seat, N_("you flip {card}"), N_("{name} flips {card}"),
                          card=card_markup(e.card))
        if e.HasField("drawn_from"):
            line += " " + _("(drawn from {name}'s deck)").format(name=table.who(e.drawn_from))
        return line
    if which in ("challenge_started", "challenge_passed"):
        e1 = getattr(corse, which)
        tries = ngettext("{count} try", "{count} tries", e1.tries).format(count=e1.tries)
        return table.said(e1.challenger, N_("you challenge: {tries}"),
                          N_("{name} challenges: {tries}"), tries=tries)
    if which == "pile_won":
        won = corse.pile_won
        return "[bold]" + table.said_n(
            won.seat, NP_("you take the pile ({why}): {cards} card",
                          "you take the pile ({why}): {cards} cards"),
            NP_("{name} takes the pile ({why}): {cards} card",
                "{name} takes the pile ({why}): {cards} cards"),
            won.cards, why=_reason(won), cards=won.cards) + "[/]"
    if which == "false_slap":
        e3 = corse.false_slap
        if e3.penalty_cards:
            return table.said(e3.seat, N_("you slap falsely: {cards} under the pile"),
                              N_("{name} slaps falsely: {cards} under the pile"),
                              cards=ngettext("{count} card", "{count} cards",
                                             e3.penalty_cards).format(count=e3.penalty_cards))
        if not e3.strikes:  # no card left to pay with, and not eliminated: nothing to pay
            return table.said(e3.seat, N_("you slap falsely, with no card to pay"),
                              N_("{name} slaps falsely, with no card to pay"))
        return table.said(e3.seat, N_("you slap falsely: strike {strikes} of 3"),
                          N_("{name} slaps falsely: strike {strikes} of 3"), strikes=e3.strikes)
    if which == "eliminated":
        return "[yellow]" + table.said(corse.eliminated.seat, N_("you are eliminated"),
                                       N_("{name} is eliminated")) + "[/]"
    if which == "reentered":
        return "[green]" + table.said(corse.reentered.seat, N_("you are back in play"),
                                      N_("{name} is back in play")) + "[/]"
    if which == "out_for_good":
        return "[red]" + table.said(corse.out_for_good.seat, N_("you are out for good"),
                                    N_("{name} is out for good")) + "[/]"
    if which == "dealt":
        sizes = "-".join(str(size) for size in corse.dealt.deck_sizes)
        return then(_("cards dealt ({sizes})").format(sizes=sizes), table.said(
            0, N_("you flip first"), N_("{name} flips first")))
    if which == "ended":
        ended = corse.ended
        winners = [ended.winner] if ended.HasField("winner") else []
        return labelled(table.verdict(winners), _(_END.get(ended.reason, N_("game over"))))
    return None


def _seconds(event: pb.Event) -> float:
    return event.time.seconds + event.time.nanos / 1e9


class CorseMemory(Memory):
    """The face-up pile and when its top card came, so that a slap's caption can show the
    combination's cards and how fast the slapper was."""

    def __init__(self) -> None:
        super().__init__()
        self.pile: list[Card] = []
        self.top_at: float | None = None
        self.last = ""
        self.last_taker: int | None = None

    def see(self, event: pb.Event, table: Table) -> None:
        if event.WhichOneof("body") != "bataille_corse":
            return
        corse = event.bataille_corse
        which = corse.WhichOneof("event")
        if which == "card_flipped":
            self.pile.append(corse.card_flipped.card)
            self.top_at = _seconds(event)
        elif which == "pile_won":
            won = corse.pile_won
            self.last_taker = won.seat
            if won.reason == corse_pb2.BATAILLE_CORSE_PILE_REASON_COMBINATION:
                cards = self.pile[-COMBINATION_CARDS.get(won.combination, 2):]
                fast = "" if self.top_at is None else " " + _("in {seconds} s").format(
                    seconds=f"{max(0.0, _seconds(event) - self.top_at):.2f}")
                self.last = "[bold magenta]" + _("{combination}!").format(
                    combination=combination_name(won.combination).capitalize()) + "[/] " + \
                    cards_markup(cards) + " — " + table.said(
                        won.seat, N_("you slapped first"), N_("{name} slapped first")) + fast
            elif won.reason == corse_pb2.BATAILLE_CORSE_PILE_REASON_CHALLENGE:
                self.last = table.said(won.seat, N_("you win the challenge"),
                                       N_("{name} wins the challenge"))
            self.pile = []
            self.top_at = None
        elif which == "false_slap":
            self.last = "[yellow]" + table.said(
                corse.false_slap.seat, N_("you slapped with no combination"),
                N_("{name} slapped with no combination")) + "[/]"
        elif which == "dealt":
            self.pile, self.top_at, self.last = [], None, ""
        elif which == "ended":
            self.end_reasons[event.game_number] = _(_END.get(corse.ended.reason,
                                                             N_("game over")))

    def caption(self, table: Table) -> str:
        return self.last

    def refusal(self, reason: str, table: Table) -> str | None:
        """Why a slap came too late, as far as the events tell."""
        if reason != "SLAP_TOO_LATE":
            return None
        if self.last_taker is not None and self.last_taker != table.me:
            return _("too late: {name} slapped first").format(name=table.name(self.last_taker))
        return _("too late: another card was flipped")


def strategy(rng: random.Random) -> Strategy:
    return slap_or_flip


def add_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        parser.add_argument(
            "--no-combination", action="append", choices=list(COMBINATION_CHOICES),
            default=None, metavar=_("NAME"), help=_(
                "Bataille Corse: a slap combination switched off ({names}; repeatable)").format(
                names=", ".join(COMBINATION_CHOICES))),
        parser.add_argument(
            "--flip-cap", type=bounded(1, MAX_FLIP_CAP), default=0, metavar="N", help=_(
                "Bataille Corse: the game ends after this many cards flipped, most cards "
                "winning (1 to {most}; default {default})").format(
                most=MAX_FLIP_CAP, default=DEFAULT_FLIP_CAP))]


def set_options(request: pb.CreateGameRequest, args: argparse.Namespace) -> None:
    """``--no-combination`` and ``--flip-cap`` into the request (neither given: the server's
    six and its cap); the cap's bounds are argparse's."""
    if args.no_combination:
        request.bataille_corse.disabled_combinations.extend(
            COMBINATION_CHOICES[name] for name in dict.fromkeys(args.no_combination))
    if args.flip_cap:
        request.bataille_corse.flip_cap = args.flip_cap


def _describe(action: pb.Action, view: pb.GameView, table: Table) -> str:
    return describe_action(action, table)


GAME = ClientGame(
    kind=pb.GAME_KIND_BATAILLE_CORSE, field="bataille_corse",
    commands=("bataille-corse", "corse"), title="Bataille Corse", min_size=(72, 22),
    board=board, describe_action=_describe, describe_event=describe_event,
    hotkey=hotkey, reserved_keys=frozenset({"f", "s"}), strategy=strategy, memory=CorseMemory,
    realtime=is_slap, seats=(2, 6),
    key_hint=key_hint, follower=CorseFollower, reflexes=True, add_options=add_options,
    set_options=set_options)
