"""Plumbing every process shares: settings, Redis clients and key names, the Celery
app and its broker transport, the event-loop thread, logs, metrics and traces, and the
webhook signatures (on the standard library: the client verifies with them)."""
