"""Training jobs: creating, listing, reading and cancelling them (the worker runs them)."""
