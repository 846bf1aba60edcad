// Basra at the table: your hand, the floor, every side's captures; a card that can take
// several sets of floor cards asks which.
import { GameKind, type Action, type GameView } from "@tapis/client/gen/tapis/v1/game_service_pb";
import { BasraVariant, type BasraDealScored } from "@tapis/client/gen/tapis/v1/basra_pb";
import { Rank, type Card } from "@tapis/client/gen/tapis/v1/cards_pb";
import { cardButton, cardElement, cardId, cardText, sameCard } from "../cards";
import { focusKey, h, refocus } from "../dom";
import type { GameScreen, LobbyChoices, TableContext } from "./screen";
import type { Texts } from "../i18n";

let choosing: Card | undefined;
/** The card whose captures are offered (cleared when the view moves on). */
let sheet: BasraDealScored | undefined;
/** The last deal's score sheet (from its event: the view keeps only the totals). */

/** Whether this move scores a basra by the variant's rules, judged on the floor shown (as the
 * terminal's makes_basra). */
function makesBasra(view: GameView, action: Action): boolean {
  const basra = view.game.case === "basra" ? view.game.value : undefined;
  if (!basra || action.action.case !== "basra" || action.action.value.action.case !== "playCard") return false;
  const play = action.action.value.action.value;
  const floor = basra.floor;
  if (!floor.length || !play.capture || play.capture.cards.length !== floor.length) return false;
  if (basra.variant === BasraVariant.LEBANESE) return floor.length === 1 && floor[0].rank === play.card?.rank;
  if (play.card?.rank === Rank.JACK) return floor.length === 1 || (basra.twoCardJackBasra && floor.length === 2);
  return true;
}

/** Every variant the contract names (unspecified is Egyptian, offered as such). */
const VARIANTS = Object.values(BasraVariant).filter(
  (v): v is BasraVariant => typeof v === "number" && v !== BasraVariant.UNSPECIFIED);
/** The variants the two-card jack basra cannot go with (docs/rulings.md: the server refuses
 * Lebanese with it, INVALID_OPTIONS). */
const NO_TWO_CARD_JACK = [BasraVariant.LEBANESE];
/** The points to win the rules name (the first is the default). */
const TARGETS = [101, 151];

function variantName(variant: BasraVariant, t: Texts): string {
  return t.basraVariants[variant === BasraVariant.UNSPECIFIED ? BasraVariant.EGYPTIAN : variant];
}

/** The lobby's Basra choices: the variant, the two-card jack basra (only with a variant that
 * allows it) and the points to win. */
function lobbyChoices(t: Texts): LobbyChoices {
  const variant = h("select", { class: "variant" }, VARIANTS.map((v) =>
    h("option", { value: String(v) }, variantName(v, t)))) as HTMLSelectElement;
  const jack = h("input", { type: "checkbox", class: "two-card-jack" }) as HTMLInputElement;
  const jackLabel = h("label", { class: "two-card-jack-choice" }, jack, " ", t.twoCardJack);
  const target = h("select", { class: "basra-target" }, TARGETS.map((n) =>
    h("option", { value: String(n) }, String(n)))) as HTMLSelectElement;
  const allowJack = (): void => {
    const refused = NO_TWO_CARD_JACK.includes(Number(variant.value));
    jack.disabled = refused;
    if (refused) jack.checked = false;
    jackLabel.classList.toggle("unavailable", refused);
  };
  variant.addEventListener("change", allowJack);
  allowJack();
  return {
    fields: [h("label", {}, t.variant, " ", variant), jackLabel, h("label", {}, t.pointsToWin, " ", target)],
    options: () => ({ case: "basra", value: {
      variant: Number(variant.value), twoCardJackBasra: jack.checked, target: Number(target.value) } }),
  };
}

/** The dealer's mark: a D in a disc, drawn by the page's style (no font lacks it). */
function dealerMark(title: string): HTMLElement {
  return h("span", { class: "dealer-mark", title }, "D");
}

function sheetTable(scored: BasraDealScored, context: TableContext): HTMLElement {
  const t = context.t;
  return h("section", { class: "deal-sheet", id: "deal-sheet" },
    h("h3", {}, t.dealSheet(scored.deal)),
    h("table", {},
      h("tr", {}, t.sheetHeaders.map((header) => h("th", {}, header))),
      scored.lines.map((line) => h("tr", { "data-side": String(line.side) },
        h("td", {}, line.seats.map((s) => context.name(s)).join(" & ")),
        [line.cards, line.mostCards, line.tenOfDiamonds, line.twoOfClubs, line.aces, line.jacks,
          line.basraPoints, line.points].map((n) => h("td", {}, String(n))),
        h("td", { class: "total" }, String(line.total))))),
    h("p", { class: "legend" }, t.sheetLegend));
}

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
  lobbyChoices,
  render(view, context) {
    const basra = view.game.case === "basra" ? view.game.value : undefined;
    if (!basra) return h("div");
    const t = context.t;
    const root = h("div", { class: "basra" });
    const draw = (): void => {
      const focused = focusKey(root);
      root.replaceChildren(...content());
      refocus(root, focused);
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
          h("div", { class: "name" }, context.name(s),
            basra.dealer === s ? dealerMark(t.dealer) : null),
          h("div", {}, t.hand(basra.handSizes[s] ?? 0)),
          basra.toMove === s ? h("div", { class: "to-move-mark" }, "◀") : null));
      const hand = basra.hand.map((card) => {
        const basraMove = plays(view, card).some((a) => makesBasra(view, a));
        return cardButton(card, {
          class: `playable${choosing && sameCard(choosing, card) ? " chosen" : ""}${basraMove ? " makes-basra" : ""}`,
          ...(basraMove ? { title: t.makesBasra } : {}),
        }, () => play(view, card, context, draw));
      });
      const picker = choosing
        ? h("div", { class: "capture-picker", id: "capture-picker" },
            h("h3", {}, t.chooseCapture),
            plays(view, choosing).map((option) => {
              const taken = captureOf(option);
              return h("button", { class: "capture", "data-capture": taken.map(cardId).join(" "),
                                   onclick: () => { choosing = undefined; context.act(option); } },
                `${cardText(choosing!)} ${taken.length ? t.takes : t.takesNothing} `,
                taken.map((c) => cardElement(c)),
                makesBasra(view, option) ? h("span", { class: "basra-flag" }, ` ${t.basraFlag}`) : null);
            }))
        : null;
      return [
        h("div", { class: "basra-rules", id: "basra-rules",
                   "data-variant": BasraVariant[basra.variant] ?? "", "data-target": String(basra.target) },
          t.basraRules(variantName(basra.variant, t), basra.target, basra.twoCardJackBasra)),
        h("div", { class: "sides" }, sides),
        h("div", { class: "basra-others" }, others),
        h("div", { class: "floor-area" }, h("h3", {}, t.floor),
          h("div", { class: "floor", id: "floor" }, basra.floor.map((c) => cardElement(c))),
          h("div", { class: "stock" }, t.stock(basra.stockSize))),
        ...(picker ? [picker] : []),
        h("div", { class: "hand-area" }, h("h3", {}, t.yourHand,
          basra.dealer === context.me ? dealerMark(t.dealer) : null),
          h("div", { class: "hand", id: "hand" }, hand),
          hand.some((c) => c.classList.contains("makes-basra"))
            ? h("p", { class: "basra-flag", id: "basra-flag" }, `${t.basraFlag} — ${t.makesBasra}`) : null),
        h("p", { class: "legend" }, dealerMark(t.dealer), ` ${t.dealer} · ${t.toMoveMark}`),
        ...(sheet ? [sheetTable(sheet, context)] : []),
      ];
    };
    draw();
    return root;
  },
  forget() {
    choosing = undefined;
    sheet = undefined;
  },
  see(event) {
    if (event.body.case === "gameStarted") sheet = undefined;
    if (event.body.case === "basra" && event.body.value.event.case === "dealScored") {
      sheet = event.body.value.event.value;
    }
  },
  endReason(view, context) {
    const basra = view.game.case === "basra" ? view.game.value : undefined;
    return basra?.over ? context.t.finalScore(basra.sides.map((s) => s.score).join(" – ")) : "";
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
