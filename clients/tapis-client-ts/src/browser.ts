// A thin typed client of the player WebSocket (docs/websocket.md) for browsers: one socket,
// ClientFrame out and ServerFrame in (binary protobuf), each request matched to its answer by
// id, refusals decoded to ErrorReason, event streams as async iterables (stop_events when the
// loop is left). No gRPC and no Node module: `import { EnvelopeClient } from "@tapis/client/browser"`.
// It does not reconnect by itself: a caller that loses the socket opens a new one and follows
// on from the last sequence it saw (`afterSequence`), as `isRetryable` says when.
import { create, fromBinary, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import type { StreamEventsResponse } from "./gen/tapis/v1/game_service_pb.js";
import {
  ClientFrameSchema,
  ServerFrameSchema,
  type ServerFrame,
} from "./gen/tapis/v1/websocket_pb.js";
import { refusalOfStatus, type Refusal } from "./refusal.js";

export { isRetryable, backoffDelay } from "./retry.js";
export { reasonName, reasonOf, type Refusal } from "./refusal.js";
export * from "./gen/tapis/v1/game_service_pb.js";
export * from "./gen/tapis/v1/errors_pb.js";
export * from "./gen/tapis/v1/websocket_pb.js";

/** What the client needs of a socket: the browser's WebSocket (or any alike). */
export interface SocketLike {
  binaryType: string;
  readonly readyState: number;
  send(data: Uint8Array): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: unknown) => void) | null;
}

/** A refused request (a `refusal` frame), or the socket closed under it (UNAVAILABLE). */
export class EnvelopeError extends Error implements Refusal {
  readonly code: number;
  readonly reason: Refusal["reason"];
  readonly reasonName: string;
  readonly metadata: Record<string, string>;
  readonly details: string;

  constructor(refusal: Refusal) {
    super(`${refusal.code}${refusal.reasonName ? ` / ${refusal.reasonName}` : ""}: ${refusal.details}`);
    this.name = "EnvelopeError";
    this.code = refusal.code;
    this.reason = refusal.reason;
    this.reasonName = refusal.reasonName;
    this.metadata = refusal.metadata;
    this.details = refusal.details;
  }
}

type RequestInit = MessageInitShape<typeof ClientFrameSchema>["request"];
type Response = ServerFrame["response"];
/** The requests answered once, by the response of the same name. */
export type EnvelopeMethod = "createGame" | "joinGame" | "getGame" | "submitAction" | "listGames";
export type EnvelopeRequest<K extends EnvelopeMethod> = Extract<RequestInit, { case: K }>["value"];
export type EnvelopeResponse<K extends EnvelopeMethod> = Extract<Response, { case: K }>["value"];

/** Credentials of one request: a seat's (or spectator's) token, a backend's key. */
export interface Credentials {
  seatToken?: string;
  apiKey?: string;
}

interface Waiting {
  answer: (frame: ServerFrame) => void;
  fail: (error: EnvelopeError) => void;
}

const CLOSED: Refusal = {
  code: 14,
  reason: 0,
  reasonName: "",
  metadata: {},
  details: "the socket closed",
};

export class EnvelopeClient {
  private nextId = 0n;
  private readonly waiting = new Map<bigint, Waiting>();
  private readonly opened: Promise<void>;

  /** A client on `socket` (a WebSocket being opened or open). */
  constructor(private readonly socket: SocketLike) {
    socket.binaryType = "arraybuffer";
    this.opened = new Promise((resolve, reject) => {
      if (socket.readyState === 1) resolve();
      socket.onopen = () => resolve();
      socket.onclose = () => {
        reject(new EnvelopeError(CLOSED));
        for (const waiting of this.waiting.values()) waiting.fail(new EnvelopeError(CLOSED));
        this.waiting.clear();
      };
    });
    this.opened.catch(() => undefined);
    socket.onmessage = (message) => this.received(message.data);
  }

  /** A client on a new WebSocket to `url` (`wss://HOST:PORT/ws`). */
  static connect(url: string): EnvelopeClient {
    const Socket = (globalThis as unknown as { WebSocket: new (url: string) => SocketLike }).WebSocket;
    return new EnvelopeClient(new Socket(url));
  }

  close(): void {
    this.socket.close(1000);
  }

  /** One request, typed by its name: `call("getGame", { gameId }, { seatToken })`. */
  async call<K extends EnvelopeMethod>(
    method: K,
    request: EnvelopeRequest<K>,
    credentials: Credentials = {},
  ): Promise<EnvelopeResponse<K>> {
    await this.opened;
    const frame = await new Promise<ServerFrame>((answer, fail) => {
      const id = this.send({ case: method, value: request } as RequestInit, credentials);
      this.waiting.set(id, { answer, fail });
    });
    return frame.response.value as EnvelopeResponse<K>;
  }

  /**
   * A table's events after `afterSequence`, batch by batch, until the loop is left (the
   * stream is stopped) or the stream ends with a refusal (thrown: with STREAM_TOO_SLOW or
   * SERVER_STOPPING, `metadata.resume_after_sequence` is where to follow on).
   */
  async *streamEvents(
    request: Extract<RequestInit, { case: "streamEvents" }>["value"],
    credentials: Credentials = {},
  ): AsyncGenerator<StreamEventsResponse> {
    await this.opened;
    const queue: ServerFrame[] = [];
    let wake: (() => void) | undefined;
    let failed: EnvelopeError | undefined;
    const id = this.send({ case: "streamEvents", value: request }, credentials);
    this.waiting.set(id, {
      answer: (frame) => {
        queue.push(frame);
        wake?.();
      },
      fail: (error) => {
        failed = error;
        wake?.();
      },
    });
    try {
      for (;;) {
        const frame = queue.shift();
        if (frame === undefined) {
          if (failed) throw failed;
          await new Promise<void>((resolve) => (wake = resolve));
          wake = undefined;
          continue;
        }
        if (frame.response.case === "events") yield frame.response.value;
        else return; // events_stopped
      }
    } finally {
      if (this.waiting.delete(id) && this.socket.readyState === 1) {
        this.send({ case: "stopEvents", value: { streamId: id } }, {});
      }
    }
  }

  private send(request: RequestInit, credentials: Credentials): bigint {
    this.nextId += 1n;
    const frame = create(ClientFrameSchema, {
      id: this.nextId,
      seatToken: credentials.seatToken ?? "",
      apiKey: credentials.apiKey ?? "",
      request,
    });
    this.socket.send(toBinary(ClientFrameSchema, frame));
    return this.nextId;
  }

  private received(data: unknown): void {
    const frame = fromBinary(ServerFrameSchema, new Uint8Array(data as ArrayBuffer));
    const waiting = this.waiting.get(frame.id);
    if (waiting === undefined) return;
    if (frame.response.case === "refusal") {
      this.waiting.delete(frame.id);
      waiting.fail(new EnvelopeError(refusalOfStatus(frame.response.value)));
    } else if (frame.response.case === "events") {
      waiting.answer(frame); // a stream's: it stays open
    } else {
      this.waiting.delete(frame.id);
      waiting.answer(frame);
    }
  }
}
