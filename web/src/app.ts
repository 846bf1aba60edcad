// What every screen of the web client shares: the socket, the language, the banner, the seat
// keys kept in the browser, and the request ids.
import { h } from "./dom";
import { chosenLanguage, texts, type Language, type Texts } from "./i18n";
import { backoffDelay, disconnected, EnvelopeError, isRetryable, ReconnectingEnvelope,
         type Credentials, type EnvelopeRequest, type EnvelopeResponse } from "./socket";

export const socket = ReconnectingEnvelope.connect(
  `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}/ws`);

/** The language shown, and its texts. */
export const ui: { language: Language; t: Texts } = {
  language: chosenLanguage(),
  t: texts(chosenLanguage()),
};

export function switchLanguage(): void {
  ui.language = ui.language === "fr" ? "en" : "fr";
  ui.t = texts(ui.language);
  localStorage.setItem("tapis.lang", ui.language);
  document.documentElement.lang = ui.language;
}

/** A seat taken from this browser (or handed out by a backend): its secret token, and its
 * number when known (the table's view says it too). */
export interface SeatKey {
  seat?: number;
  token: string;
}

export function seatKey(gameId: string): SeatKey | undefined {
  const stored = localStorage.getItem(`tapis.seat.${gameId}`);
  return stored ? (JSON.parse(stored) as SeatKey) : undefined;
}

export function keepSeatKey(gameId: string, key: SeatKey): void {
  localStorage.setItem(`tapis.seat.${gameId}`, JSON.stringify(key));
}

/** What this server lets the page do (`/capabilities.json`): `api_keys` means tables are
 * created by a backend holding a key, never by a player. */
export interface Capabilities {
  api_keys: boolean;
}

let capabilities: Promise<Capabilities> | undefined;

export function serverCapabilities(): Promise<Capabilities> {
  capabilities ??= fetch("/capabilities.json")
    .then((answer) => (answer.ok ? answer.json() : { api_keys: false }))
    .catch(() => ({ api_keys: false }));
  return capabilities;
}

/** A fresh request id: makes a retried request safe. */
export function requestId(): string {
  return crypto.randomUUID ? crypto.randomUUID()
    : Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Attempts of a request that changes something, the first included, before its refusal is
 * shown (each after a socket closed waits for a new one to open). */
const ATTEMPTS = 8;

/** Whether a refused request is sent again as it was, with the same request_id (the server
 * applies it at most once): the client's policy (`isRetryable`: the socket closed under it,
 * UNAVAILABLE whatever its reason — COMMIT_UNKNOWN, SERVER_STOPPING, STORE_UNAVAILABLE... —,
 * RATE_LIMITED, OVERLOADED), and INTERNAL, which for a write may have been applied or not. */
function resendable(error: unknown): boolean {
  return error instanceof EnvelopeError && (isRetryable(error) || error.reasonName === "INTERNAL");
}

/** A request that changes something (it carries its request_id), sent again while its refusal
 * allows, the same request each time, after a pause (backoff with jitter), on the socket open
 * then (a lost one: once a new one opens). `onResend` is told before each new attempt. */
export async function sendSafely<K extends "createGame" | "joinGame" | "submitAction">(
  method: K, request: EnvelopeRequest<K>, credentials: Credentials = {},
  onResend: () => void = () => undefined,
): Promise<EnvelopeResponse<K>> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await socket.call(method, request, credentials);
    } catch (error) {
      if (attempt >= ATTEMPTS || !resendable(error)) throw error;
      onResend();
      await new Promise((resolve) => setTimeout(resolve, backoffDelay(attempt)));
    }
  }
}

/** A refusal as the player reads it: its reason's sentence, else a general one (never the
 * server's own message, in English and for developers). */
export function message(error: unknown): string {
  if (!(error instanceof EnvelopeError)) return ui.t.refused;
  return ui.t.refusals[disconnected(error) ? "DISCONNECTED" : error.reasonName] ?? ui.t.refused;
}

/** The line at the top: the connection's state and refusals. */
export const banner = h("div", { id: "banner", class: "banner", hidden: "" });

export function say(text: string | null, kind = "info"): void {
  if (text === null) {
    banner.setAttribute("hidden", "");
    return;
  }
  banner.removeAttribute("hidden");
  banner.className = `banner ${kind}`;
  banner.textContent = text;
}

/** The button that switches between French and English, then redraws with `redraw`. */
export function languageToggle(redraw: () => void): HTMLElement {
  return h("button", { class: "language", id: "language", onclick: () => {
    switchLanguage();
    redraw();
  } }, ui.t.language);
}
