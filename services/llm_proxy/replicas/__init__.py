"""The model replicas: how they are configured (`spec`), their live state (`pool`), keep-alive
connections to them (`upstream`), ejection and probes (`health`), and the attempt loop that
forwards one request with retries and fallbacks (`forward`)."""
