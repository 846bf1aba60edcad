// A backend on @tapis/client, end to end (docs/integration.md, "From Node"):
//
//   node dist/examples/backend.js HOST:PORT --ca ca.pem --api-key-file key --results results.jsonl
//
// 1. The backend creates private tables of War, each for two of its players with their seats
//    reserved and the backend's own labels (its match id): their tickets come back at once.
// 2. Each player's app holds only its ticket (no key) and plays its seat to the end of the
//    series (the first legal action when awaited, waiting on the table's event stream
//    otherwise); a server restart on the way is ridden out by the client's retries (the same
//    request_id) and resumed streams.
// 3. The backend follows its results into a file (one JSON line per record, written and
//    synced before the record is acknowledged), resuming after the last cursor the file holds.
//
// 4. Killed and started again with the same arguments, it goes on where it was: its tables
//    (kept in a state file beside the results, written before any is played) are not created
//    again, the players pick their seats up from the view, and the results follow on after the
//    last cursor of the file (acknowledged first): nothing skipped, nothing stored twice.
//
// It ends once every game and every series of its tables is stored, printing "done".
import { open, readFile, rename } from "node:fs/promises";
import { parseArgs } from "node:util";
import {
  followResults,
  GameKind,
  GameStatus,
  GrpcStatus,
  ResultRecordSchema,
  SeatType,
  TapisClient,
  TapisError,
  toJson,
  Visibility,
  type ResultRecord,
} from "../src/index.js";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    ca: { type: "string" },
    "api-key-file": { type: "string" },
    results: { type: "string", default: "results.jsonl" },
    state: { type: "string" },
    tables: { type: "string", default: "3" },
    games: { type: "string", default: "3" },
    "target-points": { type: "string", default: "3" },
  },
});
const target = positionals[0] ?? "127.0.0.1:50051";
const ca = values.ca === undefined ? undefined : await readFile(values.ca);
const apiKey = values["api-key-file"] && (await readFile(values["api-key-file"], "utf8")).trim();
const tables = Number(values.tables);
/** Calls sent again and streams opened again (after a server restart, say). */
let retries = 0;
const retriedFor = new Map<string, number>();
const retry = {
  maxAttempts: 40, // about a minute of backoff in a row: long enough for a server's restart
  onRetry: (refusal: { code: number }) => {
    retries += 1;
    const name = GrpcStatus[refusal.code] ?? String(refusal.code);
    retriedFor.set(name, (retriedFor.get(name) ?? 0) + 1);
  },
};
const games = Number(values.games);

/** Step 1: a private table for two players, seats reserved, labelled with the match id. */
async function createTable(backend: TapisClient, match: string, players: string[]) {
  const created = await backend.createGame({
    kind: GameKind.WAR,
    seats: players.length,
    seriesLength: games,
    visibility: Visibility.PRIVATE,
    labels: { match, site: "node-example" },
    options: { case: "war", value: { targetPoints: Number(values["target-points"]) } },
    seatConfigs: players.map((player) => ({
      type: SeatType.PERSON,
      playerId: player,
      displayName: player.toUpperCase(),
    })),
  });
  const gameId = created.game!.gameId;
  console.log(`table ${gameId} ${match}: tickets for ${players.join(", ")}`);
  return { gameId, tickets: created.seatTokens.map((t) => t.seatToken) };
}

/** Step 2: a player's app, its ticket only: plays until the series is over; its moves. */
async function play(gameId: string, ticket: string): Promise<number> {
  const app = new TapisClient({ target, ca, token: ticket, retry });
  let moves = 0;
  try {
    for (;;) {
      const view = (await app.getGame({ gameId })).game!;
      if (view.status === GameStatus.SERIES_OVER || view.status === GameStatus.ABANDONED) {
        return moves;
      }
      const action = view.legalActions[0];
      if (action !== undefined) {
        try {
          await app.submitAction({ gameId, action, expectedVersion: view.version });
          moves += 1;
        } catch (error) {
          // the table moved first (another seat started the next game...): look again
          const moved =
            error instanceof TapisError &&
            (error.code === GrpcStatus.ABORTED || error.code === GrpcStatus.FAILED_PRECONDITION);
          if (!moved) throw error;
        }
        continue;
      }
      // not awaited: wait until the table moves (a resumed stream survives a restart)
      for await (const response of app.streamEvents({ gameId, afterSequence: view.lastSequence })) {
        if (response.events.length > 0) break;
      }
    }
  } finally {
    app.close();
  }
}

/** The records a results file holds (one proto-JSON line each). */
async function storedRecords(path: string): Promise<Record<string, unknown>[]> {
  const text = await readFile(path, "utf8").catch(() => "");
  return text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** Step 3: follow the results into the file until `wanted` game and series ends are in it. */
async function follow(backend: TapisClient, path: string, wanted: number): Promise<void> {
  const before = await storedRecords(path);
  const counts = (r: { gameEnded?: unknown; seriesEnded?: unknown }) =>
    r.gameEnded !== undefined || r.seriesEnded !== undefined;
  let kept = before.filter(counts).length;
  const lastStored = BigInt(String(before.at(-1)?.cursor ?? "0"));
  if (kept >= wanted) return;
  const file = await open(path, "a");
  try {
    await followResults(backend, {
      lastStored,
      store: async (record: ResultRecord) => {
        // the backend's database: the record with its cursor, durable before the ack
        await file.write(JSON.stringify(toJson(ResultRecordSchema, record)) + "\n");
        await file.sync();
        if (record.result.case === "gameEnded" || record.result.case === "seriesEnded") {
          kept += 1;
          const what = record.result.case === "gameEnded"
            ? `game ${record.result.value.gameNumber}` : "series ended";
          console.log(`stored #${record.cursor} ${record.labels.match} ${what}`);
        }
      },
      until: () => kept >= wanted,
    });
  } finally {
    await file.close();
  }
}

interface Table {
  gameId: string;
  tickets: string[];
}

/** The tables of an earlier run (from its state file), else new ones, saved before play. */
async function ourTables(backend: TapisClient, path: string): Promise<Table[]> {
  const saved = await readFile(path, "utf8").catch(() => undefined);
  if (saved !== undefined) {
    console.log(`resuming: the tables of ${path}`);
    return JSON.parse(saved) as Table[];
  }
  const created: Table[] = [];
  for (let i = 1; i <= tables; i++) {
    created.push(await createTable(backend, `match-${i}`, [`p${i}a`, `p${i}b`]));
  }
  const file = await open(`${path}.new`, "w");
  await file.writeFile(JSON.stringify(created));
  await file.sync();
  await file.close();
  await rename(`${path}.new`, path);
  return created;
}

const backend = new TapisClient({ target, ca, apiKey: apiKey || undefined, retry });
try {
  const created = await ourTables(backend, values.state ?? `${values.results}.tables.json`);
  const following = follow(backend, values.results!, tables * (games + 1));
  const moves = await Promise.all(
    created.flatMap(({ gameId, tickets }) => tickets.map((ticket) => play(gameId, ticket))),
  );
  console.log(`played: ${moves.reduce((a, b) => a + b, 0)} moves`);
  await following;
  const why = [...retriedFor].map(([code, count]) => `${code}: ${count}`).join(", ");
  const retried = retries === 0 ? "no retry" : `${retries} retries (${why})`;
  console.log(`done: ${tables * (games + 1)} results in ${values.results}; ${retried}`);
} finally {
  backend.close();
}
