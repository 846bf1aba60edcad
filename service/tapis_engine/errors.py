"""Typed domain errors with a closed list of machine-readable reasons.

The engine raises these *before* changing anything. The service maps them once to gRPC status
codes (``ErrorKind``) and ``google.rpc.ErrorInfo`` reasons (``Reason``). Messages must only name
what the caller could see at the table.
"""

from __future__ import annotations

from enum import Enum, StrEnum


class ErrorKind(Enum):
    """How the service should answer: which gRPC status code family."""

    INVALID = "invalid"  # INVALID_ARGUMENT: the request can never be right
    PRECONDITION = "precondition"  # FAILED_PRECONDITION: not right in the game's current state
    PERMISSION = "permission"  # PERMISSION_DENIED
    RATE_LIMITED = "rate_limited"  # RESOURCE_EXHAUSTED


class Reason(StrEnum):
    """Every reason the engine may give for refusing something (UPPER_SNAKE, stable)."""

    INVALID_OPTIONS = "INVALID_OPTIONS"
    INVALID_SEAT_COUNT = "INVALID_SEAT_COUNT"
    INVALID_STACKED_DECK = "INVALID_STACKED_DECK"
    INVALID_ACTION = "INVALID_ACTION"
    WRONG_GAME_KIND = "WRONG_GAME_KIND"
    NOT_YOUR_TURN = "NOT_YOUR_TURN"
    GAME_OVER = "GAME_OVER"
    GAME_NOT_OVER = "GAME_NOT_OVER"
    GAME_NOT_STARTED = "GAME_NOT_STARTED"
    SEAT_BOT_CONTROLLED = "SEAT_BOT_CONTROLLED"
    SEAT_NOT_BOT_CONTROLLED = "SEAT_NOT_BOT_CONTROLLED"
    SEAT_OUT = "SEAT_OUT"
    CARD_NOT_IN_HAND = "CARD_NOT_IN_HAND"
    ILLEGAL_CAPTURE = "ILLEGAL_CAPTURE"
    SLAP_TOO_LATE = "SLAP_TOO_LATE"
    ILLEGAL_BET = "ILLEGAL_BET"
    NO_BUTTON_OF_COLOUR = "NO_BUTTON_OF_COLOUR"
    NOT_ALLOWED_NOW = "NOT_ALLOWED_NOW"
    GAME_ABANDONED = "GAME_ABANDONED"


class RuleError(Exception):
    """A refused request. The state it was tried on is unchanged."""

    def __init__(self, reason: Reason, message: str, kind: ErrorKind = ErrorKind.PRECONDITION):
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.kind = kind

    def __repr__(self) -> str:
        return f"RuleError({self.reason.value}, {self.message!r})"


def invalid(reason: Reason, message: str) -> RuleError:
    """A request that can never be right (maps to INVALID_ARGUMENT)."""
    return RuleError(reason, message, ErrorKind.INVALID)


def precondition(reason: Reason, message: str) -> RuleError:
    """A request that is not right now (maps to FAILED_PRECONDITION)."""
    return RuleError(reason, message, ErrorKind.PRECONDITION)
