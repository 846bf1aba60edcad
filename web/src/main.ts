// The web client: a lobby to start a game against the computer (or join a table), and the
// table, drawn from the server's view of it and redrawn as its events arrive.
import { timestampDate } from "@bufbuild/protobuf/wkt";
import {
  GameStatus,
  SeatType,
  type Event,
  type GameView,
} from "./gen/tapis/v1/game_service_pb";
import { h } from "./dom";
import { GAMES, screenFor } from "./games/index";
import type { ActionInit, TableContext } from "./games/screen";
import { chosenLanguage, texts, type Language, type Texts } from "./i18n";
import { GameSocket, Refusal } from "./socket";

const app = document.getElementById("app")!;
const socket = new GameSocket(`${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}/ws`);
let language: Language = chosenLanguage();
let t: Texts = texts(language);

interface SeatKey {
  seat: number;
  token: string;
}

function seatKey(gameId: string): SeatKey | undefined {
  const stored = localStorage.getItem(`tapis.seat.${gameId}`);
  return stored ? (JSON.parse(stored) as SeatKey) : undefined;
}

function requestId(): string {
  return crypto.randomUUID ? crypto.randomUUID()
    : Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}

function message(error: unknown): string {
  if (error instanceof Refusal) return t.refusals[error.reason] ?? error.message;
  return String(error);
}

// --- the banner: connection state and errors -------------------------------------------------

const banner = h("div", { id: "banner", class: "banner", hidden: "" });
function say(text: string | null, kind = "info"): void {
  if (text === null) {
    banner.setAttribute("hidden", "");
    return;
  }
  banner.removeAttribute("hidden");
  banner.className = `banner ${kind}`;
  banner.textContent = text;
}
socket.onState = (state) => {
  document.body.dataset.socket = state;
  if (state === "closed") say(t.reconnecting, "warning");
  else if (state === "open") {
    say(null);
    table?.refresh();
  }
};

// --- the lobby -------------------------------------------------------------------------------

function languageToggle(): HTMLElement {
  return h("button", { class: "language", id: "language", onclick: () => {
    language = language === "fr" ? "en" : "fr";
    localStorage.setItem("tapis.lang", language);
    t = texts(language);
    document.documentElement.lang = language;
    route();
  } }, t.language);
}

function lobby(): HTMLElement {
  const name = h("input", { id: "name", value: localStorage.getItem("tapis.name") ?? t.defaultName,
                            maxlength: "40" }) as HTMLInputElement;
  const games = GAMES.map((game) => {
    const seats = h("select", { class: "seats" },
      game.seatCounts.map((n) => h("option", { value: String(n) }, String(n)))) as HTMLSelectElement;
    const timer = h("select", { class: "timer" },
      [0, 15, 30, 60].map((s) => h("option", { value: String(s) }, s ? t.seconds(s) : t.noLimit))) as HTMLSelectElement;
    timer.value = "30";
    const start = async (): Promise<void> => {
      localStorage.setItem("tapis.name", name.value);
      const count = Number(seats.value);
      try {
        const created = await socket.call({ case: "createGame", value: {
          kind: game.kind, seats: count, turnTimeLimitMs: Number(timer.value) * 1000,
          requestId: requestId(),
          seatConfigs: Array.from({ length: count }, (_, seat) =>
            ({ type: seat === 0 ? SeatType.PERSON : SeatType.BOT })),
        } });
        if (created.case !== "createGame") return;
        await join(created.value.game!.gameId, name.value, 0);
      } catch (error) {
        say(message(error), "error");
      }
    };
    return h("section", { class: `game-choice ${game.key}`, "data-game": game.key },
      h("h2", {}, t.games[game.key]),
      h("label", {}, t.players, " ", seats),
      h("label", {}, t.turnTime, " ", timer),
      h("button", { class: "primary play", onclick: start }, t.playComputer));
  });
  const tableId = h("input", { id: "table-id", placeholder: t.tableId }) as HTMLInputElement;
  return h("main", { class: "lobby" },
    h("header", {}, h("h1", {}, t.title), languageToggle()),
    h("label", { class: "name" }, t.yourName, " ", name),
    h("h2", {}, t.chooseGame),
    h("div", { class: "games" }, games),
    h("form", { class: "join", onsubmit: (event) => {
      event.preventDefault();
      if (tableId.value.trim()) location.hash = `#/join/${tableId.value.trim()}`;
    } }, h("h2", {}, t.joinTable), tableId, h("button", { type: "submit" }, t.join)));
}

async function join(gameId: string, displayName: string, seat?: number): Promise<void> {
  const joined = await socket.call({ case: "joinGame", value: {
    gameId, displayName, seat, requestId: requestId() } });
  if (joined.case !== "joinGame") return;
  localStorage.setItem(`tapis.seat.${gameId}`,
    JSON.stringify({ seat: joined.value.seat, token: joined.value.seatToken }));
  location.hash = `#/table/${gameId}`;
}

// --- the table -------------------------------------------------------------------------------

class Table {
  view: GameView | undefined;
  lastSequence = 0n;
  log: string[] = [];
  seriesOpen = false;
  refreshing = false;
  stale = false;
  root = h("main", { class: "table" });
  ticker = window.setInterval(() => this.tick(), 250);

  constructor(readonly gameId: string, readonly key: SeatKey | undefined) {}

  get token(): string {
    return this.key?.token ?? "";
  }

  async start(): Promise<void> {
    await this.refresh();
    if (this.view) {
      await socket.follow(this.gameId, this.token, this.view.lastSequence, (batch) =>
        this.received(batch.events));
    }
  }

  stop(): void {
    window.clearInterval(this.ticker);
    socket.unfollow(this.gameId);
  }

  received(events: Event[]): void {
    for (const event of events) {
      if (event.sequence <= this.lastSequence) continue;
      this.lastSequence = event.sequence;
      const line = this.view ? screenFor(this.view.kind)?.describe(event, this.context()) : null;
      if (line) this.log = [line, ...this.log].slice(0, 6);
      if (event.body.case === "gameEnded") this.seriesOpen = true;
    }
    void this.refresh();
  }

  /** Read the view again (one read at a time; a change meanwhile reads once more). */
  async refresh(): Promise<void> {
    if (this.refreshing) {
      this.stale = true;
      return;
    }
    this.refreshing = true;
    try {
      do {
        this.stale = false;
        const answer = await socket.call({ case: "getGame", value: { gameId: this.gameId } }, this.token);
        if (answer.case === "getGame" && answer.value.game) {
          const view = answer.value.game;
          if (!this.view || view.version >= this.view.version) this.view = view;
          if (view.lastSequence > this.lastSequence) this.lastSequence = view.lastSequence;
        }
      } while (this.stale);
      this.draw();
    } catch (error) {
      if (!(error instanceof Refusal && error.reason === "DISCONNECTED")) say(message(error), "error");
    } finally {
      this.refreshing = false;
    }
  }

  act(action: ActionInit): void {
    socket.call({ case: "submitAction", value: {
      gameId: this.gameId, action, requestId: requestId() } }, this.token)
      .then(() => this.refresh())
      .catch((error) => say(message(error), "error"));
  }

  context(): TableContext {
    const view = this.view;
    return {
      t,
      me: view?.yourSeat,
      name: (seat) => {
        if (seat === view?.yourSeat) return t.you;
        const shown = view?.seats[seat];
        if (shown?.displayName) return shown.displayName;
        if (shown?.type !== SeatType.BOT) return t.seat(seat);
        const bots = view!.seats.filter((s) => s.type === SeatType.BOT).length;
        return bots > 1 ? `${t.computer} ${seat + 1}` : t.computer;
      },
      act: (action) => this.act(action),
    };
  }

  tick(): void {
    for (const element of this.root.querySelectorAll<HTMLElement>("[data-expires]")) {
      const left = Math.max(0, Math.ceil((Number(element.dataset.expires) - Date.now()) / 1000));
      element.textContent = t.countdown(left);
    }
  }

  status(view: GameView, context: TableContext): HTMLElement {
    const t0 = context.t;
    if (view.status === GameStatus.WAITING_FOR_PLAYERS) {
      const link = `${location.origin}/#/join/${view.gameId}`;
      return h("div", { class: "status" }, t0.waiting, " — ", t0.invite, ": ",
        h("a", { href: link }, link));
    }
    const lines: (HTMLElement | string)[] = [];
    for (const seat of view.awaitingSeats) {
      lines.push(h("span", { class: "awaiting" },
        seat === view.yourSeat ? t0.yourTurn : t0.theirTurn(context.name(seat))));
    }
    for (const deadline of view.deadlines) {
      if (!deadline.expireTime) continue;
      lines.push(h("span", { class: "countdown", "data-seat": String(deadline.seat),
                             "data-expires": String(timestampDate(deadline.expireTime).getTime()) }, ""));
    }
    const mine = view.yourSeat !== undefined ? view.seats[view.yourSeat] : undefined;
    if (mine?.botControlled && mine.type === SeatType.PERSON) lines.push(h("span", {}, t0.botPlaysYou));
    const reclaim = view.legalActions.find((a) => a.action.case === "reclaimSeat");
    if (reclaim) {
      lines.push(h("button", { id: "reclaim", onclick: () => this.act(reclaim) }, t0.reclaim));
    }
    const next = view.legalActions.find((a) => a.action.case === "startNextGame");
    if (next && !this.seriesOpen) {
      lines.push(h("button", { class: "primary", id: "start-next", onclick: () => this.act(next) },
        t0.nextGame));
    }
    return h("div", { class: "status" }, lines);
  }

  seriesWindow(view: GameView, context: TableContext): HTMLElement | null {
    if (!this.seriesOpen || !view.series.length) return null;
    const t0 = context.t;
    const last = view.series[view.series.length - 1];
    const verdict = !last.winners.length ? t0.draw
      : last.winners.includes(view.yourSeat ?? -1) ? t0.youWon
        : t0.won(last.winners.map((s) => context.name(s)).join(", "));
    const seats = view.seats.map((s) => s.seat);
    const next = view.legalActions.find((a) => a.action.case === "startNextGame");
    return h("div", { class: "modal", id: "series" },
      h("div", { class: "window" },
        h("h2", {}, t0.gameOver),
        h("p", { class: "verdict" }, verdict),
        h("h3", {}, t0.series),
        h("table", {},
          h("tr", {}, h("th", {}, ""), seats.map((s) => h("th", {}, context.name(s)))),
          view.series.map((game) => h("tr", {},
            h("td", {}, t0.game(game.gameNumber)),
            seats.map((s) => h("td", { class: game.winners.includes(s) ? "won" : "" },
              String(game.scores[s] ?? ""))))),
          h("tr", { class: "wins" }, h("td", {}, t0.wins),
            seats.map((s) => h("td", {}, String(view.scoreboard?.wins[s] ?? 0))))),
        view.scoreboard?.draws ? h("p", {}, `${t0.draws}: ${view.scoreboard.draws}`) : null,
        h("div", { class: "actions" },
          next ? h("button", { class: "primary", id: "next-game", onclick: () => {
            this.seriesOpen = false;
            this.act(next);
          } }, t0.nextGame) : null,
          h("button", { id: "close-series", onclick: () => {
            this.seriesOpen = false;
            this.draw();
          } }, t0.close))));
  }

  draw(): void {
    const view = this.view;
    if (!view) return;
    const screen = screenFor(view.kind);
    if (!screen) return;
    const context = this.context();
    document.body.dataset.version = String(view.version);
    document.body.dataset.status = GameStatus[view.status];
    this.root.replaceChildren(
      h("header", {},
        h("h1", {}, t.games[screen.key]),
        h("a", { href: "#/", class: "back" }, t.back),
        languageToggle()),
      this.status(view, context),
      h("div", { class: `game ${screen.key}` }, screen.render(view, context)),
      h("ul", { class: "log" }, this.log.map((line) => h("li", {}, line))),
      this.seriesWindow(view, context) ?? "",
    );
    this.tick();
  }
}

let table: Table | undefined;

document.addEventListener("keydown", (event) => {
  const view = table?.view;
  if (!table || !view || event.target instanceof HTMLInputElement) return;
  if (event.target instanceof HTMLButtonElement && event.key === "Enter") return;
  if (screenFor(view.kind)?.keyPressed?.(event.key, view, table.context())) event.preventDefault();
});

async function route(): Promise<void> {
  const [, page, gameId] = location.hash.match(/^#\/(table|join)\/([^/]+)$/) ?? [];
  document.documentElement.lang = language;
  document.title = t.title;
  if (table && (page !== "table" || table.gameId !== gameId)) {
    table.stop();
    table = undefined;
  }
  if (page === "join") {
    if (seatKey(gameId)) location.hash = `#/table/${gameId}`;
    else await join(gameId, localStorage.getItem("tapis.name") ?? t.defaultName).catch((error) => {
      say(message(error), "error");
    });
    return;
  }
  if (page === "table") {
    if (!table) {
      table = new Table(gameId, seatKey(gameId));
      app.replaceChildren(banner, table.root);
      await table.start();
    } else {
      app.replaceChildren(banner, table.root);
      table.draw();
    }
    return;
  }
  app.replaceChildren(banner, lobby());
}

window.addEventListener("hashchange", () => void route());
void route();
