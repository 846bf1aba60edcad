"""The ground floor: metrics, logs, tracing, the clock and the refusals, used by every room and
using none."""
