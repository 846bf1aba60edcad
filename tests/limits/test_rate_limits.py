"""Per-address rate limits: CreateGame, and calls with a wrong seat token."""

from __future__ import annotations

from tapis.v1 import game_service_pb2 as pb
from tapis_service.door.ratelimit import PeerLimits, TokenBuckets
from tapis_service.observe.clock import ManualClock
from tests.support.calls import STREAM_DEADLINE_S, auth, refusal, view_of, war_for_two
from tests.support.server import ServerFactory
from tests.support.tables import live_of


async def test_creates_beyond_the_rate_of_an_address_are_refused_until_it_refills(
        make_server: ServerFactory) -> None:
    clock = ManualClock()
    h = await make_server(clock=clock, create_rate_per_s=1.0, create_burst=3)
    for _ in range(3):
        await h.stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR))
    code, reason, _ = await refusal(h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR)))
    assert (code, reason) == ("RESOURCE_EXHAUSTED", "RATE_LIMITED")
    assert len(live_of(h.host)) == 3
    clock.advance(1000)
    await h.stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR))
    assert len(live_of(h.host)) == 4


async def test_wrong_tokens_beyond_the_rate_of_an_address_are_refused(
        make_server: ServerFactory) -> None:
    clock = ManualClock()
    h = await make_server(clock=clock, bad_token_rate_per_s=1.0, bad_token_burst=2)
    game_id, tokens = await war_for_two(h)
    for _ in range(2):
        code, reason, _ = await refusal(h.stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                                       metadata=auth("guess")))
        assert (code, reason) == ("UNAUTHENTICATED", "INVALID_TOKEN")
    for call in (h.stub.GetGame(pb.GetGameRequest(game_id=game_id), metadata=auth("guess")),
                 h.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id),
                                     metadata=auth("guess")),
                 h.stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id),
                                     metadata=auth("guess"), timeout=STREAM_DEADLINE_S).read()):
        code, reason, _ = await refusal(call)
        assert (code, reason) == ("RESOURCE_EXHAUSTED", "RATE_LIMITED")
    # the right token is never limited, and the address gets its rate back
    assert (await view_of(h, game_id, tokens[0])).your_seat == 0
    clock.advance(1000)
    code, reason, _ = await refusal(h.stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                                   metadata=auth("guess")))
    assert (code, reason) == ("UNAUTHENTICATED", "INVALID_TOKEN")


def test_peer_limits_of_zero_are_off_and_idle_buckets_are_forgotten() -> None:
    off = PeerLimits(0, 0, 0, 0)
    assert all(off.allow_create("a", 0) and off.allow_bad_token("a", 0) for _ in range(1000))
    buckets = TokenBuckets(rate_per_s=1.0, burst=2)
    for key in range(10):
        assert buckets.allow(key, 0)
    assert len(buckets) == 10
    buckets.prune(now_ms=10_000)
    assert len(buckets) == 0
