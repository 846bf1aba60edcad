"""Command-line options shared by every subcommand, accepted before or after it
(``tapis --target H:P list`` and ``tapis list --target H:P`` alike)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from tapis_clients.i18n import N_, _

TARGET_HELP = N_("the server: HOST:PORT, several (H1:P1,H2:P2: round robin over a cluster) or "
                 "any gRPC target; default $TAPIS_TARGET, else 127.0.0.1:$TAPIS_PORT, else "
                 "127.0.0.1:50051")
TLS_CA_HELP = N_("reach the server over TLS, trusting this CA (PEM); default $TAPIS_TLS_CA")
TLS_HELP = N_("reach the server over TLS, trusting the system's roots; default $TAPIS_TLS")
API_KEY_HELP = N_("a backend's API key (x-api-key), for a server with --api-keys-file; "
                  "default $TAPIS_API_KEY")

AddOptions = Callable[[argparse.ArgumentParser, bool], None]

UINT32_MAX = 2**32 - 1
"""The largest value of a ``uint32`` field of the contract (a seat, a time in ms, points)."""
UINT64_MAX = 2**64 - 1
"""The largest value of a ``uint64`` field (a seed)."""
MAX_PLAYERS = 6
"""The most players a table of any game seats (docs/rules.md)."""

OUT_OF_RANGE = N_("{value} is out of range (from {low} to {high})")
AT_LEAST = N_("{value} is out of range (at least {low})")


def bounded(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse ``type``: a whole number from ``low`` to ``high`` (None: no upper bound),
    else argparse's one-line error naming the option and the range (exit status 2), before
    any call is made. Text that is no number reads "invalid int value", as with ``type=int``."""

    def whole(text: str) -> int:
        value = int(text)
        _check(value, value, low, high)
        return value

    whole.__name__ = "int"
    whole.bounds = (low, high)  # type: ignore[attr-defined]
    return whole


def bounded_float(low: float, high: float) -> Callable[[str], float]:
    """As ``bounded``, for a number with decimals (a finite one: never nan nor inf)."""

    def number(text: str) -> float:
        value = float(text)
        _check(text.strip(), value, low, high)
        return value

    number.__name__ = "float"
    number.bounds = (low, high)  # type: ignore[attr-defined]
    return number


def _said(number: float) -> str:
    """A bound as typed: ``60``, not ``60.0``; every digit of a large whole number."""
    return str(number) if isinstance(number, int) else f"{number:g}"


def _check(shown: object, value: float, low: float, high: float | None) -> None:
    if high is None:
        if not value >= low:
            raise argparse.ArgumentTypeError(_(AT_LEAST).format(value=shown, low=_said(low)))
    elif not low <= value <= high:  # nan is in no range
        raise argparse.ArgumentTypeError(_(OUT_OF_RANGE).format(
            value=shown, low=_said(low), high=_said(high)))


def add_target(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """Where the server is, and how to reach it (TLS, a backend's key)."""
    parser.add_argument("--target", default=argparse.SUPPRESS if suppress else None,
                        metavar=_("HOST:PORT"), help=_(TARGET_HELP))
    parser.add_argument("--tls-ca", metavar=_("FILE"), default=argparse.SUPPRESS if suppress
                        else None, help=_(TLS_CA_HELP))
    parser.add_argument("--tls", action="store_true", default=argparse.SUPPRESS if suppress
                        else False, help=_(TLS_HELP))
    parser.add_argument("--api-key", metavar=_("KEY"), default=argparse.SUPPRESS if suppress
                        else None, help=_(API_KEY_HELP))


def global_parent(add: AddOptions) -> argparse.ArgumentParser:
    """A parent parser for subcommands: the global options again, without defaults, so that
    one given before the subcommand is not reset by the subcommand's parser."""
    parent = argparse.ArgumentParser(add_help=False)
    add(parent, True)
    return parent


LANG_HELP = N_("the language of the screens: fr or en (default: from LC_ALL, LC_MESSAGES, "
               "LANG)")


def add_language(parser: argparse.ArgumentParser, suppress: bool) -> None:
    parser.add_argument("--lang", choices=("en", "fr"),
                        default=argparse.SUPPRESS if suppress else None, help=_(LANG_HELP))


def add_cli_globals(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """`tapis`'s global options: where the server is, which language."""
    add_target(parser, suppress)
    add_language(parser, suppress)
