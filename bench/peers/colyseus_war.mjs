// Bataille (War) as two Colyseus rooms, for `make bench-peers`, Usage: node colyseus_war.mjs PORT
// - "war_state", as a Colyseus developer writes it: the public state in a Schema, synchronised
//   to both seats by Colyseus's patches (its default patch rate), the decks kept server-side,
//   and the events in the answer to the actor;
// - "war", messages only: no synchronised state, the events broadcast to both seats (encoded
//   once), an answer to the actor (the same exchanges as Tapis's War over its WebSocket).
import { Room, Server } from "@colyseus/core";
import { schema, t } from "@colyseus/schema";
import { WebSocketTransport } from "@colyseus/ws-transport";

function shuffled(seed) {
  const deck = [];
  for (let suit = 1; suit <= 4; suit++) for (let rank = 2; rank <= 14; rank++) deck.push({ rank, suit });
  let state = seed >>> 0 || 1;
  for (let i = deck.length - 1; i > 0; i--) {
    state ^= state << 13; state >>>= 0; state ^= state >>> 17; state ^= state << 5; state >>>= 0;
    const j = state % (i + 1);
    [deck[i], deck[j]] = [deck[j], deck[i]];
  }
  return deck;
}

class War {
  constructor(seed, target, version = 1) {  // the version goes on across games, as Tapis's sequence
    const deck = shuffled(seed);
    this.decks = [[], []];
    deck.forEach((card, i) => this.decks[i % 2].push(card));
    this.first = seed % 2;
    this.toMove = this.first;
    this.trick = [];
    this.points = [0, 0];
    this.target = target;
    this.batailles = 0;
    this.over = false;
    this.version = version;
  }

  reveal(seat) {
    if (this.over) return { error: "GAME_OVER" };
    if (seat !== this.toMove) return { error: "NOT_YOUR_TURN" };
    const deck = this.decks[seat];
    const events = [];
    if (this.pendingFaceDown?.[seat]) {  // a bataille: one card face down, then one face up
      this.trick.push({ seat, card: deck.shift(), faceUp: false });
      this.pendingFaceDown[seat] = false;
    }
    const card = deck.shift();
    this.trick.push({ seat, card, faceUp: true });
    events.push({ revealed: { seat, card, deckSizes: this.decks.map((d) => d.length) } });
    const other = 1 - seat;
    if (seat === this.first) {
      this.toMove = other;
    } else {
      const mine = this.trick.filter((c) => c.faceUp && c.seat === this.first).at(-1).card;
      const theirs = card;
      if (mine.rank === theirs.rank) {
        this.batailles += 1;
        events.push({ bataille: { count: this.batailles } });
        if (this.decks[0].length < 2 || this.decks[1].length < 2) {
          this.over = true;
          events.push({ ended: { reason: "short" } });
        } else {
          this.pendingFaceDown = [true, true];
          this.toMove = this.first;
        }
      } else {
        const winner = mine.rank > theirs.rank ? this.first : seat;  // the leader, or who answered it
        for (const laid of this.trick) this.decks[winner].push(laid.card);
        this.points[winner] += 1;
        events.push({ trickWon: { seat: winner, cards: this.trick.length, points: this.points } });
        this.trick = [];
        this.batailles = 0;
        this.pendingFaceDown = undefined;
        this.toMove = this.first;
        if (this.points[winner] >= this.target || this.decks[winner].length === 52) {
          this.over = true;
          events.push({ ended: { winner } });
        }
      }
    }
    this.version += 1;
    return { events, version: this.version, awaiting: this.over ? [] : [this.toMove] };
  }
}

class WarRoom extends Room {
  maxClients = 2;

  onCreate(options) {
    this.setPatchRate(null); // no synchronized state: messages only, no patch timer per room
    this.target = options.target ?? 50;
    this.games = 0;
    this.war = new War(options.seed ?? 1, this.target);
    this.onMessage("reveal", (client, message) => this.act(client, message, () =>
      this.war.reveal(this.seatOf(client))));
    this.onMessage("next", (client, message) => this.act(client, message, () => {
      if (!this.war.over) return { error: "GAME_NOT_OVER" };
      this.games += 1;
      this.war = new War(this.games + 1, this.target, this.war.version + 1);
      return { events: [{ started: this.games + 1 }], version: this.war.version, awaiting: [this.war.toMove] };
    }));
  }

  seatOf(client) {
    return this.clients.indexOf(client);
  }

  act(client, message, apply) {
    const result = apply();
    if (result.error) {
      client.send("answer", { id: message.id, error: result.error });
      return;
    }
    this.broadcast("events", { version: result.version, events: result.events });
    client.send("answer", { id: message.id, version: result.version, awaiting: result.awaiting });
  }
}

const Card = schema({ rank: t.uint8(), suit: t.uint8() }, "Card");
const WarState = schema({
  version: t.uint32(), toMove: t.uint8(), over: t.boolean(), batailles: t.uint8(),
  deckSizes: t.array("uint8"), points: t.array("uint16"), trick: t.array(Card),
}, "WarState");

class WarStateRoom extends Room {
  maxClients = 2;

  onCreate(options) {
    this.target = options.target ?? 50;
    this.games = 0;
    this.war = new War(options.seed ?? 1, this.target);
    this.setState(new WarState());
    this.publish();
    this.onMessage("reveal", (client, message) => this.act(client, message, () =>
      this.war.reveal(this.clients.indexOf(client))));
    this.onMessage("next", (client, message) => this.act(client, message, () => {
      if (!this.war.over) return { error: "GAME_NOT_OVER" };
      this.games += 1;
      this.war = new War(this.games + 1, this.target, this.war.version + 1);
      return { events: [{ started: this.games + 1 }], version: this.war.version, awaiting: [this.war.toMove] };
    }));
  }

  publish() {  // the public part of the game into the synchronised state
    const { state, war } = this;
    state.version = war.version;
    state.toMove = war.toMove;
    state.over = war.over;
    state.batailles = war.batailles;
    war.decks.forEach((deck, seat) => { state.deckSizes[seat] = deck.length; });
    war.points.forEach((points, seat) => { state.points[seat] = points; });
    const faceUp = war.trick.filter((laid) => laid.faceUp);
    while (state.trick.length > faceUp.length) state.trick.pop();
    faceUp.forEach((laid, i) => {
      if (i < state.trick.length) return;
      state.trick.push(new Card({ rank: laid.card.rank, suit: laid.card.suit }));
    });
  }

  act(client, message, apply) {
    const result = apply();
    if (result.error) {
      client.send("answer", { id: message.id, error: result.error });
      return;
    }
    this.publish();
    client.send("answer", { id: message.id, version: result.version, events: result.events, awaiting: result.awaiting });
  }
}

const server = new Server({ transport: new WebSocketTransport(), greet: false });
server.define("war", WarRoom);
server.define("war_state", WarStateRoom);
await server.listen(Number(process.argv[2]), "127.0.0.1");
console.log("ready");
