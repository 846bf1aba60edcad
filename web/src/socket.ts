// The player WebSocket (docs/websocket.md) is @tapis/client/browser's ReconnectingEnvelope:
// requests matched to answers by id, refusals decoded to ErrorReason, a new socket after a loss
// (with backoff), followed tables followed on from their last sequence. What the pages add:
// telling a lost socket from a refusal.
import { EnvelopeError } from "@tapis/client/browser";

export { backoffDelay, EnvelopeError, isRetryable, ReconnectingEnvelope, type ConnectionState,
         type Credentials, type EnvelopeRequest, type EnvelopeResponse } from "@tapis/client/browser";

/** Whether `error` is the socket closing under a request, not a refusal by the server (the
 * page reads the table again once a new socket opens). */
export function disconnected(error: unknown): boolean {
  return error instanceof EnvelopeError && error.code === 14 && error.reasonName === "";
}
