"""Command-line options shared by every subcommand, accepted before or after it
(``tapis --target H:P list`` and ``tapis list --target H:P`` alike)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from tapis_clients.i18n import N_, _

TARGET_HELP = N_("the server: HOST:PORT, several (H1:P1,H2:P2: round robin over a cluster) or "
                 "any gRPC target; default $TAPIS_TARGET, else 127.0.0.1:$TAPIS_PORT, else "
                 "127.0.0.1:50051")

AddOptions = Callable[[argparse.ArgumentParser, bool], None]


def add_target(parser: argparse.ArgumentParser, suppress: bool) -> None:
    parser.add_argument("--target", default=argparse.SUPPRESS if suppress else None,
                        help=_(TARGET_HELP))


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
