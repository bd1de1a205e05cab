"""The tests; `tests.support` holds what they share with the benches."""
