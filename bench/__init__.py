"""Benchmarks: ``python -m bench.<name> [--quick] [--json]``; ``make bench`` runs them all."""
