"""Tables for the browser tests, set up over the player WebSocket: stacked decks that make each
game short and its moves known."""

from __future__ import annotations

from tapis.v1 import bataille_corse_pb2 as corse_pb2
from tapis.v1 import cards_pb2, war_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis_engine.cards import deck_with_jokers, standard_deck
from tapis_service.codec.adapters.cards import cards_to_proto
from tests.support.cards import cards
from tests.support.websocket import Client


def war_deck() -> list[cards_pb2.Card]:
    """Seat 0's and seat 1's decks dealt one card at a time: a bataille on the first trick
    (K against K, then A against 2 face up), then no tie."""
    first, second = list(cards("KS 3S AS")), list(cards("KH 4H 2H"))
    rest = sorted((c for c in standard_deck() if c not in first + second),
                  key=lambda c: c.rank)
    first += rest[1::2]
    second += rest[0::2]
    for i in range(3, 26):  # no two equal ranks face to face
        j = i + 1 if i < 25 else i - 1
        if first[i].rank == second[i].rank:
            first[i], first[j] = first[j], first[i]
    assert all(first[i].rank != second[i].rank for i in range(3, 26))
    return cards_to_proto(c for pair in zip(first, second, strict=True) for c in pair)


async def war_against_the_computer(client: Client, turn_ms: int = 0, target: int = 3) -> str:
    """A War table (3 points win) with seat 1 a bot and seat 0 free for the browser."""
    created = await client.call(create_game=pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, stacked_deck=war_deck(), stacked_first_seat=0,
        turn_time_limit_ms=turn_ms,
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON),
                      pb.SeatConfig(type=pb.SEAT_TYPE_BOT)],
        war=war_pb2.WarOptions(target_points=target)))
    return created.create_game.game.game_id


def basra_deck() -> list[cards_pb2.Card]:
    """Seat 1 deals: seat 0 holds 8♠ 2♣ 3♣ 4♥, seat 1 5♣ 6♣ 9♣ 10♣, and the floor is
    7♣ A♣ A♦ K♥: 8♠ takes 7♣ with either ace."""
    hand0, hand1, floor = cards("8S 2C 3C 4H"), cards("5C 6C 9C 10C"), cards("7C AC AD KH")
    dealt = [c for pair in zip(hand0, hand1, strict=True) for c in pair] + list(floor)
    return cards_to_proto([*dealt, *(c for c in standard_deck() if c not in dealt)])


def basra_sweep_deck() -> list[cards_pb2.Card]:
    """Seat 1 deals: seat 0 holds 7♦ 2♥ 9♣ Q♥, the floor is 3♣ 4♠ 2♠ 5♥: 7♦ takes 3+4 and 2+5,
    the whole floor, a basra."""
    hand0, hand1, floor = cards("7D 2H 9C QH"), cards("6C 8C 10C KC"), cards("3C 4S 2S 5H")
    dealt = [c for pair in zip(hand0, hand1, strict=True) for c in pair] + list(floor)
    return cards_to_proto([*dealt, *(c for c in standard_deck() if c not in dealt)])


async def basra_against_the_computer(client: Client, deck: list[cards_pb2.Card] | None = None,
                                     seed: int = 0) -> str:
    """A Basra table, seat 1 a bot: dealt from ``deck`` (default ``basra_deck``), or shuffled
    from ``seed`` when one is given (every deal of the game then follows from it)."""
    dealt = ({"seed": seed} if seed
             else {"stacked_deck": deck or basra_deck(), "stacked_first_seat": 1})
    created = await client.call(create_game=pb.CreateGameRequest(
        kind=pb.GAME_KIND_BASRA, seats=2, **dealt,  # type: ignore[arg-type]
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON),
                      pb.SeatConfig(type=pb.SEAT_TYPE_BOT)]))
    return created.create_game.game.game_id


def corse_deck() -> list[cards_pb2.Card]:
    """Seat 0 flips 5♠ first, seat 1 answers 5♥: a double, no challenge before it."""
    first, second = cards("5S 2S 3S"), cards("5H 2H 3H")
    dealt = [c for pair in zip(first, second, strict=True) for c in pair]
    rest = list(deck_with_jokers())
    for used in dealt:
        rest.remove(used)
    return cards_to_proto(dealt + rest)


async def corse_for_two(client: Client) -> tuple[str, str]:
    """A Bataille corse table for two persons: its id, and seat 1's token (the test plays
    seat 1, the browser seat 0)."""
    created = await client.call(create_game=pb.CreateGameRequest(
        kind=pb.GAME_KIND_BATAILLE_CORSE, seats=2, stacked_deck=corse_deck(),
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON),
                      pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)]))
    game_id = created.create_game.game.game_id
    joined = await client.call(join_game=pb.JoinGameRequest(game_id=game_id, seat=1,
                                                            display_name="Zoé"))
    return game_id, joined.join_game.seat_token


async def boutons_against_the_computer(client: Client) -> str:
    created = await client.call(create_game=pb.CreateGameRequest(
        kind=pb.GAME_KIND_BOUTONS, seats=2, seed=3,
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON),
                      pb.SeatConfig(type=pb.SEAT_TYPE_BOT)]))
    return created.create_game.game.game_id


async def corse_against_the_computer(client: Client, flip_cap: int) -> str:
    """A seeded Bataille corse table, seat 1 a bot and seat 0 free for the browser, that ends
    after ``flip_cap`` cards flipped (if nobody holds every card before)."""
    created = await client.call(create_game=pb.CreateGameRequest(
        kind=pb.GAME_KIND_BATAILLE_CORSE, seats=2, seed=5,
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON),
                      pb.SeatConfig(type=pb.SEAT_TYPE_BOT)],
        bataille_corse=corse_pb2.BatailleCorseOptions(flip_cap=flip_cap)))
    return created.create_game.game.game_id
