"""The simulated machine: a GPU shared with a desktop, a fake vLLM server, a load generator."""
