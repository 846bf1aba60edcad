// Bataille corse at the table: the pile's top cards, every deck, the challenge; flip with a
// button, slap with the space bar, a click on the pile or the button.
import { BatailleCorseCombination, BatailleCorsePileReason, BatailleCorseSeatStatus }
  from "@tapis/client/gen/tapis/v1/bataille_corse_pb";
import type { Card } from "@tapis/client/gen/tapis/v1/cards_pb";
import { GameKind, type Event, type GameView } from "@tapis/client/gen/tapis/v1/game_service_pb";
import { cardElement, cardText } from "../cards";
import { h } from "../dom";
import type { GameScreen, LobbyChoices, TableContext } from "./screen";
import type { Texts } from "../i18n";

/** How many of the top cards make each combination (the caption shows them). */
const COMBINATION_CARDS = [0, 2, 3, 4, 2, 2, 1];

/** Every combination the contract names. */
const COMBINATIONS = Object.values(BatailleCorseCombination).filter(
  (c): c is BatailleCorseCombination => typeof c === "number" && c !== BatailleCorseCombination.UNSPECIFIED);

/** The flip caps the lobby offers: the cards flipped after which the game ends, most cards
 * winning (the last is the server's default; it takes 1 to 1,000,000). */
const FLIP_CAPS = [300, 1000, 10000];

/** The lobby's choice of combinations (one box each, all on: the server takes any of them off,
 * all six included) and of the flip cap. */
function lobbyChoices(t: Texts): LobbyChoices {
  const boxes = COMBINATIONS.map((c) => h("input", {
    type: "checkbox", class: "combination", "data-combination": BatailleCorseCombination[c] ?? "",
    checked: "" }) as HTMLInputElement);
  const cap = h("select", { class: "flip-cap" }, FLIP_CAPS.map((n) =>
    h("option", { value: String(n) }, String(n)))) as HTMLSelectElement;
  cap.value = String(FLIP_CAPS[FLIP_CAPS.length - 1]);
  return {
    fields: [h("fieldset", { class: "combination-choices" }, h("legend", {}, t.slapCombinations),
      boxes.map((box, i) => h("label", {}, box, " ", t.combinations[COMBINATIONS[i]!] ?? ""))),
      h("label", {}, t.flipCap, " ", cap)],
    options: () => ({ case: "batailleCorse", value: {
      disabledCombinations: COMBINATIONS.filter((_, i) => !boxes[i]!.checked),
      flipCap: Number(cap.value) } }),
  };
}

/** The face-up pile as the events built it, when its top card came (server ms), and the last
 * pile taken: who, why, which cards, how fast (seconds after the top card, for a slap). */
const pile: Card[] = [];
let topAt: number | undefined;
let caption: { seat: number; reason: number; combination: number; cards: Card[];
               seconds?: number } | undefined;

function eventMs(event: Event): number | undefined {
  return event.time ? Number(event.time.seconds) * 1000 + event.time.nanos / 1e6 : undefined;
}

function legal(view: GameView, which: "flip" | "slap") {
  return view.legalActions.find(
    (a) => a.action.case === "batailleCorse" && a.action.value.action.case === which);
}

function act(view: GameView, which: "flip" | "slap", context: TableContext): boolean {
  const action = legal(view, which);
  if (!action) return false;
  context.act(action);
  return true;
}

export const corse: GameScreen = {
  kind: GameKind.BATAILLE_CORSE,
  key: "corse",
  seatCounts: [2, 3, 4, 5, 6],
  lobbyChoices,
  render(view, context) {
    const corse = view.game.case === "batailleCorse" ? view.game.value : undefined;
    if (!corse) return h("div");
    const t = context.t;
    const seats = corse.seats.map((seat) =>
      h("div", { class: `corse-player${corse.turn === seat.seat ? " to-move" : ""}`,
                 "data-seat": String(seat.seat) },
        h("div", { class: "name" }, context.name(seat.seat)),
        h("div", { class: "deck-size", "data-deck": String(seat.deckSize) }, t.deck(seat.deckSize)),
        seat.status === BatailleCorseSeatStatus.ELIMINATED ? h("div", { class: "status" }, t.eliminated) : null,
        seat.status === BatailleCorseSeatStatus.OUT ? h("div", { class: "status" }, t.out) : null));
    const pileShown = h("div", { class: "pile", id: "pile", onclick: () => act(view, "slap", context) },
      corse.pileTop.slice(-4).map((card) => cardElement(card)));
    const said = caption
      ? t.slapCaption(context.name(caption.seat), caption.seat === context.me,
        caption.reason === BatailleCorsePileReason.COMBINATION
          ? t.combinations[caption.combination] ?? "" : t.pileReasons[caption.reason] ?? "",
        caption.cards.map(cardText).join(" "), caption.seconds)
      : "";
    const off = COMBINATIONS.filter((c) => !corse.combinations.includes(c));
    return h("div", { class: "corse" },
      off.length
        ? h("div", { class: "combinations-off", id: "combinations-off",
                     "data-off": off.map((c) => BatailleCorseCombination[c]).join(" ") },
          t.combinationsOff(off.map((c) => t.combinations[c] ?? "").join(", ")))
        : null,
      h("div", { class: "corse-table" }, seats),
      pileShown,
      h("div", { class: "slap-caption", id: "slap-caption" }, said),
      h("div", { class: "pile-size" }, t.pile(corse.pileSize)),
      h("div", { class: "flips", id: "corse-flips", "data-flips": String(corse.flips),
                 "data-cap": String(corse.flipCap) }, t.flips(corse.flips, corse.flipCap)),
      corse.challenger !== undefined && corse.turn !== undefined
        ? h("div", { class: "challenge" }, corse.turn === context.me ? t.challengeYou(corse.triesLeft)
          : t.challenge(context.name(corse.turn), corse.triesLeft))
        : null,
      h("div", { class: "actions" },
        legal(view, "flip")
          ? h("button", { class: "primary", id: "flip", onclick: () => act(view, "flip", context) }, t.flip)
          : null,
        legal(view, "slap")
          ? h("button", { id: "slap", onclick: () => act(view, "slap", context) }, t.slap)
          : null));
  },
  describe(event, context) {
    if (event.body.case !== "batailleCorse") return null;
    const body = event.body.value.event;
    if (body.case === "pileWon") return context.t.pileWon(context.name(body.value.seat), body.value.seat === context.me, body.value.cards);
    if (body.case === "falseSlap") return context.t.falseSlap(context.name(body.value.seat), body.value.seat === context.me);
    return null;
  },
  forget() {
    pile.length = 0;
    topAt = undefined;
    caption = undefined;
  },
  see(event) {
    if (event.body.case === "gameStarted") corse.forget!();
    if (event.body.case !== "batailleCorse") return;
    const body = event.body.value.event;
    if (body.case === "cardFlipped" && body.value.card) {
      pile.push(body.value.card);
      topAt = eventMs(event);
    }
    if (body.case === "pileWon") {
      const won = body.value;
      const slapped = won.reason === BatailleCorsePileReason.COMBINATION;
      const shown = slapped ? pile.slice(-(COMBINATION_CARDS[won.combination] ?? 0)) : [];
      const at = eventMs(event);
      const seconds = slapped && at !== undefined && topAt !== undefined
        ? Math.max(0, at - topAt) / 1000 : undefined;
      caption = { seat: won.seat, reason: won.reason, combination: won.combination, cards: shown,
                  seconds };
      pile.length = 0;
      topAt = undefined;
    }
  },
  endReason(view, context) {
    const corse = view.game.case === "batailleCorse" ? view.game.value : undefined;
    return corse ? context.t.corseEnd(corse.endReason) : "";
  },
  keyPressed(key, view, context) {
    if (key === " ") return act(view, "slap", context);
    if (key === "Enter") return act(view, "flip", context);
    return false;
  },
};
