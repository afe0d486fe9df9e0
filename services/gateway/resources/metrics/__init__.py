"""The gateway's Prometheus metrics (`/metrics`), with the queues' depths read now."""
