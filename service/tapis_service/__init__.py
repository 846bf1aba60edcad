"""Tapis gRPC service: sessions, timers, streams and persistence around the pure engine."""
