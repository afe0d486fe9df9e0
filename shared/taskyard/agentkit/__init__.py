"""The agent programming model: what users import to write agents (agents are layers
you call; memory, aggregators, output parsers, LLM clients, actions and their executor,
hooks; the `AgentMessage` they exchange and the spec that builds an agent by name)."""
