"""The tables: their lifecycle, the host that holds them, each table's actor and session, bots
and timers, fan-out and streams, healing, recovery and rest."""
