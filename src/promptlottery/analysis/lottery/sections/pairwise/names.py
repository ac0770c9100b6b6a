"""The names of the pairwise section's tables (``tables/<name>.csv``), declared once."""

WORDINGS = "pairwise_wordings"
CONFIGURATIONS = "pairwise_configurations"
HUMAN_AGREEMENT = "pairwise_human_agreement"
RANK_SUMMARY = "pairwise_rank_summary"
RANK_SYSTEMS = "pairwise_rank_systems"
VERDICT = "pairwise_verdict"
#: the section's tables, in the order they are built
TABLES = (WORDINGS, CONFIGURATIONS, HUMAN_AGREEMENT, RANK_SUMMARY, RANK_SYSTEMS, VERDICT)
