// Bataille at the table: both deck sizes, the trick in play and the last one, "Bataille !"
// beside each player while a bataille is being played.
import { GameKind, type Event, type GameView } from "@tapis/client/gen/tapis/v1/game_service_pb";
import type { WarLaidCard } from "@tapis/client/gen/tapis/v1/war_pb";
import { cardElement } from "../cards";
import { h } from "../dom";
import type { GameScreen, LobbyChoices, TableContext } from "./screen";
import type { Texts } from "../i18n";

/** The points to win the lobby offers (the last is the server's default; it takes 1 to
 * 10,000). */
const TARGETS = [10, 25, 50];

/** The lobby's War choice: the points to win. */
function lobbyChoices(t: Texts): LobbyChoices {
  const target = h("select", { class: "war-target" }, TARGETS.map((n) =>
    h("option", { value: String(n) }, String(n)))) as HTMLSelectElement;
  target.value = String(TARGETS[TARGETS.length - 1]);
  return {
    fields: [h("label", {}, t.pointsToWin, " ", target)],
    options: () => ({ case: "war", value: { targetPoints: Number(target.value) } }),
  };
}

function trick(cards: WarLaidCard[], seat: number): HTMLElement {
  return h("div", { class: "trick-cards" },
    cards.filter((c) => c.seat === seat).map((c) => cardElement(c.faceUp ? c.card : undefined)));
}

function player(view: GameView, seat: number, context: TableContext): HTMLElement {
  const war = view.game.case === "war" ? view.game.value : undefined!;
  const t = context.t;
  const toMove = war.toMove === seat;
  return h("div", { class: `war-player${toMove ? " to-move" : ""}`, "data-seat": String(seat) },
    h("div", { class: "name" }, context.name(seat)),
    h("div", { class: "deck-size", "data-deck": String(war.deckSizes[seat] ?? 0) },
      h("span", { class: "deck-pile" }, cardElement(undefined)),
      h("span", {}, t.deck(war.deckSizes[seat] ?? 0))),
    h("div", { class: "points" }, t.points(war.points[seat] ?? 0)),
    war.batailles > 0 ? h("div", { class: "bubble bataille-bubble" }, t.bataille) : null,
    h("div", { class: "trick" }, trick(war.trick, seat)),
  );
}

export const war: GameScreen = {
  kind: GameKind.WAR,
  key: "war",
  seatCounts: [2],
  lobbyChoices,
  render(view, context) {
    const war = view.game.case === "war" ? view.game.value : undefined;
    if (!war) return h("div");
    const t = context.t;
    const seats = war.deckSizes.map((_, seat) => seat);
    const canReveal = view.legalActions.some((a) => a.action.case === "war");
    return h("div", { class: "war" },
      h("div", { class: "target" }, t.target(war.targetPoints)),
      h("div", { class: "war-table" }, seats.map((seat) => player(view, seat, context))),
      canReveal
        ? h("button", { class: "primary", id: "reveal", onclick: () => context.act(
            { action: { case: "war", value: { action: { case: "reveal", value: {} } } } }) },
          t.reveal)
        : null,
      h("div", { class: "last-trick" },
        h("h3", {}, t.lastTrick),
        war.lastTrick.length
          ? h("div", { class: "last-trick-cards" },
              seats.map((seat) => h("span", { class: "laid-by", "data-seat": String(seat) },
                h("span", { class: "who" }, context.name(seat)),
                trick(war.lastTrick, seat))),
              war.lastTrickWinner !== undefined
                ? h("span", { class: "winner" }, t.tookTrick(context.name(war.lastTrickWinner), war.lastTrickWinner === context.me))
                : null)
          : h("div", { class: "none" }, "—")),
    );
  },
  describe(event: Event, context) {
    if (event.body.case !== "war") return null;
    const body = event.body.value.event;
    if (body.case === "bataille") return context.t.bataille;
    if (body.case === "trickWon") return context.t.tookTrick(context.name(body.value.seat), body.value.seat === context.me);
    return null;
  },
  endReason(view, context) {
    const war = view.game.case === "war" ? view.game.value : undefined;
    return war ? context.t.warEnd(war.endReason, war.targetPoints) : "";
  },
  keyPressed(key, view, context) {
    if (key !== " " && key !== "Enter") return false;
    if (!view.legalActions.some((a) => a.action.case === "war")) return false;
    context.act({ action: { case: "war", value: { action: { case: "reveal", value: {} } } } });
    return true;
  },
};
