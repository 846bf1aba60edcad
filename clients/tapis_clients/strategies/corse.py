"""Bataille Corse for bots: which combination the pile shows, the reference policy (slap what
shows, else flip when due), and a follower that keeps the table up to date from the event
stream alone, so a bot reacts to every flip without asking the server for the table."""

from __future__ import annotations

from collections.abc import Sequence

from tapis.v1 import bataille_corse_pb2 as corse_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis.v1.cards_pb2 import Card

OUT = corse_pb2.BATAILLE_CORSE_SEAT_STATUS_OUT


def _number_value(card: Card) -> int | None:
    if card.rank <= 10:
        return int(card.rank)
    return 1 if card.rank == 14 else None


def showing(view: corse_pb2.BatailleCorseView) -> int | None:
    """The first switched-on combination the face-up pile shows (an enum value), or None."""
    cards = list(view.pile_top)
    if not cards:
        return None
    top = cards[-1].rank
    ranks = [card.rank for card in cards]
    for combination in view.combinations:
        if combination == corse_pb2.BATAILLE_CORSE_COMBINATION_DOUBLE:
            hit = len(ranks) >= 2 and ranks[-2] == top
        elif combination == corse_pb2.BATAILLE_CORSE_COMBINATION_SANDWICH:
            hit = len(ranks) >= 3 and ranks[-3] == top
        elif combination == corse_pb2.BATAILLE_CORSE_COMBINATION_BIG_MAC:
            hit = len(ranks) >= 4 and ranks[-4] == top
        elif combination == corse_pb2.BATAILLE_CORSE_COMBINATION_SUITE:
            hit = len(ranks) >= 2 and abs(ranks[-2] - top) == 1
        elif combination == corse_pb2.BATAILLE_CORSE_COMBINATION_TEN:
            values = [_number_value(card) for card in cards[-2:]]
            hit = len(values) == 2 and None not in values and sum(
                v for v in values if v is not None) == 10
        elif combination == corse_pb2.BATAILLE_CORSE_COMBINATION_SEVEN:
            hit = top == 7
        else:
            hit = False
        if hit:
            return int(combination)
    return None


def slap_or_flip(view: pb.GameView, legal: Sequence[pb.Action]) -> pb.Action | None:
    """Slap when a combination shows; else flip when due; else nothing."""
    flip = slap = None
    for action in legal:
        if action.WhichOneof("action") != "bataille_corse":
            continue
        if action.bataille_corse.WhichOneof("action") == "slap":
            slap = action
        else:
            flip = action
    if slap is not None and showing(view.bataille_corse) is not None:
        return slap
    return flip


def flip_action() -> pb.Action:
    return pb.Action(bataille_corse=corse_pb2.BatailleCorseAction(
        flip=corse_pb2.BatailleCorseFlip()))


def slap_action(pile_sequence: int) -> pb.Action:
    return pb.Action(bataille_corse=corse_pb2.BatailleCorseAction(
        slap=corse_pb2.BatailleCorseSlap(pile_sequence=pile_sequence)))


class CorseFollower:
    """One seat's picture of a Bataille Corse table: a view from GetGame, then kept current by
    applying every later event (the face-up pile, whose turn, decks, seat statuses)."""

    def __init__(self, view: pb.GameView) -> None:
        self.view = pb.GameView()
        self.view.CopyFrom(view)
        self.view.ClearField("legal_actions")
        self.seat = view.your_seat if view.HasField("your_seat") else None
        self.over = view.status != pb.GAME_STATUS_IN_PROGRESS

    @property
    def version(self) -> int:
        return self.view.version

    @property
    def last_sequence(self) -> int:
        return self.view.last_sequence

    def apply(self, event: pb.Event) -> None:
        """Bring the picture up to ``event`` (older events are ignored)."""
        if event.sequence <= self.view.last_sequence:
            return
        view = self.view
        view.last_sequence = event.sequence
        view.version = max(view.version, event.version)
        del view.awaiting_seats[:]
        view.awaiting_seats.extend(event.awaiting_seats)
        corse = view.bataille_corse
        if event.awaiting_seats:
            corse.turn = event.awaiting_seats[0]
        else:
            corse.ClearField("turn")
        body = event.WhichOneof("body")
        if body == "game_started":
            self.over = False
            view.status = pb.GAME_STATUS_IN_PROGRESS
            view.game_number = event.game_started.game_number
        elif body == "game_ended":
            self.over = True
            view.status = pb.GAME_STATUS_GAME_OVER
        if body != "bataille_corse":
            return
        which = event.bataille_corse.WhichOneof("event")
        e = event.bataille_corse
        if which == "dealt":
            self._set_decks(e.dealt.deck_sizes)
            del corse.pile_top[:]
            corse.pile_size = 0
            corse.ClearField("top_sequence")
            corse.flips = 0
            for seat in corse.seats:
                seat.status = corse_pb2.BATAILLE_CORSE_SEAT_STATUS_IN_PLAY
                seat.strikes = 0
        elif which == "card_flipped":
            flipped = e.card_flipped
            corse.pile_top.append(flipped.card)
            corse.pile_size += 1
            corse.top_sequence = flipped.pile_sequence
            corse.flips += 1
            source = flipped.drawn_from if flipped.HasField("drawn_from") else flipped.seat
            self._add_cards(source, -1)
        elif which == "pile_won":
            del corse.pile_top[:]
            corse.pile_size = 0
            corse.ClearField("top_sequence")
            corse.ClearField("challenger")
            corse.ClearField("owes")
            corse.tries_left = 0
            self._set_decks(e.pile_won.deck_sizes)
        elif which == "false_slap":
            slap = e.false_slap
            corse.pile_size = slap.pile_size
            self._add_cards(slap.seat, -int(slap.penalty_cards))
            if slap.seat < len(corse.seats):
                corse.seats[slap.seat].strikes = slap.strikes
        elif which in ("challenge_started", "challenge_passed"):
            challenge = getattr(e, which)
            corse.challenger = challenge.challenger
            corse.tries_left = challenge.tries
            if challenge.HasField("owes"):
                corse.owes = challenge.owes
        elif which in ("eliminated", "reentered", "out_for_good"):
            status = {"eliminated": corse_pb2.BATAILLE_CORSE_SEAT_STATUS_ELIMINATED,
                      "reentered": corse_pb2.BATAILLE_CORSE_SEAT_STATUS_IN_PLAY,
                      "out_for_good": OUT}[which]
            seat = getattr(e, which).seat
            if seat < len(corse.seats):
                corse.seats[seat].status = status
        elif which == "ended":
            self.over = True
            corse.end_reason = e.ended.reason
            if e.ended.HasField("winner"):
                corse.winner = e.ended.winner
            self._set_decks(e.ended.deck_sizes)

    def _set_decks(self, sizes: Sequence[int]) -> None:
        corse = self.view.bataille_corse
        del corse.deck_sizes[:]
        corse.deck_sizes.extend(sizes)
        for seat in corse.seats:
            if seat.seat < len(sizes):
                seat.deck_size = sizes[seat.seat]

    def _add_cards(self, seat: int, count: int) -> None:
        corse = self.view.bataille_corse
        if seat < len(corse.deck_sizes):
            corse.deck_sizes[seat] = max(0, corse.deck_sizes[seat] + count)
        for entry in corse.seats:
            if entry.seat == seat:
                entry.deck_size = max(0, entry.deck_size + count)

    def legal_actions(self) -> list[pb.Action]:
        """The seat's moves now, as the server would list them."""
        corse = self.view.bataille_corse
        if self.over or self.seat is None:
            return []
        actions = []
        if corse.HasField("turn") and corse.turn == self.seat:
            actions.append(flip_action())
        statuses = {s.seat: s.status for s in corse.seats}
        if corse.HasField("top_sequence") and statuses.get(self.seat) != OUT:
            actions.append(slap_action(corse.top_sequence))
        return actions
