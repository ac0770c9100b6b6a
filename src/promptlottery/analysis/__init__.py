"""Analyses of judgments: the prompt lottery (issue 6).

Reads the judgments of one or many sweeps and never calls a judge model. Each analysis is a
function of a :class:`~promptlottery.judging.grid.JudgmentGrid` (the judgments with their verdict
kind, sliced once into configurations) and the stage's one options object
(:class:`~promptlottery.analysis.lottery.options.LotteryOptions`); the ``lottery`` stage
(:mod:`promptlottery.analysis.stage`) runs them all and writes tables, figures and report.md.
Import each function from the module that defines it (``promptlottery.analysis.lottery.agreement``, ...).

Aggregation across judges (:mod:`promptlottery.metrics.aggregate`: ``plurality``, ``majority``,
``mean_score``, ``median_score``, ``online_convergence``) takes plain items x judges matrices and is
importable without the rest.
"""
