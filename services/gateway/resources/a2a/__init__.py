"""A2A (the Agent2Agent protocol) on taskyard's tasks and sessions: Agent Cards (`cards`), the
operations (`handler`, the SDK's request handler on the store), the task's events in A2A's
terms (`mapping`), push notification configs as webhooks (`push`). `routes` serves it."""
