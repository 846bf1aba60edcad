// Every game the web client plays: its one declaration in this layer.
import type { GameKind } from "@tapis/client/gen/tapis/v1/game_service_pb";
import { basra } from "./basra";
import { boutons } from "./boutons";
import { corse } from "./corse";
import type { GameScreen } from "./screen";
import { war } from "./war";

export const GAMES: GameScreen[] = [war, corse, boutons, basra];

export function screenFor(kind: GameKind): GameScreen | undefined {
  return GAMES.find((game) => game.kind === kind);
}
