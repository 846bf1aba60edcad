// The client's texts in French and English. The language is the browser's unless chosen. The
// refusals' sentences, one per reason a player can meet, are in refusals.json.
import { BasraVariant } from "@tapis/client/gen/tapis/v1/basra_pb";
import { AbandonReason } from "@tapis/client/gen/tapis/v1/game_service_pb";
import refusals from "./refusals.json";

/** A name for each variant the lobby offers (unspecified is shown as Egyptian). */
type VariantNames = Record<Exclude<BasraVariant, BasraVariant.UNSPECIFIED>, string>;

const en = {
  title: "Tapis — card games",
  chooseGame: "Choose a game",
  playComputer: "Play against the computer",
  ticketsOnly: "On this server, tables are set up by the site you play from: open the link it gives you to take your seat.",
  players: "Players",
  turnTime: "Turn time",
  noLimit: "none",
  seconds: (n: number) => `${n} s`,
  yourName: "Your name",
  defaultName: "Me",
  joinTable: "Join a table",
  tableId: "Table id",
  join: "Join",
  back: "Back to the games",
  connecting: "Connecting…",
  reconnecting: "Connection lost — reconnecting…",
  sending: "Sending…",
  rewound: "This table went back to an earlier copy of itself (a restore): it is shown as it now is.",
  you: "you",
  computer: "computer",
  seat: (n: number) => `Seat ${n + 1}`,
  deck: (n: number) => `${n} card${n === 1 ? "" : "s"} in the deck`,
  points: (n: number) => `${n} point${n === 1 ? "" : "s"}`,
  target: (n: number) => `First to ${n} points`,
  yourTurn: "Your turn",
  theirTurn: (name: string) => `${name} to play`,
  countdown: (s: number) => `${s} s left`,
  reveal: "Reveal a card",
  bataille: "Bataille !",
  thisTrick: "This trick",
  lastTrick: "Last trick",
  tookTrick: (name: string, mine: boolean) => (mine ? "You took the trick" : `${name} took the trick`),
  reclaim: "Take my seat back",
  botPlaysYou: "The computer plays for you",
  wentAway: (name: string) => `${name} went away`,
  isBack: (name: string) => `${name} is back`,
  // the table's own events in the history (the terminal client's lines)
  sitsDown: (name: string, mine: boolean) => (mine ? "You sit down" : `${name} sits down`),
  gameStarts: (n: number) => `Game ${n} starts`,
  gameEnded: (n: number, verdict: string) => `Game ${n} over: ${verdict}`,
  verdictDraw: "draw",
  verdictWon: (name: string, mine: boolean) => (mine ? "you win" : `${name} wins`),
  verdictShared: (names: string, mine: boolean) =>
    (mine ? `you share the win with ${names}` : `${names} share the win`),
  listed: (first: string, last: string) => `${first} and ${last}`,
  timeRanOut: (name: string, mine: boolean, untilReclaimed: boolean) =>
    `${mine ? "Your time ran out" : `${name}’s time ran out`}: the computer `
    + (untilReclaimed ? (mine ? "plays for you until you take your seat back" : "plays for them")
      : (mine ? "moved for you" : "moved for them")),
  tookSeatBack: (name: string, mine: boolean) =>
    (mine ? "You take your seat back" : `${name} takes their seat back`),
  seatReplaced: (seat: number, holder: string, mine: boolean) =>
    mine ? "This seat is yours now: the computer plays it until you take it back"
      : holder ? `${holder} gets seat ${seat + 1}: the computer plays it until they take it`
        : `The computer plays seat ${seat + 1} from now on`,
  timersResumed: (mine: boolean) =>
    `The table is back: ${mine ? "you have a whole turn to play" : "the turn timers start again"}`,
  abandoned: (reason: AbandonReason): string =>
    reason === AbandonReason.IDLE ? "The table was abandoned: nobody played for too long"
      : reason === AbandonReason.ENDED_BY_BACKEND ? "The table was closed by the site you play from"
        : "The table was abandoned",
  online: "connected",
  offline: "disconnected",
  nextGame: "Next game",
  close: "Close",
  gameOver: "Game over",
  won: (name: string) => `${name} won`,
  youWon: "You won!",
  draw: "Draw",
  series: "The series",
  game: (n: number) => `Game ${n}`,
  winner: "Winner",
  wins: "Wins",
  draws: "Draws",
  drawsCount: (n: number) => `Draws: ${n}`,
  score: "Score",
  waiting: "Waiting for players",
  invite: "Invite a friend with this link:",
  flip: "Flip (Enter)",
  slap: "Slap! (space)",
  pile: (n: number) => `Pile: ${n} card${n === 1 ? "" : "s"}`,
  challenge: (name: string, tries: number) => `${name} must answer: ${tries} tr${tries === 1 ? "y" : "ies"} left`,
  challengeYou: (tries: number) => `You must answer: ${tries} tr${tries === 1 ? "y" : "ies"} left`,
  eliminated: "eliminated",
  out: "out",
  slapTooLate: "Too late: the pile changed",
  falseSlap: (name: string, mine: boolean) => (mine ? "You slapped falsely" : `${name} slapped falsely`),
  pileWon: (name: string, mine: boolean, n: number) => `${mine ? "You take" : `${name} takes`} the pile (${n} card${n === 1 ? "" : "s"})`,
  floor: "Floor",
  yourHand: "Your hand",
  stock: (n: number) => `Stock: ${n}`,
  hand: (n: number) => `${n} in hand`,
  captured: (n: number) => `${n} captured`,
  basras: (n: number) => `${n} basra${n === 1 ? "" : "s"}`,
  chooseCapture: "Choose what to take",
  takes: "takes",
  takesNothing: "takes nothing",
  took: (name: string, mine: boolean, cards: string) => `${mine ? "You" : name} took ${cards}`,
  round: (n: number, of: number) => `Round ${n} of ${of}`,
  centre: (n: number) => `Centre: ${n}`,
  reserve: (n: number) => `Reserve: ${n}`,
  bet: "Bet:",
  betOn: "on",
  yourButtons: "Your buttons",
  betting: "Betting",
  drawing: "Drawing",
  lastFlip: "Last card flipped",
  basraBy: (name: string, mine: boolean) => (mine ? "Basra! (you)" : `Basra! (${name})`),
  ranks: { 11: "J", 12: "Q", 13: "K", 14: "A", 15: "★" } as Record<number, string>,
  seriesLine: (wins: string, draws: number) => `Series: ${wins} · draws ${draws}`,
  history: "History",
  keysTitle: "Keys:",
  keys: {
    war: "Space or Enter: reveal a card (or the button)",
    corse: "Enter: flip · Space: slap (or click the pile)",
    boutons: "Pick a colour, then click one of your cards to bet it · Enter: flip",
    basra: "Click a card of your hand to play it; when it can take several ways, pick one",
  },
  whyEnded: (why: string) => `Why: ${why}`,
  warEnd: (reason: number, target: number) =>
    ["", `reached ${target} points`, "holds all 52 cards", "the other could not lay a bataille",
      "neither could lay a bataille"][reason] ?? "",
  corseEnd: (reason: number) =>
    ["", "last player in play, holds every card", "the flip cap was reached: most cards"][reason] ?? "",
  boutonsEnd: (reason: number, name: string | undefined, mine: boolean) =>
    reason === 1 ? "the reserve is empty"
      : reason === 2 ? (mine ? "you had no button left to bet" : name ? `${name} had no button left to bet`
        : "a player had no button left to bet") : "",
  finalScore: (scores: string) => `final score ${scores}`,
  dealer: "deals",
  toMoveMark: "◀ to play",
  dealSheet: (deal: number) => `Deal ${deal}: the score`,
  sheetHeaders: ["", "cards", "most", "10♦", "2♣", "aces", "jacks", "basras", "deal", "total"],
  sheetLegend: "Cards taken, then the points each earns: most cards, 10♦, 2♣, aces, jacks, basras.",
  basraFlag: "Basra!",
  makesBasra: "This card makes a basra",
  variant: "Variant",
  basraVariants: {
    [BasraVariant.EGYPTIAN]: "Egyptian",
    [BasraVariant.LEBANESE]: "Lebanese",
    [BasraVariant.IRAQI]: "Iraqi",
  } as VariantNames,
  twoCardJack: "A jack taking two cards makes a basra",
  pointsToWin: "Points to win",
  basraRules: (variant: string, target: number, twoCardJack: boolean) =>
    `${variant} Basra · first to ${target} points${twoCardJack ? " · a jack taking two cards makes a basra" : ""}`,
  playerScore: (piles: string, score: number) => `Score: ${piles} = ${score}`,
  productRule: "Score: the sizes of your colour groups multiplied (3 red × 2 blue = 6).",
  combinations: ["", "double", "sandwich", "big mac", "suite", "ten", "seven"],
  slapCombinations: "Combinations to slap on",
  combinationsOff: (names: string) => `Switched off: ${names}`,
  flipCap: "Game ends after (cards flipped)",
  flips: (flips: bigint, cap: bigint) => `Cards flipped: ${flips} of ${cap}`,
  rounds: "Rounds",
  pileReasons: ["", "challenge won", "", "last in play"],
  slapCaption: (name: string, mine: boolean, why: string, cards: string, seconds?: number) =>
    `${mine ? "You take" : `${name} takes`} the pile: ${why}${cards ? ` (${cards})` : ""}`
    + (seconds === undefined ? "" : `, slapped in ${seconds.toFixed(2)} s`),
  language: "Français",
  games: {
    war: "Bataille (War)",
    corse: "Bataille corse",
    boutons: "La bataille des boutons",
    basra: "Basra",
  },
  colours: ["", "red", "blue", "green", "yellow", "black", "white", "orange", "purple", "reserve"],
  refusals: { ...refusals.en, DISCONNECTED: "The connection was lost: try again." } as Record<string, string>,
  refused: "The server refused this.",
};

export type Texts = typeof en;

/** "de" before a name in French: "de Zoé", "d’Ana", "de l’ordinateur". */
function de(name: string): string {
  if (name.startsWith("l’")) return `de ${name}`;
  return /^[aeiouyéèêàâîïôûh]/i.test(name) ? `d’${name}` : `de ${name}`;
}

const fr: Texts = {
  title: "Tapis — jeux de cartes",
  chooseGame: "Choisissez un jeu",
  playComputer: "Jouer contre l’ordinateur",
  ticketsOnly: "Sur ce serveur, les tables sont préparées par le site d’où vous jouez : ouvrez le lien qu’il vous donne pour prendre votre place.",
  players: "Joueurs",
  turnTime: "Temps par coup",
  noLimit: "aucun",
  seconds: (n) => `${n} s`,
  yourName: "Votre nom",
  defaultName: "Moi",
  joinTable: "Rejoindre une table",
  tableId: "Numéro de table",
  join: "Rejoindre",
  back: "Retour aux jeux",
  connecting: "Connexion…",
  reconnecting: "Connexion perdue — reconnexion…",
  sending: "Coup en cours…",
  rewound: "Cette table est revenue à une copie antérieure d’elle-même (une restauration) : elle est montrée telle qu’elle est maintenant.",
  you: "vous",
  computer: "l’ordinateur",
  seat: (n) => `Place ${n + 1}`,
  deck: (n) => `${n} carte${n > 1 ? "s" : ""} dans le paquet`,
  points: (n) => `${n} point${n > 1 ? "s" : ""}`,
  target: (n) => `Le premier à ${n} points gagne`,
  yourTurn: "À vous de jouer",
  theirTurn: (name) => `Au tour ${de(name)}`,
  countdown: (s) => `encore ${s} s`,
  reveal: "Retourner une carte",
  bataille: "Bataille !",
  thisTrick: "Ce pli",
  lastTrick: "Dernier pli",
  tookTrick: (name, mine) => (mine ? "Vous remportez le pli" : `${name} remporte le pli`),
  reclaim: "Reprendre ma place",
  botPlaysYou: "L’ordinateur joue pour vous",
  wentAway: (name) => `${name} s’est déconnecté`,
  isBack: (name) => `${name} est de retour`,
  sitsDown: (name, mine) => (mine ? "Vous vous asseyez" : `${name} s’assied`),
  gameStarts: (n) => `La partie ${n} commence`,
  gameEnded: (n, verdict) => `Partie ${n} terminée : ${verdict}`,
  verdictDraw: "égalité",
  verdictWon: (name, mine) => (mine ? "vous gagnez" : `${name} gagne`),
  verdictShared: (names, mine) => (mine ? `vous gagnez avec ${names}` : `${names} gagnent ensemble`),
  listed: (first, last) => `${first} et ${last}`,
  timeRanOut: (name, mine, untilReclaimed) =>
    `${mine ? "Votre temps" : `Le temps ${de(name)}`} est écoulé : l’ordinateur `
    + (untilReclaimed
      ? (mine ? "joue pour vous jusqu’à ce que vous repreniez votre place" : "joue pour lui")
      : (mine ? "a joué pour vous" : "a joué pour lui")),
  tookSeatBack: (name, mine) => (mine ? "Vous reprenez votre place" : `${name} reprend sa place`),
  seatReplaced: (seat, holder, mine) =>
    mine ? "Cette place est à vous : l’ordinateur la joue jusqu’à ce que vous la repreniez"
      : holder ? `${holder} reçoit la place ${seat + 1} : l’ordinateur la joue jusqu’à ce qu’il la prenne`
        : `L’ordinateur joue désormais la place ${seat + 1}`,
  timersResumed: (mine) =>
    `La table est de retour : ${mine ? "vous avez un tour entier pour jouer" : "les chronomètres repartent"}`,
  abandoned: (reason) =>
    reason === AbandonReason.IDLE ? "La table a été abandonnée : personne n’a joué depuis trop longtemps"
      : reason === AbandonReason.ENDED_BY_BACKEND ? "La table a été fermée par le site d’où vous jouez"
        : "La table a été abandonnée",
  online: "connecté",
  offline: "déconnecté",
  nextGame: "Partie suivante",
  close: "Fermer",
  gameOver: "Partie terminée",
  won: (name) => `${name} a gagné`,
  youWon: "Vous avez gagné !",
  draw: "Égalité",
  series: "La série",
  game: (n) => `Partie ${n}`,
  winner: "Gagnant",
  wins: "Victoires",
  draws: "Nuls",
  drawsCount: (n) => `Nuls : ${n}`,
  score: "Score",
  waiting: "En attente des joueurs",
  invite: "Invitez quelqu’un avec ce lien :",
  flip: "Retourner (Entrée)",
  slap: "Taper ! (espace)",
  pile: (n) => `Tas : ${n} carte${n > 1 ? "s" : ""}`,
  challenge: (name, tries) => `${name} doit répondre : encore ${tries} essai${tries > 1 ? "s" : ""}`,
  challengeYou: (tries) => `Vous devez répondre : encore ${tries} essai${tries > 1 ? "s" : ""}`,
  eliminated: "éliminé",
  out: "hors jeu",
  slapTooLate: "Trop tard : le tas a changé",
  falseSlap: (name, mine) => (mine ? "Vous avez tapé à tort" : `${name} a tapé à tort`),
  pileWon: (name, mine, n) => `${mine ? "Vous ramassez" : `${name} ramasse`} le tas (${n} carte${n > 1 ? "s" : ""})`,
  floor: "Tapis",
  yourHand: "Votre main",
  stock: (n) => `Talon : ${n}`,
  hand: (n) => `${n} en main`,
  captured: (n) => `${n} ramassée${n > 1 ? "s" : ""}`,
  basras: (n) => `${n} basra${n > 1 ? "s" : ""}`,
  chooseCapture: "Choisissez ce que vous prenez",
  takes: "prend",
  takesNothing: "ne prend rien",
  took: (name, mine, cards) => `${mine ? "Vous avez ramassé" : `${name} a ramassé`} ${cards}`,
  round: (n, of) => `Manche ${n} sur ${of}`,
  centre: (n) => `Centre : ${n}`,
  reserve: (n) => `Réserve : ${n}`,
  bet: "Miser :",
  betOn: "sur",
  yourButtons: "Vos boutons",
  betting: "Mises",
  drawing: "Tirage",
  lastFlip: "Dernière carte retournée",
  basraBy: (name, mine) => (mine ? "Basra ! (vous)" : `Basra ! (${name})`),
  ranks: { 11: "V", 12: "D", 13: "R", 14: "A", 15: "★" },
  seriesLine: (wins, draws) => `Série : ${wins} · nuls ${draws}`,
  history: "Historique",
  keysTitle: "Touches :",
  keys: {
    war: "Espace ou Entrée : retourner une carte (ou le bouton)",
    corse: "Entrée : retourner · Espace : taper (ou cliquer sur le tas)",
    boutons: "Choisissez une couleur, puis cliquez sur une de vos cartes pour miser · Entrée : retourner",
    basra: "Cliquez sur une carte de votre main pour la jouer ; si elle peut prendre de plusieurs façons, choisissez",
  },
  whyEnded: (why) => `Pourquoi : ${why}`,
  warEnd: (reason, target) =>
    ["", `${target} points atteints`, "a les 52 cartes", "l’autre ne pouvait pas poser de bataille",
      "aucun ne pouvait poser de bataille"][reason] ?? "",
  corseEnd: (reason) =>
    ["", "dernier joueur en jeu, a toutes les cartes", "limite de cartes retournées atteinte : le plus de cartes"][reason] ?? "",
  boutonsEnd: (reason, name, mine) =>
    reason === 1 ? "la réserve est vide"
      : reason === 2 ? (mine ? "vous n’aviez plus de bouton à miser" : name ? `${name} n’avait plus de bouton à miser`
        : "un joueur n’avait plus de bouton à miser") : "",
  finalScore: (scores) => `score final ${scores}`,
  dealer: "donneur",
  toMoveMark: "◀ à jouer",
  dealSheet: (deal) => `Donne ${deal} : le score`,
  sheetHeaders: ["", "cartes", "le plus", "10♦", "2♣", "as", "valets", "basras", "donne", "total"],
  sheetLegend: "Cartes ramassées, puis les points de chacun : le plus de cartes, 10♦, 2♣, as, valets, basras.",
  basraFlag: "Basra !",
  makesBasra: "Cette carte fait une basra",
  variant: "Variante",
  basraVariants: {
    [BasraVariant.EGYPTIAN]: "égyptienne",
    [BasraVariant.LEBANESE]: "libanaise",
    [BasraVariant.IRAQI]: "irakienne",
  },
  twoCardJack: "Un valet qui prend deux cartes fait une basra",
  pointsToWin: "Points pour gagner",
  basraRules: (variant, target, twoCardJack) =>
    `Basra ${variant} · en ${target} points${twoCardJack ? " · un valet qui prend deux cartes fait une basra" : ""}`,
  playerScore: (piles, score) => `Score : ${piles} = ${score}`,
  productRule: "Score : le produit du nombre de boutons de chaque couleur (3 rouges × 2 bleus = 6).",
  combinations: ["", "doublette", "sandwich", "big mac", "suite", "dix", "sept"],
  slapCombinations: "Combinaisons sur lesquelles taper",
  combinationsOff: (names) => `Désactivées : ${names}`,
  flipCap: "Fin de partie après (cartes retournées)",
  flips: (flips, cap) => `Cartes retournées : ${flips} sur ${cap}`,
  rounds: "Manches",
  pileReasons: ["", "défi gagné", "", "dernier en jeu"],
  slapCaption: (name, mine, why, cards, seconds) =>
    `${mine ? "Vous ramassez" : `${name} ramasse`} le tas : ${why}${cards ? ` (${cards})` : ""}`
    + (seconds === undefined ? "" : `, tapé en ${seconds.toFixed(2).replace(".", ",")} s`),
  language: "English",
  games: {
    war: "Bataille",
    corse: "Bataille corse",
    boutons: "La bataille des boutons",
    basra: "Basra",
  },
  colours: ["", "rouge", "bleu", "vert", "jaune", "noir", "blanc", "orange", "violet", "réserve"],
  refusals: { ...refusals.fr, DISCONNECTED: "La connexion a été perdue : réessayez." },
  refused: "Le serveur a refusé.",
};

export type Language = "fr" | "en";
const TEXTS: Record<Language, Texts> = { fr, en };

export function chosenLanguage(): Language {
  const stored = localStorage.getItem("tapis.lang");
  if (stored === "fr" || stored === "en") return stored;
  return navigator.language.toLowerCase().startsWith("fr") ? "fr" : "en";
}

export function texts(language: Language): Texts {
  return TEXTS[language];
}
