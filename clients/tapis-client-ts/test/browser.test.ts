// The browser's envelope client over a fake socket: typed answers matched by id, refusals
// decoded to ErrorReason, event streams stopped when the loop is left, a closed socket.
import assert from "node:assert/strict";
import { test } from "node:test";
import { create, fromBinary, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { ErrorInfoSchema } from "../src/gen/google/rpc/error_details_pb.js";
import {
  ClientFrameSchema,
  ServerFrameSchema,
  type ClientFrame,
} from "../src/gen/tapis/v1/websocket_pb.js";
import { ErrorReason } from "../src/gen/tapis/v1/errors_pb.js";
import { EnvelopeClient, EnvelopeError, type SocketLike } from "../src/browser.js";

type Reply = MessageInitShape<typeof ServerFrameSchema>["response"];

/** A socket whose server is `serve`: each frame sent gets the replies it returns. */
function fakeSocket(serve: (frame: ClientFrame) => Reply[]) {
  const sent: ClientFrame[] = [];
  const socket: SocketLike = {
    binaryType: "blob",
    readyState: 1,
    onopen: null,
    onmessage: null,
    onclose: null,
    send(data: Uint8Array) {
      const frame = fromBinary(ClientFrameSchema, data);
      sent.push(frame);
      for (const response of serve(frame)) {
        const bytes = toBinary(ServerFrameSchema, create(ServerFrameSchema, { id: frame.id, response }));
        setImmediate(() => socket.onmessage?.({ data: bytes.slice().buffer }));
      }
    },
    close() {
      (socket as { readyState: number }).readyState = 3;
      setImmediate(() => socket.onclose?.({}));
    },
  };
  return { socket, sent };
}

test("answers come typed and matched by id; refusals as ErrorReason", async () => {
  const { socket, sent } = fakeSocket((frame) => {
    if (frame.request.case === "getGame") {
      return [{ case: "getGame", value: { game: { gameId: frame.request.value.gameId } } }];
    }
    const info = create(ErrorInfoSchema, { reason: "NOT_YOUR_TURN", domain: "tapis.v1" });
    return [{ case: "refusal", value: { code: 9, message: "wait", details: [anyPack(ErrorInfoSchema, info)] } }];
  });
  const client = new EnvelopeClient(socket);
  const answer = await client.call("getGame", { gameId: "g1" }, { seatToken: "t" });
  assert.equal(answer.game?.gameId, "g1");
  assert.equal(sent[0]?.seatToken, "t");
  await assert.rejects(
    client.call("submitAction", { gameId: "g1" }, { seatToken: "t" }),
    (error: unknown) =>
      error instanceof EnvelopeError && error.code === 9 && error.reason === ErrorReason.NOT_YOUR_TURN,
  );
  assert.equal(socket.binaryType, "arraybuffer");
});

test("an event stream yields its batches and is stopped when the loop is left", async () => {
  const { socket, sent } = fakeSocket((frame) =>
    frame.request.case === "streamEvents"
      ? [1n, 2n, 3n].map((sequence) => ({ case: "events" as const, value: { events: [{ sequence }] } }))
      : [{ case: "eventsStopped", value: {} }],
  );
  const client = new EnvelopeClient(socket);
  const seen: bigint[] = [];
  for await (const batch of client.streamEvents({ gameId: "g", afterSequence: 0n })) {
    seen.push(...batch.events.map((e) => e.sequence));
    if (seen.length === 2) break;
  }
  assert.deepEqual(seen, [1n, 2n]);
  const stop = sent.at(-1)!;
  assert.equal(stop.request.case, "stopEvents");
  assert.equal(stop.request.case === "stopEvents" && stop.request.value.streamId, sent[0]!.id);
});

test("a socket that closes fails what waits with UNAVAILABLE", async () => {
  const { socket } = fakeSocket(() => []);
  const client = new EnvelopeClient(socket);
  const pending = client.call("listGames", {});
  await new Promise((resolve) => setImmediate(resolve));
  client.close();
  await assert.rejects(pending, (error: unknown) => error instanceof EnvelopeError && error.code === 14);
});
