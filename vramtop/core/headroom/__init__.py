"""The headroom calculator: what a budget gives vLLM's KV pool and leaves the desktop."""
