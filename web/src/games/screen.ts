// What a game's screen gives the table, and what the table gives it.
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ActionSchema, CreateGameRequestSchema, Event, GameKind, GameView }
  from "@tapis/client/gen/tapis/v1/game_service_pb";
import type { Texts } from "../i18n";

export type ActionInit = MessageInitShape<typeof ActionSchema>;

/** The game's options of a CreateGameRequest (its case of the `options` oneof). */
export type OptionsInit = MessageInitShape<typeof CreateGameRequestSchema>["options"];

/** A game's own choices in the lobby: the fields shown, and the options they make. */
export interface LobbyChoices {
  fields: HTMLElement[];
  options(): OptionsInit;
}

export interface TableContext {
  t: Texts;
  /** The caller's seat (undefined for a spectator). */
  me: number | undefined;
  /** A seat's name as shown ("you" for the caller). */
  name: (seat: number) => string;
  /** Submit an action for the caller's seat. */
  act: (action: ActionInit) => void;
}

export interface GameScreen {
  kind: GameKind;
  /** Key of the game's name in Texts.games, and of its CSS class. */
  key: "war" | "corse" | "boutons" | "basra";
  /** The seat counts the lobby offers. */
  seatCounts: number[];
  /** The game's own choices in the lobby (its rules' options); none: the server's defaults. */
  lobbyChoices?(t: Texts): LobbyChoices;
  /** The game's part of the table (under the seats' common header). */
  render(view: GameView, context: TableContext): HTMLElement;
  /** A line for the table's log, or null. */
  describe(event: Event, context: TableContext): string | null;
  /** A key pressed at the table; true if the game used it. */
  keyPressed?(key: string, view: GameView, context: TableContext): boolean;
  /** Take in an event before the view moves on (what the view does not keep: a deal's score
   * sheet, the cards a slap took, who ran out of buttons). */
  see?(event: Event, view: GameView | undefined, context: TableContext): void;
  /** Forget what `see` and the screen kept (a table is opened: nothing of the last one shows). */
  forget?(): void;
  /** Why the game of `view` ended, in words ("" when it has not). */
  endReason?(view: GameView, context: TableContext): string;
}
