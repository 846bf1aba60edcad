"""What the screens say about the parts of a table common to every game: seats claimed (or
given by the table's backend), games started and ended, bots taking a seat over, the series,
the deal's fairness check."""

from __future__ import annotations

import hashlib

from tapis.v1 import game_service_pb2 as pb
from tapis_clients import games
from tapis_clients.game import ClientGame
from tapis_clients.i18n import N_, _
from tapis_clients.people import Table


def describe_action(game: ClientGame, action: pb.Action, view: pb.GameView,
                    table: Table) -> str:
    which = action.WhichOneof("action")
    if which == "reclaim_seat":
        return _("take your seat back from the bot")
    if which == "start_next_game":
        return _("start the next game of the series")
    return game.describe_action(action, view, table)


def hotkey(game: ClientGame, action: pb.Action) -> str | None:
    which = action.WhichOneof("action")
    if which == "reclaim_seat":
        return "t"
    if which == "start_next_game":
        return "n"
    return game.hotkey(action) if which == game.field else None


def describe_event(game: ClientGame, event: pb.Event, table: Table) -> str | None:
    """One line for a person, or None for events not worth a line."""
    which = event.WhichOneof("body")
    if which == "seat_claimed":
        claimed = event.seat_claimed
        return table.said(claimed.seat, N_("you sit down"), N_("{name} sits down"))
    if which == "game_started":
        return "[bold]" + _("game {number} starts").format(
            number=event.game_started.game_number) + "[/]"
    if which == "seat_taken_over":
        taken = event.seat_taken_over
        if taken.until_reclaimed:
            return "[yellow]" + table.said(
                taken.seat, N_("your time ran out: a bot plays for you until you take your "
                               "seat back"),
                N_("{name}'s time ran out: a bot plays for them")) + "[/]"
        return "[yellow]" + table.said(taken.seat, N_("your time ran out: a bot moved for you"),
                                       N_("{name}'s time ran out: a bot moved for them")) + "[/]"
    if which == "seat_reclaimed":
        return table.said(event.seat_reclaimed.seat, N_("you take your seat back"),
                          N_("{name} takes their seat back"))
    if which == "seat_replaced":
        replaced = event.seat_replaced
        if replaced.seat == table.me:
            line = _("this seat is yours now: a bot plays it until you take it back")
        elif replaced.display_name:
            line = _("{holder} gets seat {seat}: a bot plays it until they take it").format(
                holder=replaced.display_name, seat=replaced.seat)
        else:
            line = _("a bot plays seat {seat} from now on").format(seat=replaced.seat)
        return "[yellow]" + line + "[/]"
    if which == "turn_timers_resumed":
        awaited = {deadline.seat for deadline in event.turn_timers_resumed.deadlines}
        if table.me in awaited:
            return "[yellow]" + _("the table is back: you have a whole turn to play") + "[/]"
        return _("the table is back: the turn timers start again")
    if which == "game_ended":
        ended = event.game_ended
        return "[bold green]" + _("game {number} over: {verdict}").format(
            number=ended.game_number, verdict=table.verdict(list(ended.winners))) + "[/]"
    if which == "game_abandoned":
        return abandoned_line(event.game_abandoned.reason)
    return game.describe_event(event, table)


def abandoned_line(reason: pb.AbandonReason.ValueType) -> str:
    """Why the table was abandoned, as its ``GameAbandoned`` says."""
    if reason == pb.ABANDON_REASON_IDLE:
        return _("the table was abandoned: nobody played for too long")
    if reason == pb.ABANDON_REASON_ENDED_BY_BACKEND:
        return _("the table was closed by the service that set it up")
    return _("the table was abandoned")


def series_line(game: ClientGame, view: pb.GameView, table: Table) -> str:
    """The series so far, by name (by team where partners win together): ``ana (2) · bob (1) ·
    draws 1`` (the count apart from a name that ends in a number, ``bot 2 (1)``; the draws
    once there are some)."""
    board = view.scoreboard
    wins = list(board.wins) or [0] * len(view.seats)
    sides = [(" & ".join(table.who(seat) for seat in side),
              wins[side[0]] if side and side[0] < len(wins) else 0) for side in game.sides(view)]
    return _series_text(fitted(sides, board.draws), board.draws, bold=True)


def fitted(sides: list[tuple[str, int]], draws: int) -> list[tuple[str, int]]:
    """The series' sides with their names shortened, the longest first, until the line fits
    ``SERIES_WIDTH`` (one line at four players, whatever the language)."""
    longest = max((len(name) for name, _count in sides), default=0)
    shown = sides
    while len(_series_text(shown, draws)) > SERIES_WIDTH and longest > 4:
        longest -= 1
        shown = [(_shortened(name, longest), count) for name, count in sides]
    return shown


SERIES_WIDTH = 76
"""The series line's width at most (inside an 80-column screen's borders)."""


def _series_text(sides: list[tuple[str, int]], draws: int, bold: bool = False) -> str:
    wins = " · ".join(f"{name} ([bold]{count}[/])" if bold else f"{name} ({count})"
                      for name, count in sides)
    if not draws:  # the draws once there are some
        return _("series: {wins}").format(wins=wins)
    return _("series: {wins} · draws {draws}").format(wins=wins, draws=draws)


def _shortened(name: str, most: int) -> str:
    """``name`` in at most ``most`` characters, its end kept when it is a number (``bot 2``
    stays told apart from ``bot 3``)."""
    if len(name) <= most:
        return name
    head, _space, tail = name.rpartition(" ")
    if head and tail.isdigit() and len(tail) + 2 < most:
        return head[:most - len(tail) - 2] + "… " + tail
    return name[:most - 1] + "…"


def fair(seed: int, seed_salt: str, seed_commitment: str) -> bool:
    """The revealed seed and salt hash to the commitment published at the game's start."""
    return hashlib.sha256(f"{seed}:{seed_salt}".encode()).hexdigest() == seed_commitment


def fairness_mark(fairness: pb.Fairness | pb.GameSummary, committed: str = "") -> str:
    """✓ when the revealed seed matches the commitment, ✗ when not, "" before the end."""
    commitment = committed or fairness.seed_commitment
    if not commitment or not fairness.seed_salt:
        return ""
    return "[green]✓[/]" if fair(fairness.seed, fairness.seed_salt, commitment) else "[red]✗[/]"


def fairness_lines(view: pb.GameView, committed: str = "") -> list[str]:
    """The deal's check, in words: what was published before play and, once the game is
    over, whether the revealed seed matches it."""
    fairness = view.fairness
    commitment = committed or fairness.seed_commitment
    if not commitment:
        return [_("this table publishes no deal check")]
    lines = [_("Before the first card, the server published a fingerprint of the deal:"),
             f"  sha256 = {commitment}"]
    if fairness.deal_chosen:
        lines.append("[yellow]" + _("The deal was chosen by the table's creator.") + "[/]")
    if fairness.seed_salt:
        lines.append(_("Now revealed: seed {seed}, salt {salt}").format(
            seed=fairness.seed, salt=fairness.seed_salt))
        if fair(fairness.seed, fairness.seed_salt, commitment):
            lines.append("[bold green]✓ " + _("they match: the deal was fixed before play")
                         + "[/]")
        else:
            lines.append("[bold red]✗ " + _("they do not match the fingerprint") + "[/]")
    else:
        lines.append("[dim]" + _("The seed is revealed when the game ends.") + "[/]")
    return lines


def series_rows(game: ClientGame, view: pb.GameView, table: Table,
                reasons: dict[int, str]) -> list[tuple[int, str]]:
    """One line per game of the series so far: number, winner, score, reason, deal check."""
    rows = []
    for summary in view.series:
        scores = "–".join(str(score) for score in summary.scores)
        reason = reasons.get(summary.game_number, "")
        line = _("game {number}").format(number=summary.game_number) + \
            f"  {table.verdict(list(summary.winners))}  {scores}"
        if reason:
            line += f"  ({reason})"
        mark = fairness_mark(summary)
        if mark:
            line += f"  {mark}"
        rows.append((summary.game_number, line))
    return rows


def title(view: pb.GameView) -> str:
    return games.title(view.kind)
