// The browser's reconnecting envelope client over fake sockets and a manual timer: a new socket
// after each loss with a growing pause (reset once one opens), requests failing UNAVAILABLE when
// their socket closes, followed tables following on from their last sequence (after a new
// socket, after a stream cut short), a final refusal ending the follow, unfollow stopping it.
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
import {
  EnvelopeError,
  ReconnectingEnvelope,
  type ConnectionState,
  type SocketLike,
} from "../src/browser.js";

type Reply = MessageInitShape<typeof ServerFrameSchema>["response"];

/** A socket the test opens, closes and answers by hand. */
class FakeSocket implements SocketLike {
  binaryType = "blob";
  readyState = 0;
  onopen: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: ((event: unknown) => void) | null = null;
  readonly sent: ClientFrame[] = [];

  send(data: Uint8Array): void {
    if (this.readyState !== 1) throw new Error("not open");
    this.sent.push(fromBinary(ClientFrameSchema, data));
  }

  close(): void {
    this.lost();
  }

  opens(): void {
    this.readyState = 1;
    this.onopen?.({});
  }

  lost(): void {
    this.readyState = 3;
    this.onclose?.({});
  }

  reply(id: bigint, response: Reply): void {
    const bytes = toBinary(ServerFrameSchema, create(ServerFrameSchema, { id, response }));
    this.onmessage?.({ data: bytes.slice().buffer });
  }

  last(): ClientFrame {
    return this.sent.at(-1)!;
  }
}

/** Timers run only when the test says. */
class ManualTimers {
  readonly due: { ms: number; callback: () => void }[] = [];
  set = (callback: () => void, ms: number): void => void this.due.push({ ms, callback });
  runAll(): void {
    for (const timer of this.due.splice(0)) timer.callback();
  }
}

const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function refusal(code: number, reason: string, metadata: Record<string, string> = {}): Reply {
  const info = create(ErrorInfoSchema, { reason, domain: "tapis.v1", metadata });
  return { case: "refusal", value: { code, message: reason, details: [anyPack(ErrorInfoSchema, info)] } };
}

function setUp() {
  const sockets: FakeSocket[] = [];
  const timers = new ManualTimers();
  const states: ConnectionState[] = [];
  const client = new ReconnectingEnvelope(
    () => {
      const socket = new FakeSocket();
      sockets.push(socket);
      return socket;
    },
    { random: () => 1, setTimer: timers.set },
  );
  client.onState = (state) => states.push(state);
  return { client, sockets, timers, states };
}

test("a lost socket is opened again after a growing pause, reset once one opens", async () => {
  const { client, sockets, timers, states } = setUp();
  const answer = client.call("listGames", {});
  sockets[0]!.opens();
  await settle();
  sockets[0]!.reply(sockets[0]!.last().id, { case: "listGames", value: {} });
  assert.ok(await answer);
  const delays: number[] = [];
  sockets[0]!.lost();
  for (let n = 1; n <= 6; n++) {
    await settle();
    delays.push(timers.due[0]!.ms);
    timers.runAll();
    sockets[n]!.lost(); // refused: the server is still down
  }
  assert.deepEqual(delays, [250, 500, 1000, 2000, 4000, 4000]);
  await settle();
  timers.runAll();
  sockets[7]!.opens();
  await settle();
  assert.equal(states.at(-1), "open");
  assert.deepEqual(states.slice(0, 4), ["connecting", "open", "closed", "connecting"]);
  sockets[7]!.lost();
  await settle();
  assert.equal(timers.due[0]!.ms, 250);
});

test("a request whose socket closes fails UNAVAILABLE; a later one waits for the new socket", async () => {
  const { client, sockets, timers } = setUp();
  void client.connected();
  sockets[0]!.opens();
  await settle();
  const lost = client.call("getGame", { gameId: "g" }, { seatToken: "t" });
  await settle();
  sockets[0]!.lost();
  await assert.rejects(lost, (error: unknown) =>
    error instanceof EnvelopeError && error.code === 14 && error.reasonName === "");
  const later = client.call("getGame", { gameId: "g" }, { seatToken: "t" });
  await settle();
  timers.runAll();
  sockets[1]!.opens();
  await settle();
  const frame = sockets[1]!.last();
  assert.equal(frame.request.case, "getGame");
  assert.equal(frame.seatToken, "t");
  sockets[1]!.reply(frame.id, { case: "getGame", value: { game: { gameId: "g" } } });
  assert.equal((await later).game?.gameId, "g");
  await assert.rejects(
    (async () => {
      const refused = client.call("submitAction", { gameId: "g" }, { seatToken: "t" });
      await settle();
      sockets[1]!.reply(sockets[1]!.last().id, refusal(9, "NOT_YOUR_TURN"));
      return refused;
    })(),
    (error: unknown) => error instanceof EnvelopeError && error.reason === ErrorReason.NOT_YOUR_TURN,
  );
});

test("a followed table follows on from its last sequence on a new socket and after a cut", async () => {
  const { client, sockets, timers } = setUp();
  const seen: bigint[] = [];
  const following = client.follow("g", { seatToken: "t" }, 3n,
    (batch) => seen.push(...batch.events.map((e) => e.sequence)), () => assert.fail("not ended"));
  sockets[0]!.opens();
  await following;
  const first = sockets[0]!.last();
  assert.equal(first.request.case, "streamEvents");
  assert.equal(first.request.case === "streamEvents" && first.request.value.afterSequence, 3n);
  assert.equal(first.seatToken, "t");
  assert.equal(sockets[0]!.sent.filter((f) => f.request.case === "streamEvents").length, 1);
  sockets[0]!.reply(first.id, { case: "events", value: { events: [{ sequence: 4n }, { sequence: 5n }] } });
  assert.equal(client.lastSequence("g"), 5n);

  sockets[0]!.lost();
  await settle();
  timers.runAll();
  sockets[1]!.opens();
  await settle();
  const again = sockets[1]!.last();
  assert.equal(again.request.case === "streamEvents" && again.request.value.afterSequence, 5n);
  sockets[1]!.reply(again.id, { case: "events", value: { events: [{ sequence: 6n }] } });

  // Cut short: the server says where to follow on from, after the resume pause.
  sockets[1]!.reply(again.id, refusal(8, "STREAM_TOO_SLOW", { resume_after_sequence: "9" }));
  assert.equal(sockets[1]!.sent.length, 1);
  assert.equal(timers.due[0]!.ms, 250);
  timers.runAll();
  const resumed = sockets[1]!.last();
  assert.notEqual(resumed.id, again.id);
  assert.equal(resumed.request.case === "streamEvents" && resumed.request.value.afterSequence, 9n);
  assert.deepEqual(seen, [4n, 5n, 6n]);
});

test("a final refusal ends the follow; unfollow stops the stream and never follows on", async () => {
  const { client, sockets, timers } = setUp();
  const ended: EnvelopeError[] = [];
  const following = client.follow("g", { seatToken: "t" }, 0n, () => undefined, (e) => ended.push(e));
  sockets[0]!.opens();
  await following;
  sockets[0]!.reply(sockets[0]!.last().id, refusal(16, "TOKEN_REVOKED"));
  assert.equal(ended.length, 1);
  assert.equal(ended[0]!.reason, ErrorReason.TOKEN_REVOKED);
  assert.equal(timers.due.length, 0);
  assert.equal(client.lastSequence("g"), undefined);

  await client.follow("h", {}, 0n, () => undefined, () => assert.fail("not ended"));
  const stream = sockets[0]!.last();
  client.unfollow("h");
  const stop = sockets[0]!.last();
  assert.equal(stop.request.case === "stopEvents" && stop.request.value.streamId, stream.id);
  sockets[0]!.lost();
  await settle();
  timers.runAll();
  sockets[1]!.opens();
  await settle();
  assert.equal(sockets[1]!.sent.length, 0);
});

test("a table followed with presence asks for it on every stream and hands its batches on", async () => {
  const { client, sockets, timers } = setUp();
  const seen: [number, boolean][] = [];
  const following = client.follow("g", { seatToken: "t" }, 2n,
    (batch) => seen.push(...batch.presence.map((p): [number, boolean] => [p.seat, p.connected])),
    () => assert.fail("not ended"), { withPresence: true });
  sockets[0]!.opens();
  await following;
  const first = sockets[0]!.last();
  assert.equal(first.request.case === "streamEvents" && first.request.value.withPresence, true);
  sockets[0]!.reply(first.id, { case: "events", value: { presence: [{ seat: 1, connected: false }] } });
  assert.equal(client.lastSequence("g"), 2n); // a presence batch moves no sequence
  sockets[0]!.lost();
  await settle();
  timers.runAll();
  sockets[1]!.opens();
  await settle();
  const again = sockets[1]!.last();
  assert.equal(again.request.case === "streamEvents" && again.request.value.withPresence, true);
  assert.equal(again.request.case === "streamEvents" && again.request.value.afterSequence, 2n);
  sockets[1]!.reply(again.id, { case: "events", value: { presence: [{ seat: 1, connected: true }] } });
  assert.deepEqual(seen, [[1, false], [1, true]]);

  await client.follow("h", {}, 0n, () => undefined, () => assert.fail("not ended"));
  const plain = sockets[1]!.last();
  assert.equal(plain.request.case === "streamEvents" && plain.request.value.withPresence, false);
});
