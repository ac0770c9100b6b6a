"""What the analysis stages share: the report writer, the figures' style, the human baseline."""
