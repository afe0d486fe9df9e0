"""What only development needs: the local stack (`taskyard up`, the end-to-end tests), the
one helper that starts, waits for and stops service processes (tests, benchmarks), and the
scripted model that stands in for vLLM (`scripted_model`).

Not shipped: the production image copies `shared` and `services` only, and nothing there
imports this package (tests/deploy checks both).
"""
