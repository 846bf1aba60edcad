"""The stores: the journal and snapshots (memory, SQLite, PostgreSQL), the results ledger,
checksums and the join key."""
