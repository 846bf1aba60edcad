"""Protobuf <-> engine: the converters, the games' adapters, the hand encoder."""
