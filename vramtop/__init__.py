"""vramtop: an operations console for vLLM on the GPU your desktop also uses."""

__version__ = "0.1.0"
