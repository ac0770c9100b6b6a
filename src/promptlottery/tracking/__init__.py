"""Tracking: W&B (offline by default) and local run records."""
