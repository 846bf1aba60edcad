"""Helpers shared by the tests (no test module imports another test module)."""
