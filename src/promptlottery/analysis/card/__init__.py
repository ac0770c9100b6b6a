"""The judge card: one page per judge x prompt group x dataset criterion, beside the lottery."""
