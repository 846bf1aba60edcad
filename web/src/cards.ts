// Cards as the table shows them.
import { Rank, Suit, type Card } from "@tapis/client/gen/tapis/v1/cards_pb";
import { h } from "./dom";
import { ui } from "./app";

/** The letters of the court cards in the data attributes (the same in every language). */
const RANKS: Record<number, string> = {
  [Rank.JACK]: "J", [Rank.QUEEN]: "Q", [Rank.KING]: "K", [Rank.ACE]: "A", [Rank.JOKER]: "★",
};
const SUITS: Record<number, string> = {
  [Suit.CLUBS]: "♣", [Suit.DIAMONDS]: "♦", [Suit.HEARTS]: "♥", [Suit.SPADES]: "♠",
};

/** The card as the reader's language writes it: ``D♥`` in French, ``Q♥`` in English. */
export function cardText(card: Card): string {
  const rank = ui.t.ranks[card.rank] ?? RANKS[card.rank] ?? String(card.rank);
  return card.rank === Rank.JOKER ? rank : rank + (SUITS[card.suit] ?? "");
}

/** The card's id in the page (``data-card``): the same in every language, ``Q♥``. */
export function cardId(card: Card): string {
  const rank = RANKS[card.rank] ?? String(card.rank);
  return card.rank === Rank.JOKER ? rank : rank + (SUITS[card.suit] ?? "");
}

export function sameCard(a: Card | undefined, b: Card | undefined): boolean {
  return !!a && !!b && a.rank === b.rank && a.suit === b.suit;
}

export function isRed(card: Card): boolean {
  return card.suit === Suit.HEARTS || card.suit === Suit.DIAMONDS;
}

/** A face-up card, or a face-down one when `card` is absent. A `class` in `extra` adds to the
 * card's own classes ("card", "red", "back"), never replaces them. */
export function cardElement(card: Card | undefined, extra: Record<string, string> = {}): HTMLElement {
  const { class: more, ...rest } = extra;
  const classes = ["card", !card ? "back" : isRed(card) ? "red" : "",
    ...(more ?? "").split(" ").filter((c) => c && c !== "card")].filter(Boolean).join(" ");
  if (!card) return h("span", { ...rest, class: classes }, "");
  return h("span", { "data-card": cardId(card), ...rest, class: classes },
    cardText(card));
}

/** A face-up card the player can play: a real button (reached by Tab, played with Enter or
 * Space), drawn as the card. */
export function cardButton(card: Card, extra: Record<string, string>, play: () => void): HTMLElement {
  const shown = cardElement(card, extra);
  const button = h("button", { type: "button", onclick: play }, ...shown.childNodes);
  for (const attribute of shown.attributes) button.setAttribute(attribute.name, attribute.value);
  return button;
}
