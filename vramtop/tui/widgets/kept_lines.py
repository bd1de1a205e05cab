"""The server's lines a log view builds its rows from: what the backend keeps (its last
`keep` lines), as far as the reads have brought it, and the search on them. No Textual here:
the view (ServerLog) asks what is new and what a search lets through, and draws."""

from __future__ import annotations


class KeptLines:
    """The lines read so far, each read's new ones found by where it continues them."""

    def __init__(self, keep: int) -> None:
        self.lines: list[str] = []
        self._keep = keep
        self.query = ""  # the search: a line shows when it holds this (any case)
        self.kept_wanted = False  # asked for every line kept: they rebuild the rows
        self.rebuild_due = False  # they came (the rows are to be built from them anew)

    def offer(self, lines: list[str], *, kept: bool) -> None:
        """A read's lines; `kept`: every line the backend keeps, which rebuild the rows when
        they were asked for (`kept_wanted`)."""
        if kept and self.kept_wanted:
            self.kept_wanted = False
            self.lines = list(lines)
            self.rebuild_due = True

    def follow(self, lines: list[str]) -> list[str] | None:
        """The lines of a read (a tail of the log) that are new; None when they do not
        continue the lines read so far (a rotated log, a new server, more lines than a tail
        holds) or there were none: the lines are now these, and the rows to be built anew."""
        new = continuation(self.lines, lines)
        if new is None or (new and not self.lines):
            self.lines = list(lines)
            return None
        if new:
            self.lines += new
            del self.lines[: -self._keep]
        return new

    def matches(self, line: str) -> bool:
        return not self.query or self.query.lower() in line.lower()

    def shown(self, lines: list[str]) -> list[str]:
        """Those of `lines` that the search lets through."""
        return [line for line in lines if self.matches(line)] if self.query else lines


def continuation(old: list[str], new: list[str]) -> list[str] | None:
    """The lines of `new` after the end of `old`, or None when `new` does not continue it.

    Both are a tail of one log: `new` continues `old` when its lines up to some point are
    the end of `old`. A log that writes one line many times over (the same request from the
    same client) has many such points; the latest one is taken, which never counts a line
    twice."""
    if not old:
        return list(new)
    if len(new) > len(old) and new[: len(old)] == old:
        # The tail only grew (the server has written fewer lines than the tail holds): exact,
        # even where the same line was written many times over.
        return new[len(old) :]
    last = old[-1]
    for index in range(len(new) - 1, -1, -1):
        if new[index] == last:
            overlap = min(index + 1, len(old))
            if new[index + 1 - overlap : index + 1] == old[-overlap:]:
                return new[index + 1 :]
    return None
