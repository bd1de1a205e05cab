"""The benchmarks: scripts that print figures and ratios, run from the repository root as
`python -m bench.<name>` (so that `tests.support` is importable)."""
