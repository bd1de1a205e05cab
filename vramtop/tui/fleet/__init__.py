"""The fleet console: one row per box, read from each box's `vramtop export` (cells.py says
how a row reads, app.py refreshes the rows)."""
