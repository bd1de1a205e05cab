"""The fleet console: one row per box, read from each box's `vramtop export` (cells.py says
how a row reads, fleet_app.py refreshes the rows)."""
