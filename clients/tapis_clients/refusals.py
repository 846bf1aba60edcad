"""A sentence for each refusal a player can meet (every reason of protos/tapis/v1/errors.proto
but the few no client of ours can meet), so that no raw code reaches the screen."""

from __future__ import annotations

import grpc

from tapis_clients.connection import error_reason, in_doubt
from tapis_clients.i18n import N_, _, labelled

SENTENCES: dict[str, str] = {
    "NOT_YOUR_TURN": N_("not your turn"),
    "GAME_OVER": N_("this game is over"),
    "GAME_NOT_OVER": N_("the game is still being played"),
    "GAME_NOT_STARTED": N_("the table still waits for players"),
    "SEAT_BOT_CONTROLLED": N_("a bot plays your seat: take it back first"),
    "SEAT_NOT_BOT_CONTROLLED": N_("you already play this seat"),
    "SEAT_OUT": N_("you are out of this game for good"),
    "CARD_NOT_IN_HAND": N_("that card is not in your hand"),
    "ILLEGAL_CAPTURE": N_("that capture is not allowed"),
    "ILLEGAL_BET": N_("you cannot bet on that card now"),
    "NO_BUTTON_OF_COLOUR": N_("you have no button of that colour left"),
    "SLAP_TOO_LATE": N_("too late: the pile had changed"),
    "NO_FREE_SEAT": N_("every seat at this table is taken"),
    "NOT_ALLOWED_NOW": N_("that move is not allowed now"),
    "STALE_VERSION": N_("the table moved on before your move: look again"),
    "RATE_LIMITED": N_("too fast: wait a moment"),
    "GAME_NOT_FOUND": N_("there is no such table on this server"),
    "TOKEN_REQUIRED": N_("this seat needs its key: join the table first"),
    "INVALID_TOKEN": N_("this seat's key is not valid on this server"),
    "TOKEN_FOR_ANOTHER_GAME": N_("this seat's key is for another table"),
    "NOT_YOUR_SEAT": N_("that is not your seat"),
    "GAME_QUARANTINED": N_("this table is damaged and closed"),
    "GAME_ABANDONED": N_("this table was abandoned"),
    "STACKED_DECKS_DISABLED": N_("this server does not take chosen decks"),
    "SEED_CHOICE_DISABLED": N_("this server does not take a chosen deal (--seed)"),
    "INVALID_SEAT_COUNT": N_("this game is not played with that many players"),
    "INVALID_OPTIONS": N_("these options do not fit the game"),
    "TOO_MANY_GAMES": N_("the server holds as many tables as it may"),
    "GAME_KIND_NOT_AVAILABLE": N_("this server does not host that game"),
    "STORE_UNAVAILABLE": N_("the server cannot save right now: try again"),
    "OVERLOADED": N_("the server is busy: try again"),
    "SERVER_STARTING": N_("the server is starting: try again in a moment"),
    "NODE_VERSION_MISMATCH": N_("the server is being upgraded: try again in a moment"),
    "TOO_MANY_STREAMS": N_("too many open screens on this table"),
    "VALUE_TOO_LONG": N_("a name or value is too long"),
    "API_KEY_REQUIRED": N_("this needs a backend's API key (--api-key)"),
    "INVALID_API_KEY": N_("this API key is not one the server knows"),
    "NOT_YOUR_TABLE": N_("this table belongs to another backend"),
    "SEAT_RESERVED": N_("this seat is kept for another player"),
    "PRIVATE_TABLE": N_("this table is private"),
    "SERIES_OVER": N_("every game of this series is played"),
    "TOKEN_REVOKED": N_("this seat was given to someone else"),
    "COMMIT_UNKNOWN": N_("the server lost track of that move: look again before playing"),
    "INVALID_CURSOR": N_("this table went back to an earlier copy of itself: open it again"),
    "INVALID_GAME_KIND": N_("this server does not know that game"),
    "INVALID_STACKED_DECK": N_("the chosen deck does not fit this game"),
    "INVALID_ACTION": N_("that move does not exist in this game"),
    "WRONG_GAME_KIND": N_("that belongs to another game than this table's"),
    "INVALID_PAGE_TOKEN": N_("the server no longer knows where that list stopped: list again"),
    "INVALID_PAGE_SIZE": N_("the server does not list that many tables at once: ask for fewer"),
    "INVALID_ARGUMENT": N_("a value of the request is not one the server takes"),
    "STREAM_TOO_SLOW": N_("this screen fell too far behind the table: open it again"),
    "NOT_OWNER": N_("the table is changing nodes of the server: try again"),
    "TABLE_MOVED": N_("the table moved to another node of the server: look at it again"),
    "MISSING_GAME_ID": N_("no table named: give a table's id"),
    "SERVER_STOPPING": N_("the server is stopping: try again in a moment"),
    "INVALID_SEAT_CONFIG": N_("that seat cannot be given: the table has no such seat, a server "
                              "bot plays it, or that player holds another"),
    "FEATURE_NOT_AVAILABLE": N_("this server does not offer that yet"),
    "INVALID_LABEL": N_("a label's name is not one the server takes"),
    "INTERNAL": N_("the server failed on that through a fault of its own"),
}
"""Reason -> what the player reads: every reason of errors.proto but ``UNSAID``'s."""

UNSAID: frozenset[str] = frozenset({
    "UNSPECIFIED",  # the enum's zero: no refusal carries it
    "INVALID_REQUEST",  # bytes that are no request: the generated stubs always send one
    "NOT_A_CLUSTER_NODE",  # the cluster's node-to-node tunnel only, which no client opens
})
"""Reasons no client of ours can meet, deliberately without a sentence (``REFUSED`` if ever)."""


REFUSED = N_("the server refused that")
"""For a reason a player should not meet."""

IN_DOUBT = N_("the server may not have taken your move: look at the table before playing")
"""For a move still in doubt once resent (connection.in_doubt): applied or not, the table says."""

PRECISE: frozenset[str] = frozenset({"INVALID_OPTIONS", "INVALID_SEAT_COUNT"})
"""Refusals of a new table's settings, whose server message is said after the sentence: it
names what does not fit ("unknown bot 'bogus'; this game has basic"), and a table not yet
created has no hidden card to leak."""


def sentence(reason: str) -> str:
    """What a refusal with ``reason`` means for the player."""
    return _(SENTENCES.get(reason, REFUSED))


def explain(error: grpc.RpcError, move: bool = False) -> str:
    """The sentence for a refused call (no code; no server wording but for the settings of a
    new table, ``PRECISE``); with ``move``, the call was a move, which may be in doubt."""
    if move and in_doubt(error):
        return _(IN_DOUBT)
    reason = error_reason(error)
    if reason in PRECISE and error.details():
        return labelled(sentence(reason), error.details())
    if reason:
        return sentence(reason)
    if error.code() == grpc.StatusCode.UNAVAILABLE:
        return _("the server cannot be reached")
    if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        return _("the server took too long to answer")
    return sentence("")
