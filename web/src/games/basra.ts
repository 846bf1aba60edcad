// Basra at the table: your hand, the floor, every side's captures; a card that can take
// several sets of floor cards asks which.
import { GameKind, type Action, type GameView } from "../gen/tapis/v1/game_service_pb";
import type { Card } from "../gen/tapis/v1/cards_pb";
import { cardElement, cardId, cardText, sameCard } from "../cards";
import { h } from "../dom";
import type { GameScreen, TableContext } from "./screen";

let choosing: Card | undefined;
/** The card whose captures are offered (cleared when the view moves on). */

function plays(view: GameView, card: Card): Action[] {
  return view.legalActions.filter((a) => a.action.case === "basra"
    && a.action.value.action.case === "playCard" && sameCard(a.action.value.action.value.card, card));
}

function captureOf(action: Action): Card[] {
  if (action.action.case !== "basra" || action.action.value.action.case !== "playCard") return [];
  return action.action.value.action.value.capture?.cards ?? [];
}

function play(view: GameView, card: Card, context: TableContext, rerender: () => void): void {
  const options = plays(view, card);
  if (options.length === 1) {
    choosing = undefined;
    context.act(options[0]);
  } else if (options.length > 1) {
    choosing = card;
    rerender();
  }
}

export const basra: GameScreen = {
  kind: GameKind.BASRA,
  key: "basra",
  seatCounts: [2, 3, 4],
  render(view, context) {
    const basra = view.game.case === "basra" ? view.game.value : undefined;
    if (!basra) return h("div");
    const t = context.t;
    const root = h("div", { class: "basra" });
    const draw = (): void => {
      root.replaceChildren(...content());
    };
    const content = (): HTMLElement[] => {
      if (choosing && !plays(view, choosing).length) choosing = undefined;
      const sides = basra.sides.map((side) =>
        h("div", { class: "side" },
          h("div", { class: "name" }, side.seats.map((s) => context.name(s)).join(" + ")),
          h("div", {}, `${t.score} ${side.score}`),
          h("div", {}, t.captured(side.capturedCards)),
          h("div", {}, t.basras(side.basras))));
      const others = basra.playingSeats.filter((s) => s !== context.me).map((s) =>
        h("div", { class: "basra-player", "data-seat": String(s) },
          h("div", { class: "name" }, context.name(s)),
          h("div", {}, t.hand(basra.handSizes[s] ?? 0)),
          basra.toMove === s ? h("div", { class: "to-move-mark" }, "◀") : null));
      const hand = basra.hand.map((card) => cardElement(card, {
        role: "button", class: `card playable${choosing && sameCard(choosing, card) ? " chosen" : ""}`,
      }));
      hand.forEach((element, i) => element.addEventListener("click",
        () => play(view, basra.hand[i], context, draw)));
      const picker = choosing
        ? h("div", { class: "capture-picker", id: "capture-picker" },
            h("h3", {}, t.chooseCapture),
            plays(view, choosing).map((option) => {
              const taken = captureOf(option);
              return h("button", { class: "capture", "data-capture": taken.map(cardId).join(" "),
                                   onclick: () => { choosing = undefined; context.act(option); } },
                `${cardText(choosing!)} ${taken.length ? t.takes : t.takesNothing} `,
                taken.map((c) => cardElement(c)));
            }))
        : null;
      return [
        h("div", { class: "sides" }, sides),
        h("div", { class: "basra-others" }, others),
        h("div", { class: "floor-area" }, h("h3", {}, t.floor),
          h("div", { class: "floor", id: "floor" }, basra.floor.map((c) => cardElement(c))),
          h("div", { class: "stock" }, t.stock(basra.stockSize))),
        ...(picker ? [picker] : []),
        h("div", { class: "hand-area" }, h("h3", {}, t.yourHand),
          h("div", { class: "hand", id: "hand" }, hand)),
      ];
    };
    draw();
    return root;
  },
  describe(event, context) {
    if (event.body.case !== "basra") return null;
    const body = event.body.value.event;
    if (body.case === "captured") {
      const cards = [body.value.card, ...body.value.taken].filter((c) => c !== undefined);
      return context.t.took(context.name(body.value.seat), body.value.seat === context.me, cards.map(cardText).join(" "));
    }
    if (body.case === "basra") return context.t.basraBy(context.name(body.value.seat), body.value.seat === context.me);
    return null;
  },
};
