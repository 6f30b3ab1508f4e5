"""Tests of the test harness itself (the local protocol fakes)."""
