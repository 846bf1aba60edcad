"""La bataille des boutons, RULES.md §3: betting buttons on laid-out cards, product scoring.

2 to 4 players. Seat 0 lays out the four jacks, seat 1 the queens, seat 2 the kings, seat 3 the
tens. Each round the first player moves a reserve button to the centre, everyone bets 4 of their
buttons on their own cards, then from the second player on each flips deck B (31 cards, no A♦):
a twin of a laid-out card takes its buttons, the A♥ takes the centre, the second black ace ends
the round, as does the taking of the last button. The score is the product of a player's pile
sizes by colour.

Rulings beyond RULES.md (decided here, as a referee would):

- Colours, in the order they come into play: red, blue, green, yellow (2 players), black,
  white (3), orange, purple (4); the reserve's colour is "reserve".
- Moving the reserve button to the centre is automatic at the start of each round (the first
  player has no choice to make); it is announced by ``ReserveToCentre``. Bets and flips each wait
  for their seat.
- Betting order: first player, then round the table, one button per turn, 4 rounds of the table
  (4 bets each). A player may bet any colour they hold, reserve buttons included.
- "A card with no button" is judged at the moment of the bet, buttons left from earlier rounds
  included: once all four of a player's cards carry a button, any of their cards may be chosen.
- A bet on another player's card or on a card that is not laid out is ``ILLEGAL_BET``; a
  colour the player does not hold is ``NO_BUTTON_OF_COLOUR``; a bet on a covered card while an
  uncovered one remains is ``ILLEGAL_BET`` (all preconditions: one status code per reason).
- "A player had no button left to bet" means betting stopped in that round because the player
  due to bet had none (``BettingStopped``); the round is still drawn, then the game ends. A
  player left without buttons at the end of a round plays on into the next round, where betting
  stops when their turn to bet comes.
- The twins of a seat's cards only count when that seat is at the table (kings and tens are
  nobody's with 2 players; tens with 3): flipping them does nothing. A twin or A♥ with no button
  on it does nothing either.
- The round ends at once when the last button on the cards and in the centre is taken, or at the
  second black ace; the next player in turn then does not flip. Deck B holds both black aces, so
  it can never run out. The first player of the next round is the next seat, whatever happened.
- A stacked deck B holds k orders of the 31 cards, 1 <= k <= rounds: round r uses order
  (r - 1) mod k, so one order serves every round and ``rounds`` orders give each round its own;
  ``stacked_first`` may only be 0 (nothing about who starts is random).
- Winners are all seats sharing the highest score, even when that score is 0.
- Legal actions come card by card in suit order (clubs, diamonds, hearts, spades), colour by
  colour in the order above; while drawing, the one flip. Everything but deck B's order is
  public, so ``redact`` returns every event as it is.
"""

from __future__ import annotations

from tapis_engine.boutons.rules import BoutonsRules
from tapis_engine.boutons.state import (
    ALL_COLOURS,
    COLOURS,
    DECK_B,
    MAX_ROUNDS,
    RESERVE,
    Bet,
    BetPlaced,
    BettingStopped,
    BlackAceSetAside,
    BoutonsEnded,
    BoutonsOptions,
    BoutonsState,
    BoutonsView,
    ButtonsTaken,
    CardFlipped,
    DrawStarted,
    Flip,
    LaidOutCard,
    ReserveToCentre,
    RoundEnded,
)
from tapis_engine.descriptor import GameDescriptor

RULES: BoutonsRules = BoutonsRules()
GAME: GameDescriptor = GameDescriptor(
    rules=RULES, title="La bataille des boutons", max_stacked_cards=len(DECK_B) * MAX_ROUNDS,
    short_options=BoutonsOptions(rounds=3))

__all__ = [
    "ALL_COLOURS", "COLOURS", "GAME", "RESERVE", "RULES", "Bet", "BetPlaced", "BettingStopped",
    "BlackAceSetAside", "BoutonsEnded", "BoutonsOptions", "BoutonsRules", "BoutonsState",
    "BoutonsView", "ButtonsTaken", "CardFlipped", "DrawStarted", "Flip", "LaidOutCard",
    "ReserveToCentre", "RoundEnded",
]
