"""Tests of the PostgreSQL engine that only it has (the shared behaviour is in tests/storage/conformance)."""
