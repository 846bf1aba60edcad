// A typed client of tapis.v1.GameService for Node, over @grpc/grpc-js: TLS with the server's
// CA, the backend's `x-api-key` or a seat's `authorization: Bearer`, requests and answers typed
// from the contract (protobuf-es), refusals decoded to ErrorReason, unary calls retried by the
// safe policy with their request_id, and event streams resumed from the last sequence seen.
import { randomUUID } from "node:crypto";
import {
  create,
  fromBinary,
  toBinary,
  type DescMessage,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import {
  GameService,
  type StreamEventsRequestSchema,
  type StreamEventsResponse,
} from "./gen/tapis/v1/game_service_pb.js";
import { ErrorReason } from "./gen/tapis/v1/errors_pb.js";
import { toTapisError, TapisError } from "./errors.js";
import {
  backoffDelay,
  DEFAULT_RETRY,
  isRetryable,
  withRetry,
  type RetryOptions,
} from "./retry.js";

/** The service's methods, by their protobuf-es names (createGame, streamEvents...). */
export type Methods = typeof GameService.method;
/** The names of the unary methods. */
export type UnaryMethod = {
  [K in keyof Methods]: Methods[K]["methodKind"] extends "unary" ? K : never;
}[keyof Methods];
/** The names of the server-streaming methods. */
export type StreamMethod = {
  [K in keyof Methods]: Methods[K]["methodKind"] extends "server_streaming" ? K : never;
}[keyof Methods];
/** What a method takes: a message or its init shape (plain fields). */
export type RequestOf<K extends keyof Methods> = MessageInitShape<Methods[K]["input"]>;
/** What a method answers. */
export type ResponseOf<K extends keyof Methods> = MessageShape<Methods[K]["output"]>;

/** The header a backend's key travels in (service/tapis_service/door/api_keys.py). */
export const API_KEY_HEADER = "x-api-key";

/** Reconnect soon after a server restart (grpc's default backoff grows to two minutes). */
export const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  "grpc.initial_reconnect_backoff_ms": 100,
  "grpc.max_reconnect_backoff_ms": 1000,
  "grpc.keepalive_time_ms": 20_000,
  "grpc.keepalive_timeout_ms": 10_000,
};

export interface ClientOptions {
  /** The server, HOST:PORT. */
  target: string;
  /** The server's CA (PEM): TLS trusting it. */
  ca?: Buffer | string;
  /** TLS with the system's roots (when no `ca`). */
  tls?: boolean;
  /** The backend's API key, sent with every call (`x-api-key`); players never hold one. */
  apiKey?: string;
  /** A seat token sent with every call (`authorization: Bearer`): a player's client. */
  token?: string;
  /** More grpc-js channel options (over CHANNEL_OPTIONS). */
  channelOptions?: grpc.ChannelOptions;
  /** How unary calls and streams are retried (DEFAULT_RETRY otherwise). */
  retry?: RetryOptions;
}

export interface CallOptions {
  /** A seat or spectator token for this call (over the client's). */
  token?: string;
  /** An API key for this call (over the client's); "" sends none. */
  apiKey?: string;
  /** Cancels the call (and its retries): a caller's cancel is never retried. */
  signal?: AbortSignal;
  /** Each attempt's deadline, in ms from its start. */
  timeoutMs?: number;
  /** This call's retry options, or false: a single attempt. */
  retry?: RetryOptions | false;
}

export class TapisClient {
  readonly target: string;
  private readonly channel: grpc.Client;
  private readonly apiKey: string | undefined;
  private readonly token: string | undefined;
  private readonly retry: RetryOptions;

  constructor(options: ClientOptions) {
    this.target = options.target;
    this.apiKey = options.apiKey;
    this.token = options.token;
    this.retry = options.retry ?? {};
    const credentials =
      options.ca !== undefined
        ? grpc.credentials.createSsl(Buffer.from(options.ca))
        : options.tls
          ? grpc.credentials.createSsl()
          : grpc.credentials.createInsecure();
    this.channel = new grpc.Client(options.target, credentials, {
      ...CHANNEL_OPTIONS,
      ...options.channelOptions,
    });
  }

  /** Closes the channel (calls in flight end CANCELLED). */
  close(): void {
    this.channel.close();
  }

  /** A fresh request id (a UUID): what a retry must send again, unchanged. */
  static requestId(): string {
    return randomUUID();
  }

  /**
   * One unary call, typed by the method's name: `call("createGame", {...})`. A request whose
   * method has a `request_id` and that comes without one is given one, once: every retry
   * sends the same. Retryable refusals (retry.ts) are retried with backoff; the others, and the
   * last one, are thrown as TapisError.
   */
  async call<K extends UnaryMethod>(
    name: K,
    request: RequestOf<K>,
    options: CallOptions = {},
  ): Promise<ResponseOf<K>> {
    const method = GameService.method[name];
    const message = create(method.input as DescMessage, request as never) as Record<string, unknown>;
    if (method.input.fields.some((f) => f.localName === "requestId") && !message.requestId) {
      message.requestId = TapisClient.requestId();
    }
    const once = (): Promise<ResponseOf<K>> => this.unaryOnce(name, message, options);
    if (options.retry === false) return once().catch((error) => Promise.reject(toTapisError(error)));
    try {
      return await withRetry(once, toTapisError, { ...this.retry, ...options.retry }, options.signal);
    } catch (error) {
      throw toTapisError(error);
    }
  }

  createGame(request: RequestOf<"createGame">, options?: CallOptions) {
    return this.call("createGame", request, options);
  }
  joinGame(request: RequestOf<"joinGame">, options?: CallOptions) {
    return this.call("joinGame", request, options);
  }
  getGame(request: RequestOf<"getGame">, options?: CallOptions) {
    return this.call("getGame", request, options);
  }
  submitAction(request: RequestOf<"submitAction">, options?: CallOptions) {
    return this.call("submitAction", request, options);
  }
  listGames(request: RequestOf<"listGames">, options?: CallOptions) {
    return this.call("listGames", request, options);
  }
  replaceSeat(request: RequestOf<"replaceSeat">, options?: CallOptions) {
    return this.call("replaceSeat", request, options);
  }
  endTable(request: RequestOf<"endTable">, options?: CallOptions) {
    return this.call("endTable", request, options);
  }
  createSpectatorToken(request: RequestOf<"createSpectatorToken">, options?: CallOptions) {
    return this.call("createSpectatorToken", request, options);
  }
  rotateSpectatorToken(request: RequestOf<"rotateSpectatorToken">, options?: CallOptions) {
    return this.call("rotateSpectatorToken", request, options);
  }
  ackResults(request: RequestOf<"ackResults">, options?: CallOptions) {
    return this.call("ackResults", request, options);
  }

  /**
   * One server stream, as it comes (no resumption): its responses, then its end; a refusal
   * or a dropped connection is thrown as TapisError. Leaving the loop cancels the call.
   */
  async *stream<K extends StreamMethod>(
    name: K,
    request: RequestOf<K>,
    options: CallOptions = {},
  ): AsyncGenerator<ResponseOf<K>> {
    const method = GameService.method[name];
    const message = create(method.input as DescMessage, request as never);
    const call = this.channel.makeServerStreamRequest(
      `/${GameService.typeName}/${method.name}`,
      (value: unknown) => Buffer.from(toBinary(method.input as DescMessage, value as never)),
      (bytes: Buffer) => fromBinary(method.output as DescMessage, bytes) as ResponseOf<K>,
      message,
      this.metadata(options),
      this.callOptions(options),
    );
    const cancel = (): void => call.cancel();
    options.signal?.addEventListener("abort", cancel, { once: true });
    try {
      for await (const response of call) yield response as ResponseOf<K>;
    } catch (error) {
      throw toTapisError(error);
    } finally {
      options.signal?.removeEventListener("abort", cancel);
      call.cancel();
    }
  }

  /**
   * A table's events, resumed: when the stream drops (a retryable refusal, grpc-js's ending
   * of a dropped connection, or STREAM_TOO_SLOW) it is opened again after the last sequence
   * seen, with backoff, so that no event is lost or repeated. Ends when the server ends the
   * stream; throws on a refusal that is not retryable (TOKEN_REVOKED...) or once the retries
   * in a row are spent.
   */
  async *streamEvents(
    request: MessageInitShape<typeof StreamEventsRequestSchema>,
    options: CallOptions = {},
  ): AsyncGenerator<StreamEventsResponse> {
    let after = request.afterSequence ?? 0n;
    yield* this.resumed(
      () => this.stream("streamEvents", { ...request, afterSequence: after }, options),
      (response) => {
        const last = response.events.at(-1);
        if (last !== undefined) after = last.sequence;
      },
      options,
    );
  }

  /**
   * Runs the stream `open` gives, again after each retryable end (with backoff; the count
   * starts over once a response comes), telling `seen` of each response before yielding it.
   */
  async *resumed<T>(
    open: () => AsyncGenerator<T>,
    seen: (response: T) => void,
    options: CallOptions = {},
  ): AsyncGenerator<T> {
    const retry = { ...DEFAULT_RETRY, ...this.retry, ...(options.retry || {}) };
    let failures = 0;
    for (;;) {
      try {
        for await (const response of open()) {
          failures = 0;
          seen(response);
          yield response;
        }
        return;
      } catch (error) {
        const refusal = toTapisError(error);
        const aborted = options.signal?.aborted ?? false;
        const tooSlow =
          refusal.code === grpc.status.RESOURCE_EXHAUSTED &&
          refusal.reason === ErrorReason.STREAM_TOO_SLOW;
        failures += 1;
        if (options.retry === false || aborted || failures >= retry.maxAttempts) throw refusal;
        if (!tooSlow && !isRetryable(refusal, aborted)) throw refusal;
        const delay = backoffDelay(failures, retry);
        retry.onRetry?.(refusal, failures, delay);
        await retry.sleep(delay, options.signal);
      }
    }
  }

  private unaryOnce<K extends UnaryMethod>(
    name: K,
    message: unknown,
    options: CallOptions,
  ): Promise<ResponseOf<K>> {
    const method = GameService.method[name];
    return new Promise((resolve, reject) => {
      const done = (): void => options.signal?.removeEventListener("abort", cancel);
      const call = this.channel.makeUnaryRequest(
        `/${GameService.typeName}/${method.name}`,
        (value: unknown) => Buffer.from(toBinary(method.input as DescMessage, value as never)),
        (bytes: Buffer) => fromBinary(method.output as DescMessage, bytes) as ResponseOf<K>,
        message,
        this.metadata(options),
        this.callOptions(options),
        (error, value) => {
          done();
          if (error) reject(error);
          else resolve(value as ResponseOf<K>);
        },
      );
      const cancel = (): void => call.cancel();
      if (options.signal?.aborted) call.cancel();
      else options.signal?.addEventListener("abort", cancel, { once: true });
    });
  }

  private metadata(options: CallOptions): grpc.Metadata {
    const metadata = new grpc.Metadata();
    const key = options.apiKey ?? this.apiKey;
    if (key) metadata.set(API_KEY_HEADER, key);
    const token = options.token ?? this.token;
    if (token) metadata.set("authorization", `Bearer ${token}`);
    return metadata;
  }

  private callOptions(options: CallOptions): grpc.CallOptions {
    return options.timeoutMs === undefined
      ? {}
      : { deadline: new Date(Date.now() + options.timeoutMs) };
  }
}

export { TapisError };
