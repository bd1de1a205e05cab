"""Test-only code the tests and the benches share (never shipped in the package): the
synthetic sessions (`synthetic`), the console's fake backend (`fake_backend`), the
console's Pilot helpers (`console`) and the one way to wait for something (`waiting`).
Imported as `tests.support.…` from the repository root (pytest's `pythonpath`, and the
benches run as `python -m bench.…`)."""
