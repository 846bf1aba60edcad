// Cards as the table shows them.
import { Rank, Suit, type Card } from "./gen/tapis/v1/cards_pb";
import { h } from "./dom";

const RANKS: Record<number, string> = {
  [Rank.JACK]: "J", [Rank.QUEEN]: "Q", [Rank.KING]: "K", [Rank.ACE]: "A", [Rank.JOKER]: "★",
};
const SUITS: Record<number, string> = {
  [Suit.CLUBS]: "♣", [Suit.DIAMONDS]: "♦", [Suit.HEARTS]: "♥", [Suit.SPADES]: "♠",
};

export function cardText(card: Card): string {
  const rank = RANKS[card.rank] ?? String(card.rank);
  return card.rank === Rank.JOKER ? rank : rank + (SUITS[card.suit] ?? "");
}

export function sameCard(a: Card | undefined, b: Card | undefined): boolean {
  return !!a && !!b && a.rank === b.rank && a.suit === b.suit;
}

/** A face-up card, or a face-down one when `card` is absent. */
export function cardElement(card: Card | undefined, extra: Record<string, string> = {}): HTMLElement {
  if (!card) return h("span", { class: "card back", ...extra }, "");
  const red = card.suit === Suit.HEARTS || card.suit === Suit.DIAMONDS;
  return h("span", { class: `card${red ? " red" : ""}`, "data-card": cardText(card), ...extra },
    cardText(card));
}
