"""Recorded sessions (JSON Lines, see the session format) and their replay."""
