"""Benchmarks: routine modules (``benchmarks.routines``), the unified CLI and per-kernel wrappers."""
