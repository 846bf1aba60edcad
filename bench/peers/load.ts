// The War load of `make bench-peers`, against Tapis over its WebSocket and against Colyseus's two
// rooms, in alternating turns: `tables` tables per side, two clients per table on connections of
// their own, one action in flight per table (the awaited seat reveals; the next action starts
// once its answer is back and both seats saw it: its events, or the synchronised state). Server
// CPU is read from /proc for each side during its own turns. Usage: node load.mjs CONFIG_JSON;
// prints one JSON object (per side: actions, actions/s, server CPU µs per action, p50, p99).
import { readFileSync } from "node:fs";
import { create, fromBinary, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { Client as ColyseusClient } from "@colyseus/sdk";
import WebSocket from "ws";
import { ClientFrameSchema, ServerFrameSchema, type ServerFrame } from "../../web/src/gen/tapis/v1/websocket_pb";
import { GameKind, SeatType } from "../../web/src/gen/tapis/v1/game_service_pb";

type Kind = "tapis" | "colyseus_messages" | "colyseus_state";

interface Config {
  tables: number;
  turns: number;
  turn_s: number;
  sides: { name: string; kind: Kind; url: string; pid: number }[];
}

interface Table {
  /** One action; true when its game ended and the table started the next one. */
  act(): Promise<boolean>;
}

const TICKS = 100; // USER_HZ on Linux

// The server's event loop's sleeps: its main thread's voluntary context switches (each a wait
// in epoll with nothing to do), a diagnostic of how many actions one wake-up serves.
function sleeps(pid: number): number {
  const found = /voluntary_ctxt_switches:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return found ? Number(found[1]) : 0;
}

function cpuSeconds(pid: number): number {
  const text = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / TICKS;
}

// --- Tapis over its WebSocket ------------------------------------------------------------------

type Request = MessageInitShape<typeof ClientFrameSchema>["request"];

class TapisSocket {
  nextId = 0n;
  waiting = new Map<bigint, (frame: ServerFrame) => void>();
  streams = new Map<bigint, (frame: ServerFrame) => void>();
  constructor(readonly socket: WebSocket) {
    socket.on("message", (data: Buffer) => {
      const frame = fromBinary(ServerFrameSchema, data);
      const waiter = this.waiting.get(frame.id);
      if (waiter) {
        this.waiting.delete(frame.id);
        waiter(frame);
      } else this.streams.get(frame.id)?.(frame);
    });
  }

  static open(url: string): Promise<TapisSocket> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(url);
      socket.once("open", () => resolve(new TapisSocket(socket)));
      socket.once("error", reject);
    });
  }

  send(request: Request, token = ""): bigint {
    this.nextId += 1n;
    this.socket.send(toBinary(ClientFrameSchema, create(ClientFrameSchema, { id: this.nextId, seatToken: token, request })));
    return this.nextId;
  }

  call(request: Request, token = ""): Promise<ServerFrame> {
    return new Promise((resolve, reject) => {
      this.waiting.set(this.send(request, token), (frame) => {
        if (frame.response.case === "refusal") reject(new Error(frame.response.value.message));
        else resolve(frame);
      });
    });
  }
}

let requests = 0;
const requestId = (): string => `load-${process.pid}-${++requests}`;

async function tapisTable(url: string, index: number): Promise<Table> {
  const sockets = [await TapisSocket.open(url), await TapisSocket.open(url)];
  const created = await sockets[0].call({ case: "createGame", value: {
    // the oneof `options` as protobuf-es sets it (a `war` key of its own would be dropped, and
    // the table would play War's default target, 50, against the rooms' 1000)
    kind: GameKind.WAR, seats: 2, requestId: `peers-${index}`, options: { case: "war", value: { targetPoints: 1000 } },
    seatConfigs: [{ type: SeatType.PERSON }, { type: SeatType.PERSON }] } });
  const gameId = created.response.case === "createGame" ? created.response.value.game!.gameId : "";
  const tokens: string[] = [];
  for (const seat of [0, 1]) {
    const joined = await sockets[seat].call({ case: "joinGame", value: { gameId, seat, displayName: `p${seat}`, requestId: requestId() } });
    tokens.push(joined.response.case === "joinGame" ? joined.response.value.seatToken : "");
  }
  const viewed = await sockets[0].call({ case: "getGame", value: { gameId } }, tokens[0]);
  const view = viewed.response.case === "getGame" ? viewed.response.value.game! : undefined!;
  let awaited = view.awaitingSeats[0];
  const seen = [view.lastSequence, view.lastSequence];
  let wanted = 0n;
  let arrived: (() => void) | null = null;
  sockets.forEach((socket, seat) => {
    const stream = socket.send({ case: "streamEvents", value: { gameId, afterSequence: view.lastSequence } }, tokens[seat]);
    socket.streams.set(stream, (frame) => {
      if (frame.response.case !== "events") return;
      const events = frame.response.value.events;
      seen[seat] = events[events.length - 1].sequence;
      if (arrived && seen[0] >= wanted && seen[1] >= wanted) arrived();
    });
  });
  return {
    async act() {
      const answer = await sockets[awaited].call({ case: "submitAction", value: {
        gameId, requestId: requestId(), action: { action: { case: "war", value: { action: { case: "reveal", value: {} } } } } } }, tokens[awaited]);
      const events = answer.response.case === "submitAction" ? answer.response.value.events : [];
      const last = events[events.length - 1];
      wanted = last.sequence;
      if (seen[0] < wanted || seen[1] < wanted) await new Promise<void>((resolve) => { arrived = resolve; });
      arrived = null;
      if (last.awaitingSeats.length) {
        awaited = last.awaitingSeats[0];
        return false;
      }
      await sockets[0].call({ case: "submitAction", value: { gameId, requestId: requestId(), action: { action: { case: "startNextGame", value: {} } } } }, tokens[0]);
      const again = await sockets[0].call({ case: "getGame", value: { gameId } }, tokens[0]);
      if (again.response.case === "getGame") awaited = again.response.value.game!.awaitingSeats[0];
      return true;
    },
  };
}

// --- Colyseus -------------------------------------------------------------------------------------

async function colyseusTable(url: string, index: number, synced: boolean): Promise<Table> {
  const name = synced ? "war_state" : "war";
  const rooms = [await new ColyseusClient(url).create(name, { seed: index + 1, target: 1000 })];
  rooms.push(await new ColyseusClient(url).joinById(rooms[0].roomId));
  let awaited = (index + 1) % 2;
  const seen = [0, 0];
  let wanted = 0;
  let arrived: (() => void) | null = null;
  const answers = new Map<number, (answer: any) => void>();
  rooms.forEach((room, seat) => {
    const saw = (version: number): void => {
      seen[seat] = version;
      if (arrived && seen[0] >= wanted && seen[1] >= wanted) arrived();
    };
    if (synced) room.onStateChange((state: any) => saw(state.version));
    else room.onMessage("events", (message: any) => saw(message.version));
    room.onMessage("answer", (message: any) => {
      answers.get(message.id)?.(message);
      answers.delete(message.id);
    });
  });
  let ids = 0;
  const call = (seat: number, type: string): Promise<any> => new Promise((resolve, reject) => {
    const id = ++ids;
    answers.set(id, (answer) => (answer.error ? reject(new Error(answer.error)) : resolve(answer)));
    rooms[seat].send(type, { id });
  });
  return {
    async act() {
      const answer = await call(awaited, "reveal");
      wanted = answer.version;
      if (seen[0] < wanted || seen[1] < wanted) await new Promise<void>((resolve) => { arrived = resolve; });
      arrived = null;
      if (answer.awaiting.length) {
        awaited = answer.awaiting[0];
        return false;
      }
      awaited = (await call(0, "next")).awaiting[0];
      return true;
    },
  };
}

// --- turns ------------------------------------------------------------------------------------

interface Side {
  name: string;
  pid: number;
  tables: Table[];
  open: boolean;
  actions: number;
  games: number;
  sleeps: number;
  cpu: number;
  clientCpu: number;
  seconds: number;
  latencies: number[];
  inFlight: number;
  drained: (() => void) | null;
  wake: (() => void)[];
}

async function drive(side: Side, table: Table, stop: { done: boolean }): Promise<void> {
  while (!stop.done) {
    if (!side.open) {
      await new Promise<void>((resolve) => side.wake.push(resolve));
      continue;
    }
    side.inFlight += 1;
    const started = performance.now();
    const ended = await table.act();
    const measured = side.open;
    side.inFlight -= 1;
    if (measured) {
      side.actions += 1;
      if (ended) side.games += 1;
      side.latencies.push(performance.now() - started);
    }
    if (!side.open && side.inFlight === 0) side.drained?.();
  }
}

function percentile(values: number[], q: number): number | null {
  if (!values.length) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((q / 100) * sorted.length))];
}

async function main(): Promise<void> {
  const config: Config = JSON.parse(process.argv[2]);
  const sides: Side[] = [];
  for (const where of config.sides) {
    const tables: Table[] = [];
    for (let i = 0; i < config.tables; i++) {
      tables.push(await (where.kind === "tapis" ? tapisTable(where.url, i)
        : colyseusTable(where.url, i, where.kind === "colyseus_state")));
    }
    sides.push({ name: where.name, pid: where.pid, tables, open: false, actions: 0, games: 0, sleeps: 0, cpu: 0, clientCpu: 0, seconds: 0, latencies: [], inFlight: 0, drained: null, wake: [] });
  }
  const stop = { done: false };
  const drivers = sides.flatMap((side) => side.tables.map((table) => drive(side, table, stop)));
  for (let turn = 0; turn <= config.turns; turn++) {
    for (const side of sides) {
      const counting = turn > 0; // the first round warms up
      const actions = side.actions;
      const games = side.games;
      const slept = sleeps(side.pid);
      const latencies = side.latencies.length;
      const cpu = cpuSeconds(side.pid);
      const client = process.cpuUsage(); // this load generator's own CPU, µs
      const started = performance.now();
      side.open = true;
      for (const wake of side.wake.splice(0)) wake();
      await new Promise((resolve) => setTimeout(resolve, config.turn_s * 1000));
      side.open = false;
      if (side.inFlight) await new Promise<void>((resolve) => { side.drained = resolve; });
      side.drained = null;
      if (counting) {
        side.cpu += cpuSeconds(side.pid) - cpu;
        side.sleeps += sleeps(side.pid) - slept;
        const spent = process.cpuUsage(client);
        side.clientCpu += spent.user + spent.system;
        side.seconds += (performance.now() - started) / 1000;
      } else {
        side.actions = actions;
        side.games = games;
        side.latencies.length = latencies;
      }
    }
  }
  stop.done = true;
  for (const side of sides) for (const wake of side.wake.splice(0)) wake();
  const figures: Record<string, unknown> = { tables: config.tables };
  for (const side of sides) {
    figures[side.name] = {
      actions: side.actions,
      actions_per_s: Math.round((side.actions / side.seconds) * 10) / 10,
      server_cpu_us_per_action: Math.round((side.cpu / side.actions) * 1e7) / 10,
      // the load generator's own CPU per action (one Node thread: near 1e6 / actions_per_s,
      // the generator is what holds the side's action rate back, not its server)
      client_cpu_us_per_action: Math.round((side.clientCpu / side.actions) * 10) / 10,
      // diagnostics: games finished (each then a StartNextGame, and a GetGame on Tapis) and
      // the server loop's sleeps, per 1,000 actions
      games_per_1000_actions: Math.round((side.games / side.actions) * 1e4) / 10,
      server_sleeps_per_1000_actions: Math.round((side.sleeps / side.actions) * 1e4) / 10,
      p50_ms: percentile(side.latencies, 50),
      p99_ms: percentile(side.latencies, 99),
    };
  }
  console.log(JSON.stringify(figures));
  process.exit(0);
  void drivers;
}

void main();
