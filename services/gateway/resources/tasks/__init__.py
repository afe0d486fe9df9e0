"""Tasks (`/v1/tasks`): submit one, list them, read one, follow its events, cancel it."""
