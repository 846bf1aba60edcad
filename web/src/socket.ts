// The player WebSocket (docs/websocket.md): ClientFrame out, ServerFrame in, binary protobuf.
// Requests are matched to answers by id; followed tables are re-followed from their last
// sequence after a reconnect.
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { create, fromBinary, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb";
import type { Status } from "./gen/google/rpc/status_pb";
import type { StreamEventsResponse } from "./gen/tapis/v1/game_service_pb";
import {
  ClientFrameSchema,
  ServerFrameSchema,
  type ClientFrame,
  type ServerFrame,
} from "./gen/tapis/v1/websocket_pb";

/** A refusal from the server: the gRPC status and the ErrorInfo reason. */
export class Refusal extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly metadata: Record<string, string>,
  ) {
    super(message);
  }
}

function refusalOf(status: Status): Refusal {
  for (const detail of status.details) {
    const info = anyUnpack(detail, ErrorInfoSchema);
    if (info) return new Refusal(status.code, info.reason, status.message, info.metadata);
  }
  return new Refusal(status.code, "", status.message, {});
}

type Request = MessageInitShape<typeof ClientFrameSchema>["request"];
type Answer = ServerFrame["response"];

interface Pending {
  resolve: (answer: Answer) => void;
  reject: (error: Error) => void;
}

interface Followed {
  gameId: string;
  token: string;
  after: bigint;
  id: bigint;
  onEvents: (batch: StreamEventsResponse) => void;
  onEnded: (refusal: Refusal) => void;
}

/** Refusals that end a stream for good: following again would be refused again (a revoked or
 * unknown seat token, a table gone or not the caller's to watch). */
const FINAL_CODES = new Set([3, 5, 7, 16]);

export type SocketState = "connecting" | "open" | "closed";

export class GameSocket {
  private socket: WebSocket | null = null;
  private nextId = 0n;
  private pending = new Map<bigint, Pending>();
  private followed = new Map<string, Followed>();
  private retryMs = 250;
  private opened: Promise<void> | null = null;
  onState: (state: SocketState) => void = () => {};

  constructor(private readonly url: string) {}

  private connect(): Promise<void> {
    if (this.opened) return this.opened;
    this.onState("connecting");
    this.opened = new Promise((resolve) => {
      const socket = new WebSocket(this.url);
      socket.binaryType = "arraybuffer";
      socket.onopen = () => {
        this.retryMs = 250;
        this.socket = socket;
        this.onState("open");
        for (const followed of this.followed.values()) this.openStream(followed);
        resolve();
      };
      socket.onmessage = (message) => this.received(new Uint8Array(message.data as ArrayBuffer));
      socket.onclose = () => {
        this.socket = null;
        this.opened = null;
        this.onState("closed");
        for (const waiting of this.pending.values()) {
          waiting.reject(new Refusal(14, "DISCONNECTED", "the connection was lost", {}));
        }
        this.pending.clear();
        const delay = this.retryMs;
        this.retryMs = Math.min(this.retryMs * 2, 4000);
        setTimeout(() => this.connect().then(resolve), delay);
      };
    });
    return this.opened;
  }

  private received(bytes: Uint8Array): void {
    const frame = fromBinary(ServerFrameSchema, bytes);
    for (const followed of this.followed.values()) {
      if (followed.id !== frame.id) continue;
      if (frame.response.case === "events") {
        const events = frame.response.value.events;
        if (events.length) followed.after = events[events.length - 1].sequence;
        followed.onEvents(frame.response.value);
      } else if (frame.response.case === "refusal") {
        const refusal = refusalOf(frame.response.value);
        if (FINAL_CODES.has(refusal.code)) {
          this.followed.delete(followed.gameId);
          followed.onEnded(refusal);
          return;
        }
        // The stream ended (too slow, server stopping): follow on from where it was.
        const resume = refusal.metadata["resume_after_sequence"];
        if (resume) followed.after = BigInt(resume);
        setTimeout(() => this.socket && this.openStream(followed), 250);
      }
      return;
    }
    const waiting = this.pending.get(frame.id);
    if (!waiting) return;
    this.pending.delete(frame.id);
    if (frame.response.case === "refusal") waiting.reject(refusalOf(frame.response.value));
    else waiting.resolve(frame.response);
  }

  private send(request: Request, token: string): bigint {
    if (!this.socket) throw new Refusal(14, "DISCONNECTED", "the connection was lost", {});
    this.nextId += 1n;
    const frame: ClientFrame = create(ClientFrameSchema, {
      id: this.nextId,
      seatToken: token,
      request,
    });
    this.socket.send(toBinary(ClientFrameSchema, frame));
    return this.nextId;
  }

  /** Send one request and wait for its answer (a Refusal if refused). */
  async call(request: Request, token = ""): Promise<Answer> {
    await this.connect();
    return new Promise((resolve, reject) => {
      try {
        this.pending.set(this.send(request, token), { resolve, reject });
      } catch (error) {
        reject(error);
      }
    });
  }

  private openStream(followed: Followed): void {
    followed.id = this.send(
      { case: "streamEvents", value: { gameId: followed.gameId, afterSequence: followed.after } },
      followed.token,
    );
  }

  /** Follow a table's events after `after`, across reconnects, until `unfollow` or a final
   * refusal (`onEnded`). */
  async follow(
    gameId: string,
    token: string,
    after: bigint,
    onEvents: (batch: StreamEventsResponse) => void,
    onEnded: (refusal: Refusal) => void,
  ): Promise<void> {
    this.unfollow(gameId);
    const followed: Followed = { gameId, token, after, id: 0n, onEvents, onEnded };
    this.followed.set(gameId, followed);
    await this.connect();
    if (followed.id === 0n && this.socket) this.openStream(followed);
  }

  unfollow(gameId: string): void {
    const followed = this.followed.get(gameId);
    if (!followed) return;
    this.followed.delete(gameId);
    if (this.socket && followed.id) {
      this.send({ case: "stopEvents", value: { streamId: followed.id } }, "");
    }
  }
}
