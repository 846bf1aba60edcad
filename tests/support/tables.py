"""A host's tables in one state, as a dict (a copy) for the tests to look into: the host holds
them in one map (``lifecycle.Tables``) and writes it there only."""

from __future__ import annotations

from typing import Any

from tapis_service.tables.healing import Quarantined
from tapis_service.tables.lifecycle import TableState
from tapis_service.tables.resting import RestingTable
from tapis_service.tables.session import Session


def live_of(host: Any) -> dict[str, Session]:
    """Its LIVE tables -> their sessions."""
    return {session.game_id: session for session in host.tables.sessions(TableState.LIVE)}


def unavailable_of(host: Any) -> dict[str, Session]:
    """Its UNAVAILABLE tables -> their discarded sessions."""
    return {session.game_id: session
            for session in host.tables.sessions(TableState.UNAVAILABLE)}


def resting_of(host: Any) -> dict[str, RestingTable]:
    """Its RESTING tables -> their listings."""
    return dict(host.tables.resting_tables())


def quarantined_of(host: Any) -> dict[str, Quarantined]:
    """Its QUARANTINED tables -> what is known of them."""
    return dict(host.tables.quarantined_tables())
