// Resumed streams: StreamEvents opened again after the last sequence seen when it drops, and
// the results follower (store, then acknowledge; resume from the last stored cursor).
import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import {
  AckResultsResponseSchema,
  EventSchema,
  ResultRecordSchema,
  StreamEventsResponseSchema,
  WatchResultsResponseSchema,
  type AckResultsRequest,
  type ResultRecord,
  type StreamEventsRequest,
  type WatchResultsRequest,
} from "../src/gen/tapis/v1/game_service_pb.js";
import { ErrorReason } from "../src/gen/tapis/v1/errors_pb.js";
import { TapisError } from "../src/errors.js";
import { followResults } from "../src/results.js";
import { refusal, serve } from "./fake.js";

type Stream<Req> = grpc.ServerWritableStream<Req, unknown>;

function events(...sequences: number[]) {
  return create(StreamEventsResponseSchema, {
    events: sequences.map((s) => create(EventSchema, { sequence: BigInt(s) })),
  });
}

test("StreamEvents resumes after the last sequence seen, and stops at a final refusal", async () => {
  const asked: bigint[] = [];
  const { client, server } = await serve({
    streamEvents: (call: Stream<StreamEventsRequest>) => {
      asked.push(call.request.afterSequence);
      switch (asked.length) {
        case 1:
          call.write(events(1, 2));
          call.emit("error", refusal(grpc.status.UNAVAILABLE, "going away"));
          return;
        case 2:
          call.write(events(3));
          call.emit("error", refusal(grpc.status.RESOURCE_EXHAUSTED, "too slow",
            ErrorReason.STREAM_TOO_SLOW, { resume_after_sequence: "3" }));
          return;
        case 3:
          call.write(events(4));
          call.emit("error", refusal(grpc.status.UNAUTHENTICATED, "revoked", ErrorReason.TOKEN_REVOKED));
          return;
      }
    },
  });
  const seen: bigint[] = [];
  try {
    await assert.rejects(
      (async () => {
        for await (const response of client.streamEvents({ gameId: "g", afterSequence: 0n })) {
          seen.push(...response.events.map((e) => e.sequence));
        }
      })(),
      (error: unknown) => error instanceof TapisError && error.reason === ErrorReason.TOKEN_REVOKED,
    );
    assert.deepEqual(seen, [1n, 2n, 3n, 4n]);
    assert.deepEqual(asked, [0n, 2n, 3n]);
  } finally {
    client.close();
    server.forceShutdown();
  }
});

function records(...cursors: number[]) {
  return create(WatchResultsResponseSchema, {
    records: cursors.map((c) =>
      create(ResultRecordSchema, { cursor: BigInt(c), gameId: `g${c}`, labels: { match: "m" } }),
    ),
  });
}

async function feed(watch: (call: Stream<WatchResultsRequest>, calls: number) => void) {
  const acks: bigint[] = [];
  const watched: bigint[] = [];
  const served = await serve({
    watchResults: (call: Stream<WatchResultsRequest>) => {
      watched.push(call.request.afterCursor);
      watch(call, watched.length);
    },
    ackResults: (
      call: grpc.ServerUnaryCall<AckResultsRequest, unknown>,
      callback: grpc.sendUnaryData<unknown>,
    ) => {
      acks.push(call.request.cursor);
      callback(null, create(AckResultsResponseSchema, { acknowledgedCursor: call.request.cursor }));
    },
  });
  return { ...served, acks, watched };
}

test("the follower stores, then acknowledges, and resumes after the last record stored", async () => {
  const { client, server, acks, watched } = await feed((call, calls) => {
    if (calls === 1) {
      call.write(records(1, 2));
      call.write(records(3));
      call.emit("error", refusal(grpc.status.INTERNAL, "Received RST_STREAM with code 2"));
    } else {
      call.write(records(3, 4)); // a record already stored is never handed over twice
      call.write(records(5));
    }
  });
  const stored: ResultRecord[] = [];
  try {
    const last = await followResults(client, {
      lastStored: 0n,
      store: async (record) => {
        assert.ok(!acks.includes(record.cursor), "acknowledged before it was stored");
        stored.push(record);
      },
      until: (record) => record.cursor === 4n,
    });
    assert.equal(last, 4n);
    assert.deepEqual(stored.map((r) => r.cursor), [1n, 2n, 3n, 4n]);
    assert.deepEqual(stored.map((r) => r.labels), Array(4).fill({ match: "m" }));
    assert.deepEqual(watched, [0n, 3n]);
    assert.deepEqual(acks, [2n, 3n, 4n]);
  } finally {
    client.close();
    server.forceShutdown();
  }
});

test("after a crash the follower acknowledges its last stored cursor first, then resumes", async () => {
  const { client, server, acks, watched } = await feed((call) => call.write(records(8)));
  const stored: bigint[] = [];
  try {
    await followResults(client, {
      lastStored: 7n,
      store: async (record) => void stored.push(record.cursor),
      until: () => true,
    });
    assert.deepEqual(acks, [7n, 8n]);
    assert.deepEqual(watched, [7n]);
    assert.deepEqual(stored, [8n]);
  } finally {
    client.close();
    server.forceShutdown();
  }
});

test("a record the store failed to keep is never acknowledged", async () => {
  const { client, server, acks } = await feed((call) => call.write(records(1, 2)));
  try {
    await assert.rejects(
      followResults(client, {
        lastStored: 0n,
        store: async (record) => {
          if (record.cursor === 2n) throw new Error("disk full");
        },
      }),
      /disk full/,
    );
    assert.deepEqual(acks, []);
  } finally {
    client.close();
    server.forceShutdown();
  }
});
