"""Tapis rules engine: pure, deterministic card games (no I/O, no clock, no transport)."""
