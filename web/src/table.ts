// A table: drawn from the server's view of it (the caller's seat's), redrawn as its events
// arrive; the series window at each game's end, the turn countdowns, the log (the game's
// lines and the table's own), and who is connected (each person seat's mark, a line when one
// goes away or comes back).
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { GameStatus, SeatType, type Event, type GameView, type PresenceChanged } from "@tapis/client/gen/tapis/v1/game_service_pb";
import { focusKey, h, refocus } from "./dom";
import { GAMES, screenFor } from "./games/index";
import type { ActionInit, TableContext } from "./games/screen";
import { languageToggle, message, requestId, say, sendSafely, socket, ui, type SeatKey } from "./app";
import { disconnected } from "./socket";

const HISTORY = 40;
/** Lines kept in the move history panel (it scrolls). */

/** The history's line for an event of the table itself (the terminal client's: who sat down,
 * a game's start and end, the computer taking a seat over, the table back after a pause...),
 * null for a game's own event. */
function tableLine(event: Event, context: TableContext): string | null {
  const t = context.t;
  const body = event.body;
  const mine = (seat: number) => seat === context.me;
  switch (body.case) {
    case "seatClaimed":
      return t.sitsDown(body.value.displayName || context.name(body.value.seat), mine(body.value.seat));
    case "gameStarted":
      return t.gameStarts(body.value.gameNumber);
    case "gameEnded":
      return t.gameEnded(body.value.gameNumber, verdict(body.value.winners, context));
    case "seatTakenOver":
      return t.timeRanOut(context.name(body.value.seat), mine(body.value.seat), body.value.untilReclaimed);
    case "seatReclaimed":
      return t.tookSeatBack(context.name(body.value.seat), mine(body.value.seat));
    case "seatReplaced":
      return t.seatReplaced(body.value.seat, body.value.displayName, mine(body.value.seat));
    case "turnTimersResumed":
      return t.timersResumed(body.value.deadlines.some((d) => mine(d.seat)));
    case "gameAbandoned":
      return t.abandoned(body.value.reason);
    default:
      return null;
  }
}

/** Who won a game, said to the reader: "you win", "Zoé wins", "you share the win with Zoé",
 * "draw". */
function verdict(winners: number[], context: TableContext): string {
  const t = context.t;
  if (!winners.length) return t.verdictDraw;
  if (winners.length === 1) return t.verdictWon(context.name(winners[0]), winners[0] === context.me);
  const mine = context.me !== undefined && winners.includes(context.me);
  const names = winners.filter((s) => s !== context.me).map((s) => context.name(s));
  const listed = names.length > 1 ? t.listed(names.slice(0, -1).join(", "), names[names.length - 1])
    : names.join("");
  return t.verdictShared(listed, mine);
}

export class Table {
  view: GameView | undefined;
  /** The last event taken in from the table's stream (never from a view read: events after
   * it still come on the stream, resumed from there after a new socket). */
  streamed = 0n;
  /** The table's last event when the page opened it. The page reads the events from the
   * table's first, as the terminal client does: those up to here are its history (their lines,
   * what the screen keeps), never a window. So a page opened on a seat the computer plays says
   * why: the seat's timer ran out, or the seat was handed to this page's holder (a SeatReplaced
   * only ever read so: the former holder's stream ends before it). */
  opened = 0n;
  /** Actions sent and not answered yet (keys are ignored meanwhile). */
  sending = 0;
  log: string[] = [];
  seriesOpen = false;
  refreshing = false;
  stale = false;
  root = h("main", { class: "table" });
  ticker = window.setInterval(() => this.tick(), 250);

  constructor(readonly gameId: string, readonly key: SeatKey | undefined) {
    for (const game of GAMES) game.forget?.();  // what a screen kept was the last table's
  }

  get token(): string {
    return this.key?.token ?? "";
  }

  async start(): Promise<void> {
    await this.refresh();
    if (this.view) {
      this.opened = this.view.lastSequence;
      await socket.follow(this.gameId, { seatToken: this.token }, this.streamed,
        (batch) => {
          if (batch.presence.length) this.presence(batch.presence);
          if (batch.events.length) this.received(batch.events);
        },
        (refusal) => {
          if (refusal.reasonName === "INVALID_CURSOR") void this.rewound();
          else say(message(refusal), "error");
        }, { withPresence: true });
    }
  }

  /** The table went back to an earlier copy of itself (a restore) behind what this page saw:
   * its stream refused the page's cursor. Read again and followed from where it now is. */
  async rewound(): Promise<void> {
    this.view = undefined;
    this.streamed = 0n;
    this.log = [];
    for (const game of GAMES) game.forget?.();
    say(ui.t.rewound, "warning");
    await this.start();
  }

  stop(): void {
    window.clearInterval(this.ticker);
    socket.unfollow(this.gameId);
  }

  received(events: Event[]): void {
    for (const event of events) {
      if (event.sequence <= this.streamed) continue;
      this.streamed = event.sequence;
      const screen = this.view ? screenFor(this.view.kind) : undefined;
      // a new game, a new history (game 1's keeps who sat down); the seat handed to this
      // page's holder, too (the seat's lines before it were its former holder's)
      if (event.body.case === "gameStarted" && event.body.value.gameNumber > 1) this.log = [];
      if (event.body.case === "seatReplaced" && event.body.value.seat === this.view?.yourSeat) {
        this.log = [];
      }
      screen?.see?.(event, this.view, this.context());
      const line = tableLine(event, this.context()) ?? screen?.describe(event, this.context());
      if (line) this.logged(line);
      if (event.body.case === "gameEnded" && event.sequence > this.opened) this.seriesOpen = true;
    }
    void this.refresh();
  }

  /** A line on top of the history, its first letter a capital ("l’ordinateur a ramassé…"
   * begins a line as "L’ordinateur a ramassé…"). */
  logged(line: string): void {
    this.log = [line.charAt(0).toUpperCase() + line.slice(1), ...this.log].slice(0, HISTORY);
  }

  /** A person seat's holder went away or came back: its mark, and a line in the history. */
  presence(changes: PresenceChanged[]): void {
    const view = this.view;
    if (!view) return;
    const context = this.context();
    for (const change of changes) {
      const seat = view.seats[change.seat];
      if (seat) seat.connected = change.connected;
      if (change.seat === view.yourSeat) continue;
      const name = context.name(change.seat);
      this.logged(change.connected ? ui.t.isBack(name) : ui.t.wentAway(name));
    }
    this.draw();
  }

  /** Beside each person seat's name in `game`: whether its holder is connected now (the
   * page's own seat: whether its socket is open; the view may predate its stream). */
  markPresence(game: HTMLElement, view: GameView): void {
    for (const name of game.querySelectorAll<HTMLElement>(".name")) {
      const at = name.parentElement?.dataset.seat;
      const seat = at === undefined ? undefined : view.seats[Number(at)];
      if (!seat || seat.type !== SeatType.PERSON || !seat.taken) continue;
      const connected = seat.seat === view.yourSeat ? document.body.dataset.socket === "open"
        : seat.connected;
      const said = connected ? ui.t.online : ui.t.offline;
      name.append(" ", h("span", { class: connected ? "presence online" : "presence offline",
                                   "data-connected": String(connected), title: said,
                                   "aria-label": said }, connected ? "●" : "○"));
    }
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
        const answer = await socket.call("getGame", { gameId: this.gameId }, { seatToken: this.token });
        if (answer.game) {
          const view = answer.game;
          if (!this.view || view.version >= this.view.version) this.view = view;
        }
      } while (this.stale);
      this.draw();
    } catch (error) {
      if (!disconnected(error)) say(message(error), "error");
    } finally {
      this.refreshing = false;
    }
  }

  /** Send `action` (sent again, with its request_id, after a cut: the server stopping, the
   * socket lost, a commit in doubt); "Sending…" meanwhile; once answered, the line at the top
   * (an earlier refusal) goes. */
  act(action: ActionInit): void {
    const request = { gameId: this.gameId, action, requestId: requestId() };
    this.sending += 1;
    sendSafely("submitAction", request, { seatToken: this.token }, () => say(ui.t.sending, "info"))
      .then(() => {
        say(null);
        return this.refresh();
      }, (error) => say(message(error), "error"))
      .finally(() => (this.sending -= 1));
  }

  context(): TableContext {
    const view = this.view;
    return {
      t: ui.t,
      me: view?.yourSeat,
      name: (seat) => {
        if (seat === view?.yourSeat) return ui.t.you;
        const shown = view?.seats[seat];
        if (shown?.displayName) return shown.displayName;
        if (shown?.type !== SeatType.BOT) return ui.t.seat(seat);
        const bots = view!.seats.filter((s) => s.type === SeatType.BOT).length;
        return bots > 1 ? `${ui.t.computer} ${seat + 1}` : ui.t.computer;
      },
      act: (action) => this.act(action),
    };
  }

  tick(): void {
    for (const element of this.root.querySelectorAll<HTMLElement>("[data-expires]")) {
      const left = Math.max(0, Math.ceil((Number(element.dataset.expires) - Date.now()) / 1000));
      element.textContent = ui.t.countdown(left);
    }
  }

  status(view: GameView, context: TableContext): HTMLElement {
    const t0 = context.t;
    if (view.status === GameStatus.WAITING_FOR_PLAYERS) {
      const link = `${location.origin}/#/join/${view.gameId}`;
      return h("div", { class: "status" }, t0.waiting, " — ", t0.invite, " ",
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
    lines.push(this.seriesLine(view, context));
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

  /** The game's number and the series so far: "Game 2 · Series: you 1 · computer 0 · draws 0". */
  seriesLine(view: GameView, context: TableContext): HTMLElement {
    const wins = view.seats.map((s) =>
      `${context.name(s.seat)} ${view.scoreboard?.wins[s.seat] ?? 0}`).join(" · ");
    return h("span", { class: "series-line", id: "series-line" },
      h("b", { class: "game-number" }, context.t.game(view.gameNumber || 1)), " · ",
      context.t.seriesLine(wins, view.scoreboard?.draws ?? 0));
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
        ...(() => {
          const why = screenFor(view.kind)?.endReason?.(view, context) ?? "";
          return why ? [h("p", { class: "end-reason", id: "end-reason" }, t0.whyEnded(why))] : [];
        })(),
        h("h3", {}, t0.series),
        h("table", {},
          h("tr", {}, h("th", {}, ""), seats.map((s) => h("th", {}, context.name(s)))),
          view.series.map((game) => h("tr", {},
            h("td", {}, t0.game(game.gameNumber)),
            seats.map((s) => h("td", { class: game.winners.includes(s) ? "won" : "" },
              String(game.scores[s] ?? ""))))),
          h("tr", { class: "wins" }, h("td", {}, t0.wins),
            seats.map((s) => h("td", {}, String(view.scoreboard?.wins[s] ?? 0))))),
        view.scoreboard?.draws ? h("p", {}, t0.drawsCount(view.scoreboard.draws)) : null,
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
    const game = h("div", { class: `game ${screen.key}` }, screen.render(view, context));
    this.markPresence(game, view);
    const focused = focusKey(this.root);  // a keyboard player's control, focused again below
    this.root.replaceChildren(
      h("header", {},
        h("h1", {}, ui.t.games[screen.key]),
        h("a", { href: "#/", class: "back" }, ui.t.back),
        languageToggle(() => this.draw())),
      this.status(view, context),
      game,
      h("div", { class: "keys", id: "keys" }, h("b", {}, ui.t.keysTitle), " ", ui.t.keys[screen.key]),
      h("section", { class: "history", id: "history" }, h("h3", {}, ui.t.history),
        h("ul", { class: "log" }, this.log.map((line) => h("li", {}, line)))),
      this.seriesWindow(view, context) ?? "",
    );
    refocus(this.root, focused);
    this.tick();
  }
}
