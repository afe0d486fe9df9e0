"""Webhooks: a task's webhook and its deliveries as the API shows them, and the tenant's
signing secret (`/v1/webhooks/secret`)."""
