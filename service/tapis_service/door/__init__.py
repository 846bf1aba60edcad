"""The door: what every call passes whatever its transport — the RPCs declared once (``rpcs``),
the caller's identity and credentials, TLS, limits, quotas, the connection caps and the log
context. The transports pass every call through it; the game API, the tables and the codec
consult its checks; it calls none of them."""
