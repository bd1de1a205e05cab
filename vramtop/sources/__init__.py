"""Adapters: the outside world (NVML, HTTP, log files, Windows counters) turned into core values.

Every adapter returns values; a failure becomes a value carrying its reason, never an exception
that reaches a caller.
"""
