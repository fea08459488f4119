"""unsee: make LLM agents forget without restarting."""
