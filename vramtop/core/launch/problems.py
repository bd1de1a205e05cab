"""What reading a launch script found wrong: a `Problem` per line, `LaunchScriptError` for all."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """Something in the script, with its line (None: the script as a whole)."""

    line: int | None
    message: str

    def __str__(self) -> str:
        return self.message if self.line is None else f"line {self.line}: {self.message}"


class LaunchScriptError(ValueError):
    """The script cannot become a profile; `problems` says where and why."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))
