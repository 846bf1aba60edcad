"""Tapis benchmarks: the service measured side by side with a bare grpc.aio baseline."""

import os

# before any benchmark imports grpc: its fork handlers crash a forked child (SIGSEGV), and the
# PostgreSQL outage benchmark forks pg_ctl (run as PostgreSQL's own user) with calls in flight
# (tests/test_fork_safety.py)
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
