// A refusal as the contract spells it, free of any transport: a google.rpc.Status whose details
// hold one ErrorInfo (domain "tapis.v1"), its reason mapped onto the ErrorReason enum. Shared by
// the gRPC client (errors.ts) and the browser's envelope client (browser.ts).
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import type { Status } from "./gen/google/rpc/status_pb.js";
import { ErrorReason } from "./gen/tapis/v1/errors_pb.js";

/** The domain of every ErrorInfo the server gives. */
export const ERROR_DOMAIN = "tapis.v1";

/** What a refused call carries: its code, its reason, and the ErrorInfo metadata. */
export interface Refusal {
  /** The gRPC status code's number (grpc-js's `status` enum in Node). */
  code: number;
  /** The ErrorInfo's reason as the enum; UNSPECIFIED when absent or unknown to this client. */
  reason: ErrorReason;
  /** The reason string itself ("NOT_YOUR_TURN"), or "" when the status had no ErrorInfo. */
  reasonName: string;
  /** The ErrorInfo's metadata (e.g. `resume_after_sequence` of a stream cut short). */
  metadata: Record<string, string>;
  /** The status message. */
  details: string;
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

/** The refusal a google.rpc.Status says (its first ErrorInfo). */
export function refusalOfStatus(status: Status): Refusal {
  const refusal: Refusal = {
    code: status.code,
    details: status.message,
    reason: ErrorReason.UNSPECIFIED,
    reasonName: "",
    metadata: {},
  };
  for (const detail of status.details) {
    const info = anyUnpack(detail, ErrorInfoSchema);
    if (info === undefined) continue;
    refusal.reasonName = info.reason;
    refusal.reason = reasonOf(info.reason);
    refusal.metadata = { ...info.metadata };
    break;
  }
  return refusal;
}
