"""The pairwise judges' readers: the columns' contract, the pair table, the estimates, the rankings."""
