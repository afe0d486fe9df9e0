"""taskyard's shared library: the vocabulary every service speaks, and the agent model."""
