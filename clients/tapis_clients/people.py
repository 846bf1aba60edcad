"""People, not seats: who sits where, said to the reader ("you" for their own seat, names for
the others, bots named by their strategy)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tapis.v1 import game_service_pb2 as pb
from tapis_clients.i18n import N_, _, ngettext

STRATEGY_NAMES = {"basic": N_("basic"), "reflex": N_("reflex"), "heuristic": N_("heuristic"),
                  "random": N_("random"), "sloppy": N_("sloppy")}
"""The server's bot strategies (each engine's ``bot_strategies``) as the screens name them."""


def bot_name(strategy: str) -> str:
    """A bot as the screens name it, by its strategy in the reader's language (``reflex bot``,
    ``robot réflexe``)."""
    return _("{strategy} bot").format(strategy=_(STRATEGY_NAMES.get(strategy, strategy))
                                      if strategy in STRATEGY_NAMES else strategy)


@dataclass
class Table:
    """The names at a table and the reader's seat (None for a spectator)."""

    names: list[str] = field(default_factory=list)
    me: int | None = None
    bots: frozenset[int] = frozenset()
    timers: dict[int, str] = field(default_factory=dict)
    """Seat -> the time it has left to act, ``m:ss`` (set by the screen each second)."""

    @classmethod
    def of(cls, view: pb.GameView) -> Table:
        """The names of ``view``'s seats: a person's display name, a bot's strategy."""
        names: list[str] = []
        bots: set[int] = set()
        strategies: dict[str, int] = {}
        for seat in view.seats:
            if seat.type == pb.SEAT_TYPE_BOT:
                bots.add(seat.seat)
                strategy = seat.bot_strategy or "bot"
                strategies[strategy] = strategies.get(strategy, 0) + 1
                name = bot_name(strategy) if strategy != "bot" else _("bot")
                if strategies[strategy] > 1:
                    name += f" {strategies[strategy]}"
            elif not seat.taken:
                name = _("open seat")
            else:
                name = seat.display_name or _("seat {number}").format(number=seat.seat)
            names.append(name)
        me = view.your_seat if view.HasField("your_seat") else None
        return cls(names, me, frozenset(bots))

    def name(self, seat: int) -> str:
        """The seat's name as others see it."""
        if 0 <= seat < len(self.names):
            return self.names[seat]
        return _("seat {number}").format(number=seat)

    def who(self, seat: int) -> str:
        """"you" for the reader's seat, else its name."""
        return _("you") if seat == self.me else self.name(seat)

    def said(self, seat: int, yours: str, theirs: str, **values: object) -> str:
        """``yours`` (a text about the reader, "you take…") or ``theirs`` ("{name} takes…"),
        translated and filled in; both are marked with N_ where they are written."""
        if seat == self.me:
            return _(yours).format(**values)
        return _(theirs).format(name=self.name(seat), **values)

    def said_n(self, seat: int, yours: tuple[str, str], theirs: tuple[str, str], count: int,
               **values: object) -> str:
        """As ``said``, for a text about a count: each a (singular, plural) pair marked with
        ``NP_``, the form chosen by ``count`` in the reader's language."""
        if seat == self.me:
            return ngettext(*yours, count).format(**values)
        return ngettext(*theirs, count).format(name=self.name(seat), **values)

    def listed(self, seats: Sequence[int]) -> str:
        """``ana and bob`` / ``ana, bob and you``."""
        names = [self.who(seat) for seat in seats]
        if len(names) <= 1:
            return "".join(names)
        return _("{first} and {last}").format(first=", ".join(names[:-1]), last=names[-1])

    def verdict(self, winners: Sequence[int]) -> str:
        """Who won, said to the reader, with the winner named."""
        if not winners:
            return _("draw")
        if len(winners) == 1:
            return self.said(winners[0], N_("you win"), N_("{name} wins"))
        if self.me in winners:
            return _("you share the win with {others}").format(
                others=self.listed([s for s in winners if s != self.me]))
        return _("{names} share the win").format(names=self.listed(winners))


def as_table(reader: Table | int | None) -> Table:
    """A Table from a Table, or from a bare seat (names unknown: "seat N")."""
    return reader if isinstance(reader, Table) else Table(me=reader)
