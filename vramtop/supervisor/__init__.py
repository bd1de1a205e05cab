"""The supervisor: owns the vLLM process tree, its log file and its state file."""
