"""Two or more runs side by side: the config diff and the metric deltas."""
