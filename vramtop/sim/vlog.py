"""vLLM's log line shapes: `(APIServer pid=N) INFO mm-dd HH:MM:SS [file.py:NN] message`."""

from __future__ import annotations

import os
import sys
import threading
import time

_lock = threading.Lock()


def line(proc: str, level: str, where: str, message: str, pid: int | None = None) -> str:
    stamp = time.strftime("%m-%d %H:%M:%S")
    return f"({proc} pid={pid or os.getpid()}) {level} {stamp} [{where}] {message}"


def emit(text: str) -> None:
    """Print whole lines and flush, so a log file never holds half a line from two processes."""
    with _lock:
        try:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # nobody reads our output any more (log closed); keep serving regardless


def info(proc: str, where: str, message: str) -> None:
    emit(line(proc, "INFO", where, message))


def warning(proc: str, where: str, message: str) -> None:
    emit(line(proc, "WARNING", where, message))


def error(proc: str, where: str, message: str) -> None:
    emit(line(proc, "ERROR", where, message))


def gib(nbytes: float) -> str:
    """A GiB figure the way vLLM prints it (`9.26`, `18.9`)."""
    return f"{round(nbytes / 1024**3, 2):g}"
