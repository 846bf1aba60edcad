// A thin typed client of the player WebSocket (docs/websocket.md) for browsers: one socket,
// ClientFrame out and ServerFrame in (binary protobuf), each request matched to its answer by
// id, refusals decoded to ErrorReason, event streams as async iterables (stop_events when the
// loop is left). No gRPC and no Node module: `import { EnvelopeClient } from "@tapis/client/browser"`.
// `EnvelopeClient` is one socket's: it does not reconnect. `ReconnectingEnvelope` (below) opens
// a new socket after a loss (backoff with jitter) and follows tables on from their last sequence.
import { create, fromBinary, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { backoffDelay } from "./retry.js";
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

/** What a stream opened by `subscribe` is told. */
export interface StreamHandlers {
  /** Each batch of events, in order. */
  onEvents: (batch: StreamEventsResponse) => void;
  /** The stream's end: a refusal (the socket closing: UNAVAILABLE, no reason), or nothing
   * when the server confirms a stop. Not called after the caller's own stop. */
  onEnd: (error?: EnvelopeError) => void;
}

export class EnvelopeClient {
  private nextId = 0n;
  private readonly waiting = new Map<bigint, Waiting>();
  /** Settles when the socket opens; rejects (UNAVAILABLE) if it closes first. */
  readonly opened: Promise<void>;
  /** Settles when the socket closes (after every waiting request has failed). */
  readonly closed: Promise<void>;
  private closedNow = false;

  /** A client on `socket` (a WebSocket being opened or open). */
  constructor(private readonly socket: SocketLike) {
    socket.binaryType = "arraybuffer";
    let wasClosed: () => void = () => undefined;
    this.closed = new Promise((resolve) => (wasClosed = resolve));
    this.opened = new Promise((resolve, reject) => {
      if (socket.readyState === 1) resolve();
      socket.onopen = () => resolve();
      socket.onclose = () => {
        this.closedNow = true;
        wasClosed();
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

  /** Whether the socket has closed. */
  get isClosed(): boolean {
    return this.closedNow;
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

  /**
   * A table's events after `request.afterSequence`, by callbacks (the socket must be open):
   * returns the function that stops the stream (stop_events). `streamEvents` is the same as an
   * async iterable.
   */
  subscribe(
    request: Extract<RequestInit, { case: "streamEvents" }>["value"],
    credentials: Credentials,
    handlers: StreamHandlers,
  ): () => void {
    const id = this.send({ case: "streamEvents", value: request }, credentials);
    this.waiting.set(id, {
      answer: (frame) => {
        if (frame.response.case === "events") handlers.onEvents(frame.response.value);
        else handlers.onEnd(); // events_stopped
      },
      fail: (error) => handlers.onEnd(error),
    });
    return () => {
      if (this.waiting.delete(id) && this.socket.readyState === 1) {
        this.send({ case: "stopEvents", value: { streamId: id } }, {});
      }
    };
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

/** A connection's state, as `ReconnectingEnvelope.onState` tells it. */
export type ConnectionState = "connecting" | "open" | "closed";

/** How `ReconnectingEnvelope` opens its sockets again and follows on. */
export interface ReconnectOptions {
  /** The pause before the first new socket after a loss, in ms (default 250). */
  initialDelayMs?: number;
  /** The longest pause, in ms (default 4000). */
  maxDelayMs?: number;
  /** The growth of the pause per failed socket (default 2). */
  multiplier?: number;
  /** A random number in [0, 1) (default Math.random): the jitter (`backoffDelay`). */
  random?: () => number;
  /** The pause before following on after a stream cut short (STREAM_TOO_SLOW,
   * SERVER_STOPPING), in ms (default 250). */
  resumeDelayMs?: number;
  /** Runs `callback` after `ms` (default setTimeout). Tests inject their own. */
  setTimer?: (callback: () => void, ms: number) => void;
}

/** Refusals that end a followed stream for good: following again would be refused again
 * (INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, UNAUTHENTICATED: a revoked or unknown
 * token, a table gone or not the caller's to watch). */
const FINAL_STREAM_CODES = new Set([3, 5, 7, 16]);

/** How a table is followed: `withPresence` also asks for its presence changes (batches with
 * `presence` and no events: a person seat's holder went away or came back). */
export interface FollowOptions {
  withPresence?: boolean;
}

interface Followed {
  gameId: string;
  credentials: Credentials;
  after: bigint;
  withPresence: boolean;
  onEvents: (batch: StreamEventsResponse) => void;
  onEnded: (error: EnvelopeError) => void;
  /** Stops the stream open now (undefined: none open). */
  stop?: () => void;
}

/**
 * The player WebSocket kept open: a new socket after each loss (backoff with jitter, reset once
 * a socket opens), requests sent on the socket open now (a request whose socket closes under it
 * fails UNAVAILABLE: send it again with the same request_id), and followed tables, each one
 * stream followed on from its last sequence across new sockets and streams cut short, until
 * `unfollow` or a final refusal.
 */
export class ReconnectingEnvelope {
  private client: EnvelopeClient | undefined;
  private ready: Promise<EnvelopeClient> | undefined;
  private failures = 0;
  private readonly followed = new Map<string, Followed>();
  private readonly options: Required<ReconnectOptions>;
  /** Told of each change of the connection's state. */
  onState: (state: ConnectionState) => void = () => undefined;

  /** A client whose sockets `open` makes (e.g. `() => new WebSocket(url)`). */
  constructor(private readonly open: () => SocketLike, options: ReconnectOptions = {}) {
    this.options = {
      initialDelayMs: 250,
      maxDelayMs: 4000,
      multiplier: 2,
      random: Math.random,
      resumeDelayMs: 250,
      setTimer: (callback, ms) => void setTimeout(callback, ms),
      ...options,
    };
  }

  /** A client of `url` (`wss://HOST:PORT/ws`), over the browser's WebSocket. */
  static connect(url: string, options: ReconnectOptions = {}): ReconnectingEnvelope {
    const Socket = (globalThis as unknown as { WebSocket: new (url: string) => SocketLike }).WebSocket;
    return new ReconnectingEnvelope(() => new Socket(url), options);
  }

  /** The client of the socket open now, once there is one (opening one if needed). */
  connected(): Promise<EnvelopeClient> {
    if (this.ready) return this.ready;
    this.onState("connecting");
    this.ready = new Promise((resolve) => {
      const client = new EnvelopeClient(this.open());
      client.opened.then(
        () => {
          this.failures = 0;
          this.client = client;
          this.onState("open");
          for (const followed of this.followed.values()) this.openStream(client, followed);
          resolve(client);
        },
        () => undefined,
      );
      void client.closed.then(() => {
        this.client = undefined;
        this.ready = undefined;
        for (const followed of this.followed.values()) followed.stop = undefined;
        this.onState("closed");
        this.failures += 1;
        this.options.setTimer(
          () => void this.connected().then(resolve),
          backoffDelay(this.failures, this.options),
        );
      });
    });
    return this.ready;
  }

  /** One request, typed by its name, on the socket open now (or once one is). */
  async call<K extends EnvelopeMethod>(
    method: K,
    request: EnvelopeRequest<K>,
    credentials: Credentials = {},
  ): Promise<EnvelopeResponse<K>> {
    const client = await this.connected();
    return client.call(method, request, credentials);
  }

  /** Follow `gameId`'s events after `afterSequence` (one stream per table: following it again
   * replaces the stream), across new sockets, until `unfollow` or a final refusal (`onEnded`).
   * With `options.withPresence`, `onEvents` also gets the presence batches. */
  async follow(
    gameId: string,
    credentials: Credentials,
    afterSequence: bigint,
    onEvents: (batch: StreamEventsResponse) => void,
    onEnded: (error: EnvelopeError) => void,
    options: FollowOptions = {},
  ): Promise<void> {
    this.unfollow(gameId);
    const followed: Followed = {
      gameId, credentials, after: afterSequence, withPresence: options.withPresence ?? false,
      onEvents, onEnded,
    };
    this.followed.set(gameId, followed);
    const client = await this.connected();
    if (followed.stop === undefined && this.followed.get(gameId) === followed) {
      this.openStream(client, followed);
    }
  }

  /** Stop following `gameId` (stop_events if a stream is open). */
  unfollow(gameId: string): void {
    const followed = this.followed.get(gameId);
    if (followed === undefined) return;
    this.followed.delete(gameId);
    followed.stop?.();
    followed.stop = undefined;
  }

  /** The last sequence seen of a followed table (where it would follow on from). */
  lastSequence(gameId: string): bigint | undefined {
    return this.followed.get(gameId)?.after;
  }

  private openStream(client: EnvelopeClient, followed: Followed): void {
    followed.stop = client.subscribe(
      { gameId: followed.gameId, afterSequence: followed.after, withPresence: followed.withPresence },
      followed.credentials,
      {
        onEvents: (batch) => {
          const events = batch.events;
          if (events.length) followed.after = events[events.length - 1]!.sequence;
          followed.onEvents(batch);
        },
        onEnd: (error) => this.ended(client, followed, error),
      },
    );
  }

  private ended(client: EnvelopeClient, followed: Followed, error?: EnvelopeError): void {
    followed.stop = undefined;
    if (client.isClosed || this.followed.get(followed.gameId) !== followed) return; // a new socket follows on
    if (error !== undefined && FINAL_STREAM_CODES.has(error.code)) {
      this.followed.delete(followed.gameId);
      followed.onEnded(error);
      return;
    }
    // Cut short (too slow, the server stopping): follow on from where the server says.
    const resume = error?.metadata["resume_after_sequence"];
    if (resume) followed.after = BigInt(resume);
    this.options.setTimer(() => {
      const now = this.client;
      if (now !== undefined && followed.stop === undefined && this.followed.get(followed.gameId) === followed) {
        this.openStream(now, followed);
      }
    }, this.options.resumeDelayMs);
  }
}
