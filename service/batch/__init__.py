"""Batch predictions: a stored dataset scored by one model as a job, written as a new dataset."""
