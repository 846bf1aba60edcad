"""Basra on screen: the sides (a player, or a team of two at four), the floor, your hand and the
stock; moves that make a basra are flagged, and each deal ends on its score sheet."""

from __future__ import annotations

import argparse
import random

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table as Grid
from rich.text import Text

from tapis.v1 import basra_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis_clients.cards import card_markup, card_text, cards_markup, cards_text
from tapis_clients.game import ClientGame, Memory
from tapis_clients.i18n import N_, _, labelled, ngettext, then
from tapis_clients.people import Table, as_table
from tapis_clients.strategies import Strategy, random_legal

_VARIANTS = {basra_pb2.BASRA_VARIANT_UNSPECIFIED: N_("Egyptian"),
             basra_pb2.BASRA_VARIANT_EGYPTIAN: N_("Egyptian"),
             basra_pb2.BASRA_VARIANT_LEBANESE: N_("Lebanese"),
             basra_pb2.BASRA_VARIANT_IRAQI: N_("Iraqi")}
JACK = 11
VARIANT_NAMES = {basra_pb2.BasraVariant.Name(v).removeprefix("BASRA_VARIANT_").lower(): v
                 for v in basra_pb2.BasraVariant.values()
                 if v != basra_pb2.BASRA_VARIANT_UNSPECIFIED}
"""``--variant``'s choices: every variant of the contract, by its lower-case name."""
NO_TWO_CARD_JACK = (basra_pb2.BASRA_VARIANT_LEBANESE,)
"""The variants the two-card jack basra cannot go with (docs/rulings.md: INVALID_OPTIONS)."""
TARGETS = (101, 151)
"""The points to win the rules name (the first is the default)."""


def side_name(seats: list[int], table: Table) -> str:
    """A side as people say it: a player's name, or a team's two names."""
    names = " & ".join(table.name(seat) + (" " + _("(you)") if seat == table.me else "")
                       for seat in seats)
    return _("team {names}").format(names=names) if len(seats) > 1 else names


def team_letters(view: pb.GameView) -> dict[int, str]:
    """Seat -> its team's letter (A, B) when partners play together, else nothing."""
    b = view.basra
    if not any(len(side.seats) > 1 for side in b.sides):
        return {}
    return {seat: "AB"[i] if i < 2 else str(i + 1)
            for i, side in enumerate(b.sides) for seat in side.seats}


def _sides(view: pb.GameView) -> list[list[int]]:
    if view.basra.sides:
        return [list(side.seats) for side in view.basra.sides]
    return [[seat.seat] for seat in view.seats]


class SeatCell:
    """A seat's cell in the players' grid: its marks (▶, "(you)", ⓓ, the countdown) whole
    around its name, which is cut short (…) to what the column leaves: a long display name
    never pushes the numbers off the screen."""

    def __init__(self, before: Text, name: Text, after: Text) -> None:
        self.before = before
        self.name = name
        self.after = after

    def _marks_width(self) -> int:
        return self.before.cell_len + self.after.cell_len

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(self._marks_width() + 1, self._marks_width() + self.name.cell_len)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        name = self.name.copy()
        name.truncate(max(1, options.max_width - self._marks_width()), overflow="ellipsis")
        yield Text.assemble(self.before, name, self.after, no_wrap=True, overflow="ellipsis")


def _seat_cell(view: pb.GameView, seat: int, table: Table) -> SeatCell:
    """``▶ name (you) ⓓ 0:42``, bold for the seat to play; the name as text, never markup."""
    b = view.basra
    acting = b.HasField("to_move") and b.to_move == seat
    style = "bold" if acting else ""
    after = Text((" " + _("(you)") if seat == table.me else "")
                 + (" ⓓ" if seat == b.dealer else ""), style=style)
    timer = table.timers.get(seat, "")
    if timer and acting:
        after.append_text(Text.from_markup(f" [bold reverse] {timer} [/]"))
    return SeatCell(Text("▶ " if acting else "  ", style=style), Text(table.name(seat), style),
                    after)


def board(view: pb.GameView, reader: Table | int | None = None) -> RenderableType:
    """The table as the viewer sees it."""
    table = as_table(reader)
    b = view.basra
    variant = _(_VARIANTS.get(b.variant, N_("Egyptian")))
    teams = team_letters(view)
    side_of = {seat: i for i, side in enumerate(b.sides) for seat in side.seats}
    players = Grid(box=None, padding=(0, 1), show_edge=False, header_style="bold cyan")
    # the numbers' columns never wrap: the names' column is the one that gives (SeatCell)
    players.add_column(_("deal {deal} · {variant} · to {target}").format(
        deal=b.deal, variant=variant, target=b.target))
    players.add_column(_("in hand"), justify="right", no_wrap=True)
    if teams:
        players.add_column(_("team"), justify="center", no_wrap=True)
    for header in (_("cards"), _("basras"), _("score")):
        players.add_column(header, justify="right", no_wrap=True)
    shown_sides: set[int] = set()
    for seat, size in enumerate(b.hand_sizes):
        if seat not in b.playing_seats:
            continue
        index = side_of.get(seat)
        numbers = ["", "", ""]
        if index is not None and index not in shown_sides:  # a team's once, on its first
            shown_sides.add(index)
            side = b.sides[index]
            numbers = [str(side.captured_cards), str(side.basras), f"[bold]{side.score}[/]"]
        players.add_row(_seat_cell(view, seat, table), str(size),
                        *([teams.get(seat, "")] if teams else []), *numbers)
    lines: list[RenderableType] = [
        players,
        Text.from_markup(_("floor: {cards}").format(cards=cards_markup(b.floor))
                         + "  [dim]" + _("stock {count}").format(count=b.stock_size)
                         + (" · " + _("jack on two: basra") if b.two_card_jack_basra else "")
                         + " · " + _("ⓓ deals") + " · " + _("▶ to play") + "[/]"),
    ]
    if table.me is not None:
        lines.append(Text.from_markup(_("your hand: {cards}").format(cards=cards_markup(b.hand))))
    if b.over:
        names = ", ".join(side_name(list(b.sides[s].seats), table) for s in b.winning_sides)
        lines.append(Text.from_markup("[bold green]" + _("{names}: won").format(names=names)
                                      + "[/]"))
    return Group(*lines)


def render(view: pb.GameView, reader: Table | int | None = None) -> RenderableType:
    """The board under the game's title (for a one-off print)."""
    return Group(Text.from_markup(f"[bold]{GAME.title}[/]"), board(view, reader))


def makes_basra(action: pb.Action, view: pb.GameView) -> bool:
    """Whether this move scores a basra by the variant's rules, judged on the floor shown."""
    play = action.basra.play_card
    floor = list(view.basra.floor)
    if not floor or not play.HasField("capture"):
        return False
    taken = len(play.capture.cards)
    if taken != len(floor):
        return False
    if view.basra.variant == basra_pb2.BASRA_VARIANT_LEBANESE:
        return len(floor) == 1 and floor[0].rank == play.card.rank
    if play.card.rank == JACK:
        return len(floor) == 1 or (view.basra.two_card_jack_basra and len(floor) == 2)
    return True


def describe_action(action: pb.Action, reader: Table | int | None = None,
                    view: pb.GameView | None = None) -> str:
    """``play 7♦ taking 3♣+4♥``; ``play K♠`` when it takes nothing; a basra flagged."""
    play = action.basra.play_card
    if play.HasField("capture") and play.capture.cards:
        text = _("play {card} taking {cards}").format(card=card_markup(play.card),
                                                     cards=cards_text(play.capture.cards))
    elif play.HasField("capture"):
        text = _("play {card}").format(card=card_markup(play.card))
    else:
        text = _("play {card} (best capture)").format(card=card_markup(play.card))
    if view is not None and makes_basra(action, view):
        text += " [bold black on yellow] " + _("Basra!") + " [/]"
    return text


def hotkey(action: pb.Action) -> str | None:
    """No single-key shortcut: a card may have several capture options."""
    return None


def describe_event(event: pb.Event, reader: Table | int | None = None) -> str | None:
    """One line for a person, or None."""
    table = as_table(reader)
    b = event.basra
    which = b.WhichOneof("event")
    if which == "hands_dealt":
        dealt = b.hands_dealt
        return labelled(_("deal {deal}, hand {round}").format(deal=dealt.deal,
                                                              round=dealt.round),
                        table.said(dealt.dealer, N_("you deal"), N_("{name} deals")))
    if which == "floor_laid":
        laid = b.floor_laid
        line = _("floor: {cards}").format(cards=cards_markup(laid.floor))
        if laid.buried:
            line += " " + ngettext("({cards} buried)", "({cards} buried)", len(laid.buried)).format(
                cards=cards_text(laid.buried))
        return line
    if which == "card_played":
        played = b.card_played
        return table.said(played.seat, N_("you play {card}"), N_("{name} plays {card}"),
                          card=card_markup(played.card))
    if which == "captured":
        cap = b.captured
        return table.said(cap.seat, N_("you take {cards}"), N_("{name} takes {cards}"),
                          cards=cards_markup(cap.taken))
    if which == "basra":
        return "[bold yellow]" + _("Basra!") + "[/] " + table.who(b.basra.seat)
    if which == "leftover_swept":
        left = b.leftover_swept
        if not left.HasField("seat"):
            return _("end of deal: the floor stays with nobody")
        return table.said(left.seat, N_("end of deal: you take the floor {cards}"),
                          N_("end of deal: {name} takes the floor {cards}"),
                          cards=cards_markup(left.cards))
    if which == "deal_scored":
        sheet = b.deal_scored
        parts = [f"{side_name(list(line.seats), table)} +{line.points} → {line.total}"
                 for line in sheet.lines]
        sides = parts[0] if parts else ""
        for part in parts[1:]:
            sides = then(sides, part)
        return _("deal {deal} scored: {sides}").format(deal=sheet.deal, sides=sides)
    if which == "tie_deal":
        return _("a tie at the target: another deal between {names}").format(
            names=table.listed(list(b.tie_deal.seats)))
    if which == "ended":
        return _("game over: {verdict}").format(
            verdict=table.verdict(list(b.ended.winning_seats)))
    return None


def score_sheet(sheet: basra_pb2.BasraDealScored, table: Table) -> RenderableType:
    """A deal's score, side by side: majority, 10♦, 2♣, aces, jacks, basras."""
    grid = Grid(title=_("deal {deal}: the score").format(deal=sheet.deal), box=None,
                padding=(0, 1), header_style="bold cyan")
    grid.add_column("", max_width=24)
    for header in (_("cards"), _("most"), "10♦", "2♣", _("aces"), _("jacks"), _("basras"),
                   _("deal"), _("total")):
        grid.add_column(header, justify="right")
    for line in sheet.lines:
        grid.add_row(" & ".join(table.who(seat) for seat in line.seats), str(line.cards),
                     str(line.most_cards), str(line.ten_of_diamonds), str(line.two_of_clubs),
                     str(line.aces), str(line.jacks), str(line.basra_points),
                     f"[bold]{line.points}[/]", f"[bold]{line.total}[/]")
    made = [ngettext("{names}: {count} basra", "{names}: {count} basras", line.basras).format(
        names=" & ".join(table.who(seat) for seat in line.seats), count=line.basras)
        for line in sheet.lines if line.basras]
    legend = _("cards taken, then the points each earns: most cards, 10♦, 2♣, aces, jacks, "
               "basras")
    return Group(grid, Text.from_markup("[dim]" + legend + "[/]"),
                 *(Text(text) for text in made))


class BasraMemory(Memory):
    def see(self, event: pb.Event, table: Table) -> None:
        if event.WhichOneof("body") != "basra":
            return
        which = event.basra.WhichOneof("event")
        if which == "deal_scored":
            self.paused = score_sheet(event.basra.deal_scored, table)
        elif which == "ended":
            scores = " – ".join(str(score) for score in event.basra.ended.scores)
            self.end_reasons[event.game_number] = _("final score {scores}").format(
                scores=scores)


def strategy(rng: random.Random) -> Strategy:
    return random_legal(rng)


def set_points(request: pb.CreateGameRequest, points: int) -> None:
    request.basra.target = points


def add_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        parser.add_argument("--variant", choices=list(VARIANT_NAMES), default=None, help=_(
            "Basra's rules (default: egyptian)")),
        parser.add_argument("--two-card-jack", action="store_true", help=_(
            "Basra: a jack taking two cards makes a basra too (not with lebanese)"))]


def set_options(request: pb.CreateGameRequest, args: argparse.Namespace) -> None:
    """``--variant`` and ``--two-card-jack`` into the request (``--points``, the target, is
    ``set_points``'s); ValueError for what the server would refuse (INVALID_OPTIONS)."""
    variant = VARIANT_NAMES[args.variant] if args.variant else basra_pb2.BASRA_VARIANT_UNSPECIFIED
    if args.two_card_jack and variant in NO_TWO_CARD_JACK:
        raise ValueError(_("--two-card-jack cannot go with --variant {variant}").format(
            variant=args.variant))
    if args.points and args.points not in TARGETS:
        raise ValueError(_("Basra is played to {first} or {second} points").format(
            first=TARGETS[0], second=TARGETS[1]))
    request.basra.variant = variant
    request.basra.two_card_jack_basra = args.two_card_jack


def _describe(action: pb.Action, view: pb.GameView, table: Table) -> str:
    return describe_action(action, table, view)


GAME = ClientGame(
    kind=pb.GAME_KIND_BASRA, field="basra", commands=("basra",), title="Basra",
    min_size=(78, 24), board=board, describe_action=_describe,
    describe_event=describe_event, hotkey=hotkey, strategy=strategy, seats=(2, 4),
    memory=BasraMemory, set_points=set_points, add_options=add_options, set_options=set_options,
    sides=_sides)

__all__ = ["GAME", "card_text", "makes_basra"]
