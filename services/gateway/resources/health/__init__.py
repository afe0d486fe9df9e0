"""Liveness and readiness (`/healthz`, `/readyz`)."""
