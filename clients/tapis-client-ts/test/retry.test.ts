// The retry policy: what is retried (and with the same request_id), what never is, the
// backoff's growth and jitter, and the decoding of ErrorInfo into ErrorReason.
import assert from "node:assert/strict";
import { test } from "node:test";
import { create, type MessageShape } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import {
  CreateGameResponseSchema,
  GetGameResponseSchema,
  type CreateGameRequest,
} from "../src/gen/tapis/v1/game_service_pb.js";
import { ErrorReason } from "../src/gen/tapis/v1/errors_pb.js";
import { decodeRefusal, TapisError, type Refusal } from "../src/errors.js";
import { backoffDelay, isRetryable, withRetry } from "../src/retry.js";
import { refusal, serve } from "./fake.js";

function refused(code: grpc.status, reason = "", details = ""): Refusal {
  return {
    code,
    reason: reason ? (ErrorReason as unknown as Record<string, ErrorReason>)[reason]! : 0,
    reasonName: reason,
    metadata: {},
    details,
  };
}

test("retried: UNAVAILABLE of any reason, passing exhaustion, grpc-js's dropped connection", () => {
  const S = grpc.status;
  for (const reason of ["", "SERVER_STARTING", "NODE_VERSION_MISMATCH", "COMMIT_UNKNOWN"]) {
    assert.equal(isRetryable(refused(S.UNAVAILABLE, reason)), true, reason);
  }
  assert.equal(isRetryable(refused(S.RESOURCE_EXHAUSTED, "RATE_LIMITED")), true);
  assert.equal(isRetryable(refused(S.RESOURCE_EXHAUSTED, "OVERLOADED")), true);
  assert.equal(
    isRetryable(refused(S.INTERNAL, "", "Received RST_STREAM with code 2 triggered by internal client error")),
    true,
  );
  assert.equal(isRetryable(refused(S.CANCELLED, "", "Call cancelled")), true);
});

test("never retried: the caller's cancel, caps, and every refusal of the request itself", () => {
  const S = grpc.status;
  assert.equal(isRetryable(refused(S.CANCELLED, "", "Cancelled on client"), true), false);
  assert.equal(isRetryable(refused(S.INTERNAL, "", "some other failure")), false);
  assert.equal(isRetryable(refused(S.RESOURCE_EXHAUSTED, "TOO_MANY_GAMES")), false);
  assert.equal(isRetryable(refused(S.RESOURCE_EXHAUSTED, "TOO_MANY_STREAMS")), false);
  assert.equal(isRetryable(refused(S.INVALID_ARGUMENT, "INVALID_OPTIONS")), false);
  assert.equal(isRetryable(refused(S.FAILED_PRECONDITION, "NOT_YOUR_TURN")), false);
  assert.equal(isRetryable(refused(S.ABORTED, "VERSION_MISMATCH")), false);
  assert.equal(isRetryable(refused(S.UNAUTHENTICATED, "TOKEN_REVOKED")), false);
  assert.equal(isRetryable(refused(S.PERMISSION_DENIED, "NOT_YOUR_TABLE")), false);
  assert.equal(isRetryable(refused(S.NOT_FOUND, "GAME_NOT_FOUND")), false);
  assert.equal(isRetryable(refused(S.DEADLINE_EXCEEDED)), false);
});

test("the backoff doubles up to its cap, each pause between half its step and the step", () => {
  const low = (attempt: number) => backoffDelay(attempt, { random: () => 0 });
  const high = (attempt: number) => backoffDelay(attempt, { random: () => 0.999999 });
  assert.deepEqual([1, 2, 3, 4, 5, 6, 7].map(low), [50, 100, 200, 400, 800, 1500, 1500]);
  assert.ok(Math.abs(high(1) - 100) < 0.01 && Math.abs(high(7) - 3000) < 0.01);
  assert.equal(backoffDelay(2, { random: () => 0.5, initialDelayMs: 10, multiplier: 3 }), 22.5);
});

test("withRetry stops at the first refusal it may not retry, and after its attempts", async () => {
  const pauses: number[] = [];
  let calls = 0;
  const options = { random: () => 0, sleep: async (ms: number) => void pauses.push(ms) };
  await assert.rejects(
    withRetry(
      async () => {
        calls += 1;
        throw calls < 3 ? refused(grpc.status.UNAVAILABLE) : refused(grpc.status.NOT_FOUND);
      },
      (e) => e as Refusal,
      options,
    ),
  );
  assert.equal(calls, 3);
  assert.deepEqual(pauses, [50, 100]);
  calls = 0;
  await assert.rejects(
    withRetry(
      async () => {
        calls += 1;
        throw refused(grpc.status.UNAVAILABLE);
      },
      (e) => e as Refusal,
      { ...options, maxAttempts: 4 },
    ),
  );
  assert.equal(calls, 4);
});

test("decodeRefusal reads ErrorInfo from grpc-status-details-bin into ErrorReason", () => {
  const sent = refusal(grpc.status.FAILED_PRECONDITION, "not now", ErrorReason.NOT_YOUR_TURN, {
    seat: "1",
  });
  const decoded = decodeRefusal(sent.code!, sent.details!, sent.metadata);
  assert.equal(decoded.reason, ErrorReason.NOT_YOUR_TURN);
  assert.equal(decoded.reasonName, "NOT_YOUR_TURN");
  assert.deepEqual(decoded.metadata, { seat: "1" });
  const bare = decodeRefusal(grpc.status.UNAVAILABLE, "down", new grpc.Metadata());
  assert.equal(bare.reason, ErrorReason.UNSPECIFIED);
  assert.equal(bare.reasonName, "");
});

test("a call is retried with the same request_id, given one when it had none", async () => {
  const seen: string[] = [];
  const answers = [
    refusal(grpc.status.UNAVAILABLE, "starting", ErrorReason.SERVER_STARTING),
    refusal(grpc.status.UNAVAILABLE, "unknown", ErrorReason.COMMIT_UNKNOWN),
    refusal(grpc.status.RESOURCE_EXHAUSTED, "slow down", ErrorReason.RATE_LIMITED),
  ];
  const { client, server } = await serve({
    createGame: (call: grpc.ServerUnaryCall<CreateGameRequest, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      seen.push(call.request.requestId);
      const next = answers.shift();
      if (next) callback(next, null);
      else callback(null, create(CreateGameResponseSchema, {}));
    },
  });
  try {
    await client.createGame({ seats: 2 });
    assert.equal(seen.length, 4);
    assert.equal(new Set(seen).size, 1);
    assert.match(seen[0]!, /^[0-9a-f-]{36}$/);
    seen.length = 0;
    await client.createGame({ seats: 2, requestId: "mine" });
    assert.deepEqual(seen, ["mine"]);
  } finally {
    client.close();
    server.forceShutdown();
  }
});

test("a refusal of the request is thrown at once, typed, never retried", async () => {
  let calls = 0;
  const { client, server } = await serve({
    getGame: (_call: unknown, callback: grpc.sendUnaryData<unknown>) => {
      calls += 1;
      callback(refusal(grpc.status.INVALID_ARGUMENT, "no", ErrorReason.INVALID_ARGUMENT), null);
    },
  });
  try {
    await assert.rejects(client.getGame({ gameId: "g" }), (error: unknown) => {
      assert.ok(error instanceof TapisError);
      assert.equal(error.code, grpc.status.INVALID_ARGUMENT);
      assert.equal(error.reason, ErrorReason.INVALID_ARGUMENT);
      return true;
    });
    assert.equal(calls, 1);
  } finally {
    client.close();
    server.forceShutdown();
  }
});

test("a call the caller cancels ends CANCELLED and is not retried", async () => {
  let calls = 0;
  const { client, server } = await serve({
    getGame: (_call: unknown, callback: grpc.sendUnaryData<MessageShape<typeof GetGameResponseSchema>>) => {
      calls += 1;
      void callback; // never answers: the caller gives up
    },
  });
  const controller = new AbortController();
  try {
    const pending = client.getGame({ gameId: "g" }, { signal: controller.signal });
    while (calls === 0) await new Promise((resolve) => setImmediate(resolve));
    controller.abort();
    await assert.rejects(pending, (error: unknown) => {
      assert.ok(error instanceof TapisError);
      assert.equal(error.code, grpc.status.CANCELLED);
      return true;
    });
    assert.equal(calls, 1);
  } finally {
    client.close();
    server.forceShutdown();
  }
});

test("a call cut by the server's death is sent again, same request_id, to the server back", async () => {
  const seen: string[] = [];
  let back: () => void = () => undefined;
  const serverBack = new Promise<void>((resolve) => (back = resolve));
  const codes: grpc.status[] = [];
  const first = await serve(
    {
      createGame: (call: grpc.ServerUnaryCall<CreateGameRequest, unknown>) => {
        seen.push(call.request.requestId); // never answers: the server dies first
      },
    },
    { retry: { sleep: () => serverBack, onRetry: (refusal) => void codes.push(refusal.code) } },
  );
  const pending = first.client.createGame({ seats: 2 });
  while (seen.length === 0) await new Promise((resolve) => setImmediate(resolve));
  first.server.forceShutdown(); // the connection drops under the call in flight
  const port = Number(first.target.split(":")[1]);
  const second = await serve(
    {
      createGame: (call: grpc.ServerUnaryCall<CreateGameRequest, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        seen.push(call.request.requestId);
        callback(null, create(CreateGameResponseSchema, {}));
      },
    },
    {},
    port,
  );
  back();
  try {
    await pending;
    assert.equal(seen.length, 2);
    assert.equal(seen[0], seen[1]);
    assert.ok(codes.length >= 1, "retried");
  } finally {
    first.client.close();
    second.client.close();
    second.server.forceShutdown();
  }
});
