// The results follower: WatchResults, each record handed to the caller's durable store, then
// AckResults once the store returned; after a dropped stream it resumes from the last record
// stored, and after a crash of the backend from the last cursor its store holds
// (docs/integration.md, "Watch the results and acknowledge them").
import type { ResultRecord } from "./gen/tapis/v1/game_service_pb.js";
import type { CallOptions, TapisClient } from "./client.js";

export interface FollowOptions extends CallOptions {
  /**
   * The last cursor the store holds (0n: none). At start it is acknowledged first (records
   * stored before a crash but not yet acknowledged are otherwise held until a later ack), and
   * the feed resumes after it: nothing skipped, nothing repeated.
   */
  lastStored: bigint;
  /**
   * Stores one record durably (the backend's database: the record and its cursor together);
   * it is acknowledged only after this returns. Records come in cursor order, each once
   * (seat_idle records too: a store that does not want them just returns).
   */
  store: (record: ResultRecord) => Promise<void>;
  /** Stop after the record for which this says true (stored and acknowledged first). */
  until?: (record: ResultRecord) => boolean;
}

/**
 * Follows the calling backend's results until `until` says so or `signal` aborts (then it
 * rejects: a TapisError CANCELLED, or the signal's reason during a pause); returns the last
 * cursor stored and acknowledged.
 * A refusal that is not retryable (UNAUTHENTICATED, INVALID_CURSOR...) rejects as TapisError.
 */
export async function followResults(client: TapisClient, options: FollowOptions): Promise<bigint> {
  let stored = options.lastStored;
  if (stored > 0n) await client.ackResults({ cursor: stored }, options);
  const feed = client.resumed(
    () => client.stream("watchResults", { afterCursor: stored }, options),
    () => undefined,
    options,
  );
  for await (const response of feed) {
    let done = false;
    for (const record of response.records) {
      if (record.cursor <= stored) continue; // never twice, whatever a resumed stream sends
      await options.store(record);
      stored = record.cursor;
      if (options.until?.(record)) {
        done = true;
        break;
      }
    }
    await client.ackResults({ cursor: stored }, options);
    if (done) {
      await feed.return(undefined);
      break;
    }
  }
  return stored;
}
