// Bataille corse at the table: the pile's top cards, every deck, the challenge; flip with a
// button, slap with the space bar, a click on the pile or the button.
import { BatailleCorseSeatStatus } from "../gen/tapis/v1/bataille_corse_pb";
import { GameKind, type GameView } from "../gen/tapis/v1/game_service_pb";
import { cardElement } from "../cards";
import { h } from "../dom";
import type { GameScreen, TableContext } from "./screen";

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
    const pile = h("div", { class: "pile", id: "pile", onclick: () => act(view, "slap", context) },
      corse.pileTop.slice(-4).map((card) => cardElement(card)));
    return h("div", { class: "corse" },
      h("div", { class: "corse-table" }, seats),
      pile,
      h("div", { class: "pile-size" }, t.pile(corse.pileSize)),
      corse.challenger !== undefined && corse.turn !== undefined
        ? h("div", { class: "challenge" }, t.challenge(context.name(corse.turn), corse.triesLeft))
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
  keyPressed(key, view, context) {
    if (key === " ") return act(view, "slap", context);
    if (key === "Enter") return act(view, "flip", context);
    return false;
  },
};
