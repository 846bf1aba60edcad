"""Optional OpenTelemetry tracing (``--otel`` / ``TAPIS_OTEL``; the ``otel`` extra:
``pip install 'tapis[otel]'``).

With it on, every ``tapis.v1.GameService`` call gets a server span
(``opentelemetry-instrumentation-grpc``'s aio interceptor, which continues a client's W3C
``traceparent``; a call a WebSocket frame carries gets one named alike, ``socket_call``), and
a call a cluster node relays to the table's owner carries the span's
context in its tunnel frame (``Caller.traceparent``): the owner serves it inside a child span,
so one trace crosses the tunnel. The exporter follows the standard variables:
``OTEL_TRACES_EXPORTER`` (``otlp``, the default, over gRPC with ``OTEL_EXPORTER_OTLP_*``;
``console``; ``none``),
``OTEL_SERVICE_NAME`` (default ``tapis``), ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``
and ``OTEL_BSP_*``. A tracer provider set before the server starts (a test's, or
``opentelemetry-instrument``'s) is used as it is. Off, nothing here is imported or called on
a call's path but one boolean test.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import grpc

ENABLED = False
"""Set once tracing is on (``interceptors``)."""
SERVICES = ("tapis.v1.GameService",)
"""The services whose calls are traced (not health, reflection, nor the tunnel itself)."""
RELAYED_SPAN = "tapis.cluster.Tunnel/{method}"
"""The name of the owner's span of a relayed call."""


class TracingUnavailable(Exception):
    """``--otel`` without the ``otel`` extra installed: the server refuses to start."""


def interceptors(otel: bool) -> list[grpc.aio.ServerInterceptor]:
    """The server's interceptors: OpenTelemetry's when ``otel`` (the provider and exporter set
    up from the environment first), else none."""
    global ENABLED
    if not otel:
        return []
    try:
        from opentelemetry.instrumentation.grpc import aio_server_interceptor, filters
    except ImportError as error:
        raise TracingUnavailable(
            "--otel needs the OpenTelemetry packages: pip install 'tapis[otel]'") from error
    _set_up_provider()
    ENABLED = True
    return [aio_server_interceptor(filter_=filters.any_of(
        *(filters.service_name(service) for service in SERVICES)))]


def _set_up_provider() -> None:
    """A tracer provider exporting as the ``OTEL_*`` variables say, unless one is set."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    if isinstance(trace.get_tracer_provider(), TracerProvider):
        return
    provider = TracerProvider(resource=Resource.create(
        {SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME", "tapis")}))
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
    if exporter == "console":
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    elif exporter != "none":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)


def traceparent() -> str | None:
    """The current span's W3C ``traceparent`` (None when tracing is off or no span is on)."""
    if not ENABLED:
        return None
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent")


@contextlib.contextmanager
def socket_call(path: str) -> Iterator[Any]:
    """The server span of a call a WebSocket frame carries: named as gRPC's span of the same
    method (``path``, ``/tapis.v1.GameService/SubmitAction``), ``rpc.system`` ``websocket``;
    the root of a trace (a frame carries no trace context). A refusal raised through it marks
    it an error. Call it only when ``ENABLED``."""
    from opentelemetry import trace

    _, service, method = path.split("/")
    tracer = trace.get_tracer("tapis_service.observe.tracing")
    with tracer.start_as_current_span(path, kind=trace.SpanKind.SERVER, attributes={
            "rpc.system": "websocket", "rpc.service": service, "rpc.method": method}) as span:
        yield span


@contextlib.contextmanager
def relayed(method: str, parent: str | None) -> Iterator[Any]:
    """The owner's span of a call relayed to it (a child of ``parent``, the relaying node's
    span); nothing when tracing is off here or the call carries no trace."""
    if not ENABLED or not parent:
        yield None
        return
    from opentelemetry import propagate, trace

    context = propagate.extract({"traceparent": parent})
    tracer = trace.get_tracer("tapis_service.observe.tracing")
    with tracer.start_as_current_span(RELAYED_SPAN.format(method=method), context=context,
                                      kind=trace.SpanKind.SERVER) as span:
        yield span
