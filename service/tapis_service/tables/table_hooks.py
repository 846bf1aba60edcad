"""What the table actor tells the rest of its host around a commit (``Committed``): the
results filed, the listing's status, the finished tables' rest and retention, the seats' idle
timers, a failed write's healing. The host hands itself in as this; the actor reaches no
further into it."""

from __future__ import annotations

from typing import Protocol

from tapis_service.stores.store import StoreError
from tapis_service.tables.session import Session


class Committed(Protocol):
    """What the table actor tells the rest of its host around a commit (the host hands itself
    in as this): the actor reaches no further into it. State changes go to ``lifecycle``."""

    def publishing(self, session: Session, over: bool) -> None:
        """Committed events are about to be published (``over``: the game is over): the
        results are filed, the listing's status follows."""

    def armed(self, session: Session) -> None:
        """Published, and the table's bots and turn timers armed: its seats' idle timers."""

    def finishing(self, session: Session) -> None:
        """A game's last input was queued: the retention of finished tables."""

    def finished(self, session: Session) -> None:
        """A finished game's last input committed: the table rests at once if it may."""

    def write_failed(self, session: Session | None, error: StoreError) -> None:
        """A journal write (None: a creation record) was not committed (``healing``)."""
