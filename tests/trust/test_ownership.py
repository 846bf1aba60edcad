"""Whose a table is and what that allows: visibility, reserved seats, backend calls, series."""

from __future__ import annotations

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis_service.door.api_keys import Backend
from tapis_service.observe.errors import ServiceError
from tapis_service.tables.ownership import (
    PRIVATE,
    PUBLIC,
    Ownership,
    decide,
    is_spectator_token,
    seat_token,
    spectator_token,
)

A = Backend("backend-a", "aaaaaaaaaaaa")
B = Backend("backend-b", "bbbbbbbbbbbb")
PERSON, BOT = pb.SEAT_TYPE_PERSON, pb.SEAT_TYPE_BOT


def refusal(error: pytest.ExceptionInfo[ServiceError]) -> tuple[grpc.StatusCode, str]:
    return error.value.code, error.value.reason


def create(*configs: pb.SeatConfig, **fields: object) -> pb.CreateGameRequest:
    return pb.CreateGameRequest(kind=pb.GAME_KIND_WAR, seat_configs=configs, **fields)


def test_a_table_without_a_key_is_nobody_s_and_public() -> None:
    owned = decide(create(), 2, None)
    assert owned == Ownership(None, PUBLIC, (), (), 0)
    assert owned.listed_to(None) and owned.listed_to(A)
    owned.check_join(None, None)
    owned.check_watch(False, None)


def test_a_backend_s_table_is_private_unless_it_says_public() -> None:
    assert decide(create(), 2, A).visibility == PRIVATE
    assert decide(create(visibility=pb.VISIBILITY_PRIVATE), 2, A).visibility == PRIVATE
    public = decide(create(visibility=pb.VISIBILITY_PUBLIC), 2, A)
    assert public.visibility == PUBLIC and public.backend == "backend-a"


def test_a_private_table_is_listed_joined_and_watched_by_its_backend_only() -> None:
    owned = decide(create(), 2, A)
    assert owned.listed_to(A) and not owned.listed_to(B) and not owned.listed_to(None)
    owned.check_join(0, A)
    for stranger in (None, B):
        with pytest.raises(ServiceError) as raised:
            owned.check_join(None, stranger)
        assert refusal(raised) == (grpc.StatusCode.PERMISSION_DENIED, "PRIVATE_TABLE")
        with pytest.raises(ServiceError) as watched:
            owned.check_watch(False, stranger)
        assert refusal(watched) == (grpc.StatusCode.PERMISSION_DENIED, "PRIVATE_TABLE")
    owned.check_watch(True, None)  # a spectator token
    owned.check_watch(False, A)


def test_reserved_seats_are_never_free_and_show_the_backend_s_names() -> None:
    owned = decide(create(pb.SeatConfig(type=PERSON, player_id="u-1", display_name="Ada"),
                          pb.SeatConfig(type=PERSON, player_id="u-2"),
                          pb.SeatConfig(type=PERSON)), 3, A)
    assert owned.player_ids == ("u-1", "u-2", "")
    assert owned.names == ("Ada", "u-2", "")
    assert owned.reserved_seats() == [0, 1]
    public = decide(create(pb.SeatConfig(type=PERSON, player_id="u-1"),
                           pb.SeatConfig(type=PERSON), visibility=pb.VISIBILITY_PUBLIC), 2, A)
    with pytest.raises(ServiceError) as raised:
        public.check_join(0, None)
    assert refusal(raised) == (grpc.StatusCode.FAILED_PRECONDITION, "SEAT_RESERVED")
    public.check_join(1, None)


@pytest.mark.parametrize(("request_", "backend", "expected"), [
    (create(pb.SeatConfig(type=PERSON, player_id="u")), None,
     (grpc.StatusCode.UNAUTHENTICATED, "API_KEY_REQUIRED")),
    (create(visibility=pb.VISIBILITY_PRIVATE), None,
     (grpc.StatusCode.UNAUTHENTICATED, "API_KEY_REQUIRED")),
    (create(pb.SeatConfig(type=BOT, player_id="u")), A,
     (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SEAT_CONFIG")),
    (create(pb.SeatConfig(type=PERSON, player_id="u"), pb.SeatConfig(type=PERSON, player_id="u")),
     A, (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SEAT_CONFIG")),
    (create(pb.SeatConfig(type=PERSON, display_name="Ada")), A,
     (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SEAT_CONFIG")),
    (create(pb.SeatConfig(type=PERSON, player_id="u" * 129)), A,
     (grpc.StatusCode.INVALID_ARGUMENT, "VALUE_TOO_LONG")),
])
def test_what_a_create_may_not_ask(request_: pb.CreateGameRequest, backend: Backend | None,
                                   expected: tuple[grpc.StatusCode, str]) -> None:
    with pytest.raises(ServiceError) as raised:
        decide(request_, 2, backend)
    assert refusal(raised) == expected


def test_backend_calls_are_for_the_table_s_backend() -> None:
    owned = decide(create(), 2, A)
    assert owned.check_backend(A, "EndTable") is A
    with pytest.raises(ServiceError) as other:
        owned.check_backend(B, "EndTable")
    assert refusal(other) == (grpc.StatusCode.PERMISSION_DENIED, "NOT_YOUR_TABLE")
    with pytest.raises(ServiceError) as none:
        owned.check_backend(None, "EndTable")
    assert refusal(none) == (grpc.StatusCode.UNAUTHENTICATED, "API_KEY_REQUIRED")
    with pytest.raises(ServiceError) as keyless_table:
        decide(create(), 2, None).check_backend(A, "EndTable")
    assert refusal(keyless_table) == (grpc.StatusCode.PERMISSION_DENIED, "NOT_YOUR_TABLE")


def test_a_series_ends_after_its_length() -> None:
    owned = decide(create(series_length=3), 2, A)
    owned.check_next_game(2)
    assert not owned.series_over(2) and owned.series_over(3)
    with pytest.raises(ServiceError) as raised:
        owned.check_next_game(3)
    assert refusal(raised) == (grpc.StatusCode.FAILED_PRECONDITION, "SERIES_OVER")
    decide(create(), 2, A).check_next_game(1000)


def test_ownership_round_trips_through_the_creation_record() -> None:
    owned = decide(create(pb.SeatConfig(type=PERSON, player_id="u-1", display_name="Ada"),
                          series_length=5), 2, A)
    assert Ownership.decode(owned.encode()) == owned
    assert Ownership.decode(None) == Ownership()


def test_tokens_are_fixed_by_table_seat_and_generation() -> None:
    key = b"k" * 32
    first = seat_token(key, "g", 0, 0)
    assert first == seat_token(key, "g", 0, 0)
    assert len({first, seat_token(key, "g", 0, 1), seat_token(key, "g", 1, 0),
                seat_token(key, "h", 0, 0), seat_token(b"j" * 32, "g", 0, 0),
                spectator_token(key, "g")}) == 6
    assert len(first) == 32
    assert is_spectator_token(key, "g", spectator_token(key, "g"))
    assert not is_spectator_token(key, "h", spectator_token(key, "g"))
    assert not is_spectator_token(key, "g", first) and not is_spectator_token(key, "g", None)
