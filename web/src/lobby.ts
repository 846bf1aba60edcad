// The lobby: a game against the computer in one click (with the game's own choices, such as
// Basra's variant), or a table joined by its id. On a server
// whose tables a backend creates (API keys), a sentence saying so instead of the create buttons.
import { SeatType } from "@tapis/client/gen/tapis/v1/game_service_pb";
import { h } from "./dom";
import { GAMES } from "./games/index";
import { keepSeatKey, languageToggle, message, requestId, say, sendSafely, ui,
         type Capabilities } from "./app";

export function lobby(redraw: () => void, capabilities: Capabilities): HTMLElement {
  const t = ui.t;
  const name = h("input", { id: "name", value: localStorage.getItem("tapis.name") ?? t.defaultName,
                            maxlength: "40" }) as HTMLInputElement;
  const games = GAMES.map((game) => {
    const seats = h("select", { class: "seats" },
      game.seatCounts.map((n) => h("option", { value: String(n) }, String(n)))) as HTMLSelectElement;
    const timer = h("select", { class: "timer" },
      [0, 15, 30, 60].map((s) => h("option", { value: String(s) }, s ? t.seconds(s) : t.noLimit))) as HTMLSelectElement;
    timer.value = "30";
    const choices = game.lobbyChoices?.(t);
    const start = async (): Promise<void> => {
      localStorage.setItem("tapis.name", name.value);
      const count = Number(seats.value);
      try {
        const created = await sendSafely("createGame", {
          kind: game.kind, seats: count, turnTimeLimitMs: Number(timer.value) * 1000,
          requestId: requestId(), options: choices?.options(),
          seatConfigs: Array.from({ length: count }, (_, seat) =>
            ({ type: seat === 0 ? SeatType.PERSON : SeatType.BOT })),
        });
        await join(created.game!.gameId, name.value, 0);
      } catch (error) {
        say(message(error), "error");
      }
    };
    if (capabilities.api_keys) {
      return h("section", { class: `game-choice ${game.key}`, "data-game": game.key },
        h("h2", {}, t.games[game.key]));
    }
    return h("section", { class: `game-choice ${game.key}`, "data-game": game.key },
      h("h2", {}, t.games[game.key]),
      h("label", {}, t.players, " ", seats),
      h("label", {}, t.turnTime, " ", timer),
      choices?.fields ?? [],
      h("button", { class: "primary play", onclick: start }, t.playComputer));
  });
  const tableId = h("input", { id: "table-id", placeholder: t.tableId }) as HTMLInputElement;
  return h("main", { class: "lobby" },
    h("header", {}, h("h1", {}, t.title), languageToggle(redraw)),
    h("label", { class: "name" }, t.yourName, " ", name),
    h("h2", {}, t.chooseGame),
    capabilities.api_keys ? h("p", { class: "tickets-only", id: "tickets-only" }, t.ticketsOnly) : "",
    h("div", { class: "games" }, games),
    h("form", { class: "join", onsubmit: (event) => {
      event.preventDefault();
      if (tableId.value.trim()) location.hash = `#/join/${tableId.value.trim()}`;
    } }, h("h2", {}, t.joinTable), tableId, h("button", { type: "submit" }, t.join)));
}

/** Take a seat at `gameId` (the first free one, or `seat`), keep its key, go to the table. */
export async function join(gameId: string, displayName: string, seat?: number): Promise<void> {
  const joined = await sendSafely("joinGame", { gameId, displayName, seat, requestId: requestId() });
  keepSeatKey(gameId, { seat: joined.seat, token: joined.seatToken });
  location.hash = `#/table/${gameId}`;
}
