// A refusal over gRPC, decoded: the status code and the ErrorInfo of the
// `grpc-status-details-bin` trailer (a google.rpc.Status), its `reason` mapped onto the
// contract's ErrorReason enum.
import { fromBinary } from "@bufbuild/protobuf";
import { status as Status, type Metadata, type ServiceError } from "@grpc/grpc-js";
import { StatusSchema } from "./gen/google/rpc/status_pb.js";
import { ErrorReason } from "./gen/tapis/v1/errors_pb.js";
import { refusalOfStatus, type Refusal } from "./refusal.js";

export { ERROR_DOMAIN, reasonName, reasonOf, refusalOfStatus, type Refusal } from "./refusal.js";

const DETAILS_TRAILER = "grpc-status-details-bin";

/** A call the server (or the transport) refused; `reason` is the contract's ErrorReason. */
export class TapisError extends Error implements Refusal {
  readonly code: Status;
  readonly reason: ErrorReason;
  readonly reasonName: string;
  readonly metadata: Record<string, string>;
  readonly details: string;
  /** The grpc-js error it was decoded from. */
  readonly cause: ServiceError | undefined;

  constructor(refusal: Refusal, cause?: ServiceError) {
    const what = refusal.reasonName ? ` / ${refusal.reasonName}` : "";
    super(`${Status[refusal.code] ?? refusal.code}${what}: ${refusal.details}`);
    this.name = "TapisError";
    this.code = refusal.code;
    this.reason = refusal.reason;
    this.reasonName = refusal.reasonName;
    this.metadata = refusal.metadata;
    this.details = refusal.details;
    this.cause = cause;
  }
}

/** The refusal a status's trailers carry (code and message from the status itself). */
export function decodeRefusal(code: Status, details: string, trailers?: Metadata): Refusal {
  const raw = trailers?.get(DETAILS_TRAILER)[0];
  let decoded: Refusal | undefined;
  if (raw !== undefined && typeof raw !== "string") {
    try {
      decoded = refusalOfStatus(fromBinary(StatusSchema, raw));
    } catch {
      decoded = undefined; // not a Status: the code alone
    }
  }
  return {
    code,
    details,
    reason: decoded?.reason ?? ErrorReason.UNSPECIFIED,
    reasonName: decoded?.reasonName ?? "",
    metadata: decoded?.metadata ?? {},
  };
}

/** A grpc-js error as a TapisError (one already decoded is returned as it is). */
export function toTapisError(error: unknown): TapisError {
  if (error instanceof TapisError) return error;
  const service = error as Partial<ServiceError>;
  if (typeof service?.code !== "number") {
    return new TapisError({
      code: Status.UNKNOWN,
      details: String((error as Error)?.message ?? error),
      reason: ErrorReason.UNSPECIFIED,
      reasonName: "",
      metadata: {},
    });
  }
  return new TapisError(
    decodeRefusal(service.code, service.details ?? "", service.metadata),
    service as ServiceError,
  );
}
