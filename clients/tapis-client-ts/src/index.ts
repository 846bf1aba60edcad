// @tapis/client: Tapis from Node over gRPC (TapisClient, followResults), the retry policy and
// the decoded refusals, and every message and enum of the contract (tapis.v1), typed.
export * from "./client.js";
export * from "./errors.js";
export * from "./retry.js";
export * from "./results.js";
export * from "./gen/tapis/v1/game_service_pb.js";
export * from "./gen/tapis/v1/errors_pb.js";
export * from "./gen/tapis/v1/cards_pb.js";
export * from "./gen/tapis/v1/war_pb.js";
export * from "./gen/tapis/v1/bataille_corse_pb.js";
export * from "./gen/tapis/v1/boutons_pb.js";
export * from "./gen/tapis/v1/basra_pb.js";
export { create, toBinary, fromBinary, toJson, fromJson } from "@bufbuild/protobuf";
export { status as GrpcStatus } from "@grpc/grpc-js";
