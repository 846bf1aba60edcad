"""Size limits checked before any other work, and quoting of client values in errors and logs.

Every request is checked here first (``check_sizes``): each string at most ``MAX_TEXT_BYTES``
bytes of UTF-8, each repeated field at most ``MAX_REPEATED`` items, a map (a table's labels) at
most ``MAX_LABELS`` entries whose keys match ``LABEL_KEY`` and whose values are at most
``MAX_LABEL_VALUE_BYTES`` bytes, a stacked deck at most the
game's (its descriptor's ``max_stacked_cards``, checked with the stacked-deck permission before
a single card is converted). ``MAX_RECEIVE_MESSAGE_BYTES`` is the server's maximum request
size: grpc refuses anything bigger with RESOURCE_EXHAUSTED before it is even parsed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from tapis_engine.registry import descriptor_for
from tapis_service.observe.errors import ServiceError, invalid_argument

MAX_TEXT_BYTES: Final = 128
"""Ids, names, tokens, strategies: at most this many bytes (UTF-8)."""
MAX_REPEATED: Final = 64
"""Any repeated field of a request other than a stacked deck (seats are at most 6)."""
CARD_WIRE_BYTES = 6
"""A ``Card`` inside a repeated field: 1 tag + 1 length + 2 × (tag + one-byte enum)."""
MAX_RECEIVE_MESSAGE_BYTES = 64 * 1024
"""The largest request the server accepts. The largest legitimate one is a CreateGame with
the longest stacked deck (3,328 cards × 6 bytes = 19,968 bytes), six seat configs with
128-byte strategies, a 128-byte request id and 16 labels of 64 + 256 bytes: about 26 KiB;
64 KiB leaves room for the
contract to grow (``tests/limits/test_sizes.py`` checks the bound)."""
MAX_METADATA_BYTES = 8 * 1024
"""Request headers: grpc refuses some calls beyond this size and all beyond twice it."""
MAX_LABELS = 16
"""A table's labels (``CreateGameRequest.labels``): at most this many entries."""
MAX_BOT_REACTION_MS = 60_000
"""A table's bots' median reaction time (``CreateGameRequest.bot_reaction_ms``): at most this."""
MAX_LABEL_KEY_BYTES = 64
LABEL_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,63}")
"""A label key: 1 to ``MAX_LABEL_KEY_BYTES`` ASCII letters, digits, '.', '_', '-', '/',
starting with a letter or digit (INVALID_LABEL otherwise)."""
MAX_LABEL_VALUE_BYTES = 256
"""A label value: at most this many bytes of UTF-8."""
QUOTE_CHARS: Final = 40
"""Errors and logs quote at most this many characters of a client value."""

SURELY_SHORT: Final = min(MAX_TEXT_BYTES, MAX_REPEATED)
"""A message of at most this many bytes holds no string longer than ``MAX_TEXT_BYTES`` and no
repeated field of more than ``MAX_REPEATED`` items (each item takes a byte at least)."""

_STRING = FieldDescriptor.TYPE_STRING
_BYTES = FieldDescriptor.TYPE_BYTES
_MESSAGE = FieldDescriptor.TYPE_MESSAGE


def quote(value: object, limit: int = QUOTE_CHARS) -> str:
    """A client value as errors and logs may show it: repr of a short prefix, with "…" and
    the full length when it was cut."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text)} chars)"


def clip(value: str, limit: int = QUOTE_CHARS) -> str:
    """A client value for a log field: unchanged when short, else its prefix and "…"."""
    return value if len(value) <= limit else f"{value[:limit]}…"


def too_long(what: str, limit: int, unit: str) -> ServiceError:
    return invalid_argument("VALUE_TOO_LONG", f"{what} is longer than {limit} {unit}")


def text_bytes(value: str) -> int:
    """The UTF-8 size of ``value`` (without encoding it when it is surely short)."""
    return len(value) if len(value) * 4 <= MAX_TEXT_BYTES else len(value.encode())


def check_text(value: str, what: str) -> str:
    """``value`` unchanged, or VALUE_TOO_LONG beyond ``MAX_TEXT_BYTES``."""
    if len(value) > MAX_TEXT_BYTES // 4 and text_bytes(value) > MAX_TEXT_BYTES:
        raise too_long(what, MAX_TEXT_BYTES, "bytes")
    return value


_BOUNDED: dict[str, bool] = {}
"""Message type -> it (or a message inside it) has a string, bytes or repeated field."""


def _has_bounded_fields(descriptor: Descriptor, seen: frozenset[str] = frozenset()) -> bool:
    known = _BOUNDED.get(descriptor.full_name)
    if known is not None:
        return known
    found = False
    for field in descriptor.fields:
        if field.is_repeated or field.type in (_STRING, _BYTES):
            found = True
        elif field.type == _MESSAGE:
            inner = field.message_type
            assert inner is not None
            if inner.full_name not in seen:
                found = _has_bounded_fields(inner, seen | {descriptor.full_name})
        if found:
            break
    _BOUNDED[descriptor.full_name] = found
    return found


_MAPS: dict[Descriptor, tuple[str, ...]] = {}
"""Message type -> its map fields (labels), checked whatever the message's size."""


def _map_fields(descriptor: Descriptor) -> tuple[str, ...]:
    known = _MAPS.get(descriptor)
    if known is None:
        known = _MAPS[descriptor] = tuple(
            field.name for field in descriptor.fields
            if field.message_type is not None and field.message_type.GetOptions().map_entry)
    return known


def check_labels(labels: Mapping[str, str], what: str = "labels") -> None:
    """A table's labels within their limits: VALUE_TOO_LONG for too many entries or a value
    too long, INVALID_LABEL for a key that is not ``LABEL_KEY``."""
    if len(labels) > MAX_LABELS:
        raise too_long(what, MAX_LABELS, "entries")
    for key, value in labels.items():
        if not LABEL_KEY.fullmatch(key):
            raise invalid_argument("INVALID_LABEL", f"{what}: the key {quote(key)} is not 1 to "
                                   f"{MAX_LABEL_KEY_BYTES} ASCII letters, digits, '.', '_', "
                                   "'-' or '/' starting with a letter or digit")
        if len(value) > MAX_LABEL_VALUE_BYTES // 4 \
                and len(value.encode()) > MAX_LABEL_VALUE_BYTES:
            raise too_long(f"{what}[{key}]", MAX_LABEL_VALUE_BYTES, "bytes")


def check_sizes(message: Message, path: str = "") -> None:
    """Every string and repeated field of a request within its limit (VALUE_TOO_LONG), the
    stacked deck excepted (``check_stacked_deck`` knows the game), and its labels
    (``check_labels``)."""
    descriptor = message.DESCRIPTOR
    maps = _MAPS.get(descriptor)  # type: ignore[arg-type]  # _map_fields, inlined
    if maps is None:
        maps = _map_fields(descriptor)  # type: ignore[arg-type]
    for name in maps:
        check_labels(getattr(message, name), f"{path}{name}")
    if message.ByteSize() <= SURELY_SHORT:
        return  # no string nor repeated field can be over its limit in so few bytes
    for field, value in message.ListFields():
        name = f"{path}{field.name}"
        kind = field.type
        if field.name in maps:
            continue
        if kind == _MESSAGE and not field.is_repeated \
                and not _has_bounded_fields(field.message_type):  # type: ignore[arg-type]
            continue  # nothing inside it can be too long (most actions)
        if field.is_repeated:
            if name == "stacked_deck":
                continue
            if len(value) > MAX_REPEATED:
                raise too_long(name, MAX_REPEATED, "items")
            if kind == _MESSAGE:
                for item in value:
                    check_sizes(item, f"{name}.")
            elif kind in (_STRING, _BYTES):
                for item in value:
                    _check_scalar(item, name)
        elif kind == _MESSAGE:
            check_sizes(value, f"{name}.")
        elif kind in (_STRING, _BYTES):
            _check_scalar(value, name)


def _check_scalar(value: str | bytes, name: str) -> None:
    if isinstance(value, bytes):
        if len(value) > MAX_TEXT_BYTES:
            raise too_long(name, MAX_TEXT_BYTES, "bytes")
    else:
        check_text(value, name)


def check_game_id(game_id: str) -> None:
    """A request about a game names one (MISSING_GAME_ID), checked with the sizes."""
    if not game_id:
        raise invalid_argument("MISSING_GAME_ID", "name the game: game_id is empty")


def check_stacked_deck(kind: str, cards: int) -> None:
    """A stacked deck of ``cards`` cards is at most the game's deck (VALUE_TOO_LONG)."""
    limit = descriptor_for(kind).max_stacked_cards
    if cards > limit:
        raise too_long("stacked_deck", limit, "cards")


def peer_host(peer: str) -> str:
    """The client's address without its port (``ipv4:1.2.3.4:5678`` → ``ipv4:1.2.3.4``): the
    key of per-peer limits, shared by every connection from that address."""
    scheme, _, rest = peer.partition(":")
    if scheme in ("ipv4", "ipv6"):
        host, _, _ = rest.rpartition(":")
        return f"{scheme}:{host}" if host else peer
    return peer
