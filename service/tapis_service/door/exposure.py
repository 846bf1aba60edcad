"""Safe by default: a server reachable beyond loopback needs TLS and API keys, or ``--insecure``.

Bound to a loopback address the server may run in open mode (no TLS, no keys, every table
public: ``make serve`` on a laptop). Bound to anything else without both, it refuses to start
(one line naming ``--insecure``, exit 2), as Redis's protected mode refuses outsiders; with
``--insecure`` it runs open anyway and says so at every start.
"""

from __future__ import annotations

import ipaddress


class Exposed(Exception):
    """The server would listen beyond loopback without TLS and API keys: it refuses to start."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only accepts connections from this
    machine. Any other name counts as exposed: what it resolves to may change."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check(host: str, *, tls: bool, api_keys: bool, insecure: bool) -> str | None:
    """Whether the server may start: None (safe), a warning to log (``insecure``), or
    ``Exposed``."""
    if is_loopback(host) or (tls and api_keys):
        return None
    missing = " and ".join(name for name, given in (("TLS (--tls-cert/--tls-key)", tls),
                                                    ("API keys (--api-keys-file)", api_keys))
                           if not given)
    if insecure:
        return f"--insecure: serving {host} without {missing}: anyone who reaches it may " \
               "read its tokens and create tables"
    raise Exposed(f"listening on {host} needs {missing}; give them, or --insecure to run "
                  "open anyway")
