"""The system (`/v1/system`): the queues' depths, the workers that answer, the model replicas
(`probe` reads them; `/metrics` too)."""
