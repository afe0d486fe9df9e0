"""Examples of user code deployed to taskyard by configuration."""
