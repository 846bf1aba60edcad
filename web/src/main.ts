// The web client: routes between the lobby and a table (`#/table/ID`, `#/join/ID`), follows the
// socket's state, and hands keys to the table's game.
import { banner, message, say, seatKey, socket, ui } from "./app";
import { screenFor } from "./games/index";
import { join, lobby } from "./lobby";
import { Table } from "./table";

const app = document.getElementById("app")!;

socket.onState = (state) => {
  document.body.dataset.socket = state;
  if (state === "closed") say(ui.t.reconnecting, "warning");
  else if (state === "open") {
    say(null);
    void table?.refresh();
  }
};

let table: Table | undefined;

document.addEventListener("keydown", (event) => {
  const view = table?.view;
  if (!table || !view || event.target instanceof HTMLInputElement) return;
  if (event.target instanceof HTMLButtonElement && event.key === "Enter") return;
  if (screenFor(view.kind)?.keyPressed?.(event.key, view, table.context())) event.preventDefault();
});

async function route(): Promise<void> {
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
  app.replaceChildren(banner, lobby(() => void route()));
}

window.addEventListener("hashchange", () => void route());
void route();
