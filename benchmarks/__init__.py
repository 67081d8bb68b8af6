"""srcore's side-by-side benchmark: ``python -m benchmarks.run`` (see docs/performance.md)."""
