"""What vLLM itself says, as values: its /metrics page, its log lines, its command line."""
