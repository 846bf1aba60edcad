// An in-process grpc-js server of tapis.v1.GameService for the unit tests: each test gives the
// handlers it needs; a refusal carries its ErrorInfo in grpc-status-details-bin as the real
// server's do.
import { create, fromBinary, toBinary, type DescMessage } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import { ErrorInfoSchema } from "../src/gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../src/gen/google/rpc/status_pb.js";
import { GameService } from "../src/gen/tapis/v1/game_service_pb.js";
import { ErrorReason } from "../src/gen/tapis/v1/errors_pb.js";
import { TapisClient, type ClientOptions } from "../src/client.js";

/** A status the server sends, with an ErrorInfo of `reason` when given. */
export function refusal(
  code: grpc.status,
  details: string,
  reason?: ErrorReason,
  info: Record<string, string> = {},
): Partial<grpc.StatusObject> {
  const metadata = new grpc.Metadata();
  if (reason !== undefined) {
    const status = create(StatusSchema, {
      code,
      message: details,
      details: [
        anyPack(
          ErrorInfoSchema,
          create(ErrorInfoSchema, {
            reason: ErrorReason[reason],
            domain: "tapis.v1",
            metadata: info,
          }),
        ),
      ],
    });
    metadata.set("grpc-status-details-bin", Buffer.from(toBinary(StatusSchema, status)));
  }
  return { code, details, metadata };
}

export type Handlers = Partial<Record<keyof typeof GameService.method, grpc.UntypedHandleCall>>;

/** A server of `handlers` on a free loopback port, and a client of it (no retry pauses). */
export async function serve(
  handlers: Handlers,
  client: Partial<ClientOptions> = {},
  port = 0,
): Promise<{ client: TapisClient; server: grpc.Server; target: string }> {
  const server = new grpc.Server();
  const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const [name, method] of Object.entries(GameService.method)) {
    definition[method.name] = {
      path: `/${GameService.typeName}/${method.name}`,
      requestStream: false,
      responseStream: method.methodKind === "server_streaming",
      requestSerialize: (m: unknown) => Buffer.from(toBinary(method.input as DescMessage, m as never)),
      requestDeserialize: (b: Buffer) => fromBinary(method.input as DescMessage, b),
      responseSerialize: (m: unknown) => Buffer.from(toBinary(method.output as DescMessage, m as never)),
      responseDeserialize: (b: Buffer) => fromBinary(method.output as DescMessage, b),
    };
    void name;
  }
  const implementation: grpc.UntypedServiceImplementation = {};
  for (const [name, handler] of Object.entries(handlers)) {
    implementation[GameService.method[name as keyof typeof GameService.method].name] = handler;
  }
  server.addService(definition as grpc.ServiceDefinition, implementation);
  const bound = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  const target = `127.0.0.1:${bound}`;
  return {
    client: new TapisClient({ target, retry: { sleep: async () => undefined }, ...client }),
    server,
    target,
  };
}
