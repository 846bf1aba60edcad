// A refusal, decoded: the gRPC status code and the ErrorInfo of the `grpc-status-details-bin`
// trailer (a google.rpc.Status), its `reason` mapped onto the contract's ErrorReason enum.
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { fromBinary } from "@bufbuild/protobuf";
import { status as Status, type Metadata, type ServiceError } from "@grpc/grpc-js";
import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "./gen/google/rpc/status_pb.js";
import { ErrorReason } from "./gen/tapis/v1/errors_pb.js";

/** The domain of every ErrorInfo the server gives. */
export const ERROR_DOMAIN = "tapis.v1";

const DETAILS_TRAILER = "grpc-status-details-bin";

/** What a refused call carries: its code, its reason, and the ErrorInfo metadata. */
export interface Refusal {
  /** The gRPC status code (grpc-js's `status` enum). */
  code: Status;
  /** The ErrorInfo's reason as the enum; UNSPECIFIED when absent or unknown to this client. */
  reason: ErrorReason;
  /** The reason string itself ("NOT_YOUR_TURN"), or "" when the status had no ErrorInfo. */
  reasonName: string;
  /** The ErrorInfo's metadata (e.g. `resume_after_sequence` of a stream cut short). */
  metadata: Record<string, string>;
  /** The status message. */
  details: string;
}

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

/** The ErrorReason of a reason string ("NOT_YOUR_TURN"); UNSPECIFIED if unknown. */
export function reasonOf(name: string): ErrorReason {
  const value = (ErrorReason as unknown as Record<string, number | undefined>)[name];
  return typeof value === "number" ? (value as ErrorReason) : ErrorReason.UNSPECIFIED;
}

/** The name of an ErrorReason without its prefix, as ErrorInfo.reason spells it. */
export function reasonName(reason: ErrorReason): string {
  return ErrorReason[reason] ?? "";
}

/** The refusal a status's trailers carry (code and message from the status itself). */
export function decodeRefusal(code: Status, details: string, trailers?: Metadata): Refusal {
  const refusal: Refusal = {
    code,
    details,
    reason: ErrorReason.UNSPECIFIED,
    reasonName: "",
    metadata: {},
  };
  const raw = trailers?.get(DETAILS_TRAILER)[0];
  if (raw === undefined || typeof raw === "string") return refusal;
  let decoded;
  try {
    decoded = fromBinary(StatusSchema, raw);
  } catch {
    return refusal;
  }
  for (const detail of decoded.details) {
    const info = anyUnpack(detail, ErrorInfoSchema);
    if (info === undefined) continue;
    refusal.reasonName = info.reason;
    refusal.reason = reasonOf(info.reason);
    refusal.metadata = { ...info.metadata };
    break;
  }
  return refusal;
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
