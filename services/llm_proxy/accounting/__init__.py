"""What the proxy counts: tokens each answer used (`usage`) and the Prometheus metrics
(`metrics`)."""
