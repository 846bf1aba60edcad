// The web client: routes between the lobby and a table (`#/table/ID`, `#/join/ID`, and
// `#/ticket/ID/TOKEN`: a seat a backend handed out), follows the socket's state, and hands keys
// to the table's game.
import { banner, keepSeatKey, message, say, seatKey, serverCapabilities, socket, ui } from "./app";
import { screenFor } from "./games/index";
import { join, lobby } from "./lobby";
import { Table } from "./table";

const app = document.getElementById("app")!;

socket.onState = (state) => {
  document.body.dataset.socket = state;
  if (state === "closed") {
    say(ui.t.reconnecting, "warning");
    table?.draw();  // the page's own seat: disconnected
  }
  else if (state === "open") {
    say(table?.sending ? ui.t.sending : null);
    void table?.refresh();
  }
};

let table: Table | undefined;

// A key acts once: not again while held down (its repeats), nor while a move is being sent.
// Enter on a focused button is the button's own click; Space is the game's key even there (its
// keydown's default prevented: the button is not clicked too).
document.addEventListener("keydown", (event) => {
  const view = table?.view;
  if (!table || !view || event.target instanceof HTMLInputElement) return;
  if (event.target instanceof HTMLButtonElement && event.key === "Enter") return;
  if (event.repeat || table.sending) {
    if (event.key === " ") event.preventDefault();
    return;
  }
  if (screenFor(view.kind)?.keyPressed?.(event.key, view, table.context())) event.preventDefault();
});

async function route(): Promise<void> {
  const ticket = location.hash.match(/^#\/ticket\/([^/]+)\/([^/]+)$/);
  if (ticket) {
    // A ticket: the seat's token, in the fragment (never sent to a server, so never in its
    // logs). Keep it like a seat taken here, and leave the token out of the address and history.
    const [, ticketGame, token] = ticket.map(decodeURIComponent);
    keepSeatKey(ticketGame, { token });
    location.replace(`#/table/${encodeURIComponent(ticketGame)}`);
    return;
  }
  const [, page, gameId] = location.hash.match(/^#\/(table|join)\/([^/]+)$/) ?? [];
  document.documentElement.lang = ui.language;
  document.title = ui.t.title;
  if (table && (page !== "table" || table.gameId !== gameId)) {
    table.stop();
    table = undefined;
  }
  if (page === "join") {
    if (seatKey(gameId)) location.hash = `#/table/${gameId}`;
    else await join(gameId, localStorage.getItem("tapis.name") ?? ui.t.defaultName).catch((error) => {
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
  const capabilities = await serverCapabilities();
  if (location.hash.match(/^#\/(table|join|ticket)\//)) return; // moved on meanwhile
  app.replaceChildren(banner, lobby(() => void route(), capabilities));
}

window.addEventListener("hashchange", () => void route());
void route();
