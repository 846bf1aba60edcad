// The retry policy that is safe with request ids: which refusals a call may be sent again for
// (always with the same request_id, so the server applies it at most once), and how long to
// wait before each attempt (exponential backoff with jitter).
import { ErrorReason } from "./gen/tapis/v1/errors_pb.js";
import type { Refusal } from "./refusal.js";

/** The gRPC status codes the policy names (their numbers: the same over gRPC and the
 * WebSocket envelope; no transport needed, so that browsers may use the policy too). */
const Status = { CANCELLED: 1, RESOURCE_EXHAUSTED: 8, INTERNAL: 13, UNAVAILABLE: 14 } as const;

/** RESOURCE_EXHAUSTED reasons that pass with time (not a cap the caller must act on). */
const PASSING_EXHAUSTION = new Set<ErrorReason>([ErrorReason.RATE_LIMITED, ErrorReason.OVERLOADED]);

/**
 * Whether a refused call may be sent again as it was (the same request, the same request_id).
 *
 * - UNAVAILABLE, whatever its reason: the server is down, restarting (SERVER_STARTING), a
 *   cluster node in a rolling upgrade (NODE_VERSION_MISMATCH), a store that could not commit
 *   (STORE_UNAVAILABLE) or cannot tell whether it did (COMMIT_UNKNOWN): the retry answers what
 *   was applied, once.
 * - RESOURCE_EXHAUSTED with RATE_LIMITED or OVERLOADED: after a pause (not TOO_MANY_GAMES,
 *   TOO_MANY_STREAMS...: those need the caller to do something).
 * - grpc-js's own endings of a call whose connection dropped (the server was killed): INTERNAL
 *   "Received RST_STREAM ..." and CANCELLED, both without an ErrorInfo (the server never sends
 *   them), and CANCELLED only when the caller did not cancel (`callerCancelled`).
 *
 * Never INVALID_ARGUMENT, FAILED_PRECONDITION, NOT_FOUND, PERMISSION_DENIED, UNAUTHENTICATED,
 * ABORTED (the table moved: look again, then decide), ALREADY_EXISTS...: the same request
 * would be refused the same way.
 */
export function isRetryable(refusal: Refusal, callerCancelled = false): boolean {
  switch (refusal.code) {
    case Status.UNAVAILABLE:
      return true;
    case Status.RESOURCE_EXHAUSTED:
      return PASSING_EXHAUSTION.has(refusal.reason);
    case Status.INTERNAL:
      return refusal.reasonName === "" && /RST_STREAM/.test(refusal.details);
    case Status.CANCELLED:
      return !callerCancelled && refusal.reasonName === "";
    default:
      return false;
  }
}

/** How a call is retried. */
export interface RetryOptions {
  /** Attempts in all, the first included (default 12; 1: never retry). */
  maxAttempts?: number;
  /** The first backoff, in ms (default 100). */
  initialDelayMs?: number;
  /** The longest backoff, in ms (default 3000). */
  maxDelayMs?: number;
  /** The growth of the backoff per attempt (default 2). */
  multiplier?: number;
  /** A random number in [0, 1) (default Math.random): the jitter. */
  random?: () => number;
  /** Waits `ms` (default: a timer); rejects when `signal` aborts. Tests inject their own. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Told of each retry before its pause (attempt: 1 for the first retry). */
  onRetry?: (refusal: Refusal, attempt: number, delayMs: number) => void;
}

export const DEFAULT_RETRY: Required<Omit<RetryOptions, "onRetry">> = {
  maxAttempts: 12,
  initialDelayMs: 100,
  maxDelayMs: 3000,
  multiplier: 2,
  random: Math.random,
  sleep: abortableSleep,
};

/**
 * The pause before retry number `attempt` (1 for the first retry): "equal jitter", half the
 * exponential step plus a random part of the other half, so that clients cut off together do
 * not come back together, and no pause is shorter than half its step.
 */
export function backoffDelay(attempt: number, options: RetryOptions = {}): number {
  const o = { ...DEFAULT_RETRY, ...options };
  const step = Math.min(o.maxDelayMs, o.initialDelayMs * o.multiplier ** Math.max(0, attempt - 1));
  return step / 2 + o.random() * (step / 2);
}

/** A timer that rejects with the signal's reason when it aborts. */
export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Runs `attempt` until it succeeds, a refusal is not retryable, the attempts are spent or
 * `signal` aborts; `attempt` must send the same request each time (the same request_id).
 * `decode` turns what `attempt` throws into a Refusal (or undefined: not a refusal, rethrown).
 */
export async function withRetry<T>(
  attempt: () => Promise<T>,
  decode: (error: unknown) => Refusal | undefined,
  options: RetryOptions = {},
  signal?: AbortSignal,
): Promise<T> {
  const o = { ...DEFAULT_RETRY, ...options };
  for (let tried = 1; ; tried++) {
    try {
      return await attempt();
    } catch (error) {
      const refusal = decode(error);
      if (refusal === undefined || tried >= o.maxAttempts) throw error;
      if (!isRetryable(refusal, signal?.aborted ?? false)) throw error;
      const delay = backoffDelay(tried, o);
      options.onRetry?.(refusal, tried, delay);
      await o.sleep(delay, signal);
    }
  }
}
