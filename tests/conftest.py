"""Shared test setup. Fixture plugins live in tests/fakes/ and are registered here."""

pytest_plugins = ["tests.fakes.fixtures"]
