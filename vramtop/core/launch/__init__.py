"""Launch scripts: the shell text read (never run), the vLLM command found in it, its lint."""
