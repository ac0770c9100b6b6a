"""The pairwise judge mode's budget analyses (``+analysis=budget`` of a pairwise grid), named by the
mode (``Pairwise.budget_full`` / ``budget_sparse``: :mod:`.report`) and chosen through it
(:func:`promptlottery.analysis.budget.modes.mode_budget`): the simulator over (wording, order) cells
(:mod:`.simulation`) and the wording model of its cells (:mod:`.wording_model`)."""
