"""Shared helpers for the runner's integration tests (suites on disk, planted answers)."""
