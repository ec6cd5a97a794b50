"""Live predictions: the prediction log, feedback, and drift and performance reports."""
