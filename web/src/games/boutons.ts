// La bataille des boutons at the table: each seat's laid-out cards with the buttons on them,
// the centre and the reserve. To bet, pick one of your colours, then one of your cards.
import { GameKind, type Action, type GameView } from "@tapis/client/gen/tapis/v1/game_service_pb";
import { BoutonsPhase, type BoutonsButtonPile } from "@tapis/client/gen/tapis/v1/boutons_pb";
import { cardButton, cardElement, sameCard } from "../cards";
import type { Card } from "@tapis/client/gen/tapis/v1/cards_pb";
import { focusKey, h, refocus } from "../dom";
import type { GameScreen, LobbyChoices, TableContext } from "./screen";
import type { Texts } from "../i18n";

/** The rounds the lobby offers (6 is the server's default; it takes 1 to 100). */
const ROUNDS = [3, 6, 10];

/** The lobby's choice of rounds to play. */
function lobbyChoices(t: Texts): LobbyChoices {
  const rounds = h("select", { class: "rounds" }, ROUNDS.map((n) =>
    h("option", { value: String(n) }, String(n)))) as HTMLSelectElement;
  rounds.value = "6";
  return {
    fields: [h("label", {}, t.rounds, " ", rounds)],
    options: () => ({ case: "boutons", value: { rounds: Number(rounds.value) } }),
  };
}

let colour: number | undefined;
/** The colour picked for the next bet (kept while it can still be bet). */
let outOfButtons: number | undefined;
/** The seat that had no button left to bet, this game (betting stopped). */

/** Each colour's own shape, as the terminal draws them (a colour-blind player tells them apart):
 * red ●, blue ■, green ▲, yellow ◆, black ▼, white ○, orange ◐, purple ✚, reserve ◎. */
export const SHAPES = ["", "●", "■", "▲", "◆", "▼", "○", "◐", "✚", "◎"];

function piles(buttons: BoutonsButtonPile[], context: TableContext): HTMLElement {
  return h("span", { class: "buttons" }, buttons.filter((b) => b.count > 0).map((b) =>
    h("span", { class: `button-pile colour-${b.colour}`, "data-shape": SHAPES[b.colour] ?? "◌",
                title: context.t.colours[b.colour] },
      `${SHAPES[b.colour] ?? "◌"}×${b.count}`)));
}

/** A player's score as its product: "●3 × ■2 = 6". */
function product(buttons: BoutonsButtonPile[]): string {
  return buttons.filter((b) => b.count > 0).map((b) => `${SHAPES[b.colour] ?? "◌"}${b.count}`)
    .join(" × ") || "0";
}

function bets(view: GameView): Action[] {
  return view.legalActions.filter((a) => a.action.case === "boutons" && a.action.value.action.case === "bet");
}

function betOf(action: Action): { colour: number; card: Card | undefined } {
  const inner = action.action.case === "boutons" ? action.action.value.action : undefined;
  return inner?.case === "bet" ? { colour: inner.value.colour, card: inner.value.card } : { colour: 0, card: undefined };
}

export const boutons: GameScreen = {
  kind: GameKind.BOUTONS,
  key: "boutons",
  seatCounts: [2, 3, 4],
  lobbyChoices,
  render(view, context) {
    const boutons = view.game.case === "boutons" ? view.game.value : undefined;
    if (!boutons) return h("div");
    const t = context.t;
    const legal = bets(view);
    const colours = [...new Set(legal.map((a) => betOf(a).colour))];
    if (colour === undefined || !colours.includes(colour)) colour = colours[0];
    const root = h("div", { class: "boutons" });
    const draw = (): void => {
      const players = boutons.players.map((player) =>
        h("div", { class: `boutons-player${boutons.toMove === player.seat ? " to-move" : ""}`,
                   "data-seat": String(player.seat) },
          h("div", { class: "name" }, context.name(player.seat)),
          piles(player.buttons, context),
          h("div", { class: "player-score", "data-score": String(player.score) },
            t.playerScore(product(player.buttons), Number(player.score))),
          h("div", { class: "laid-out" }, player.cards.map((laid) => {
            const bet = legal.find((a) => betOf(a).colour === colour && sameCard(betOf(a).card, laid.card));
            const card = bet && laid.card ? cardButton(laid.card, { class: "playable" }, () => context.act(bet))
              : cardElement(laid.card);
            return h("div", { class: "laid" }, card, piles(laid.buttons, context));
          }))));
      const flip = view.legalActions.find((a) => a.action.case === "boutons" && a.action.value.action.case === "flip");
      const focused = focusKey(root);
      root.replaceChildren(
        h("div", { class: "round", id: "boutons-round", "data-rounds": String(boutons.rounds) }, t.round(boutons.round, boutons.rounds), " · ",
          boutons.phase === BoutonsPhase.BETTING ? t.betting : t.drawing),
        h("div", { class: "centre" }, t.centre(boutons.centre), " · ", t.reserve(boutons.reserve)),
        h("div", { class: "product-rule", id: "product-rule" }, t.productRule),
        boutons.lastFlip ? h("div", { class: "last-flip" }, t.lastFlip, " ", cardElement(boutons.lastFlip)) : "",
        h("div", { class: "boutons-table" }, players),
        h("div", { class: "actions" },
          colours.length ? h("span", { class: "bet-hint" }, t.bet) : null,
          colours.map((c) => h("button", {
            class: `colour-choice colour-${c}${c === colour ? " chosen" : ""}`, "data-colour": String(c),
            onclick: () => { colour = c; draw(); } }, `${SHAPES[c] ?? "◌"} ${t.colours[c]}`)),
          flip ? h("button", { class: "primary", id: "flip", onclick: () => context.act(flip) }, t.flip) : null));
      refocus(root, focused);
    };
    draw();
    return root;
  },
  describe() {
    return null;
  },
  forget() {
    colour = undefined;
    outOfButtons = undefined;
  },
  see(event) {
    if (event.body.case === "gameStarted") outOfButtons = undefined;
    if (event.body.case === "boutons" && event.body.value.event.case === "bettingStopped") {
      outOfButtons = event.body.value.event.value.seat;
    }
  },
  endReason(view, context) {
    const boutons = view.game.case === "boutons" ? view.game.value : undefined;
    if (!boutons) return "";
    return context.t.boutonsEnd(boutons.endReason,
      outOfButtons !== undefined ? context.name(outOfButtons) : undefined, outOfButtons === context.me);
  },
  keyPressed(key, view, context) {
    if (key !== "Enter") return false;
    const flip = view.legalActions.find((a) => a.action.case === "boutons" && a.action.value.action.case === "flip");
    if (!flip) return false;
    context.act(flip);
    return true;
  },
};
