"""The supervisor: owns the vLLM process tree, its log file and its state file."""

from vramtop.supervisor.service import MemoryReleased, Supervisor

__all__ = ["MemoryReleased", "Supervisor"]
