"""The rubric study: holistic vs analytic rubrics, rubric edits, examples and batching.

Reproduces the design of the rubric-modification paper (Huynh et al., "Quantifying the Statistical
Effect of Rubric Modifications on Human-Autorater Agreement") on essay scoring (ASAP sets 1, 4, 6
with ASAP++ traits) and instruction following (InFoBench decomposed questions):

* :mod:`~promptlottery.rubrics.tasks`: the registry of rubric tasks by dataset name
  (``asap_task``, ``infobench_task``, over ``task_base``): where the rubric texts, criteria, human
  labels, agreement strata and solved examples come from;
* :mod:`~promptlottery.rubrics.prompts`: rubric conditions and the study's own renderings of them
  (holistic, analytic separate, analytic batch scored position by position), the reference the
  grid's requests are checked against;
* :mod:`~promptlottery.rubrics.grid_groups`: each condition as a prompt group of the judge grid;
* :mod:`~promptlottery.rubrics.study`: the sample, conditions and tables' files every rubric stage
  shares;
* :mod:`~promptlottery.rubrics.tables`: the comparisons (Kendall tau-b, Pareto dominance,
  yes-ratio, bootstrap CIs) and the paper-shaped tables, built from ``cells`` (cell and table
  layout), ``study_data`` (aligned arrays), ``ci`` (one block's CIs and its paired bootstrap
  tests, Bonferroni by the block's size) and ``strata`` (Table 4: raters agree vs disagree);
* :mod:`~promptlottery.rubrics.grid_stage`: the ``rubric_judge`` (one condition x backbone, a
  judge job of the grid) and ``rubric_tables`` stages;
* :mod:`~promptlottery.rubrics.stage`: the ``rubric`` stage (``python -m run +experiment=rubric_*``),
  every ``rubric_judge`` job and the tables in one job.

Rubric wording the datasets do not ship is package data under ``rubrics/texts/``; the official
ASAP prompts, rubrics and (copyrighted) source texts are read from the data dir at run time.
"""
