// La bataille des boutons at the table: each seat's laid-out cards with the buttons on them,
// the centre and the reserve; bets as buttons, flips with a button.
import { GameKind } from "../gen/tapis/v1/game_service_pb";
import { BoutonsPhase, type BoutonsButtonPile } from "../gen/tapis/v1/boutons_pb";
import { cardElement, cardText } from "../cards";
import { h } from "../dom";
import type { GameScreen, TableContext } from "./screen";

function piles(buttons: BoutonsButtonPile[], context: TableContext): HTMLElement {
  return h("span", { class: "buttons" }, buttons.filter((b) => b.count > 0).map((b) =>
    h("span", { class: `button-pile colour-${b.colour}`, title: context.t.colours[b.colour] },
      `●×${b.count}`)));
}

export const boutons: GameScreen = {
  kind: GameKind.BOUTONS,
  key: "boutons",
  seatCounts: [2, 3, 4],
  render(view, context) {
    const boutons = view.game.case === "boutons" ? view.game.value : undefined;
    if (!boutons) return h("div");
    const t = context.t;
    const players = boutons.players.map((player) =>
      h("div", { class: `boutons-player${boutons.toMove === player.seat ? " to-move" : ""}`,
                 "data-seat": String(player.seat) },
        h("div", { class: "name" }, context.name(player.seat)),
        piles(player.buttons, context),
        h("div", { class: "laid-out" }, player.cards.map((laid) =>
          h("div", { class: "laid" }, cardElement(laid.card), piles(laid.buttons, context))))));
    const actions = view.legalActions.map((action) => {
      if (action.action.case !== "boutons") return null;
      const inner = action.action.value.action;
      if (inner.case === "flip") {
        return h("button", { class: "primary", id: "flip", onclick: () => context.act(action) }, t.flip);
      }
      if (inner.case === "bet") {
        const bet = inner.value;
        return h("button", { class: "bet", onclick: () => context.act(action) },
          `${t.bet} ${t.colours[bet.colour]} ${t.betOn} ${bet.card ? cardText(bet.card) : ""}`);
      }
      return null;
    });
    return h("div", { class: "boutons" },
      h("div", { class: "round" }, t.round(boutons.round, boutons.rounds), " · ",
        boutons.phase === BoutonsPhase.BETTING ? t.betting : t.drawing),
      h("div", { class: "centre" }, t.centre(boutons.centre), " · ", t.reserve(boutons.reserve)),
      boutons.lastFlip ? h("div", { class: "last-flip" }, t.lastFlip, " ", cardElement(boutons.lastFlip)) : null,
      h("div", { class: "boutons-table" }, players),
      h("div", { class: "actions" }, actions));
  },
  describe() {
    return null;
  },
};
