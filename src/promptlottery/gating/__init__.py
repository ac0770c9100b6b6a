"""Selective aggregation: a learned gate that decides when one judge's verdict can be trusted.

* :mod:`~promptlottery.gating.data`: gate examples (item x judge variant, labelled by whether the
  verdict falls in the five-judge plurality cluster), the judge's rendered query and answer, and
  the instance-disjoint split;
* :mod:`~promptlottery.gating.model`: the LoRA classifier (PyTorch Lightning + PEFT);
* :mod:`~promptlottery.gating.baselines`: frozen embeddings + logistic regression, and an LLM
  prompt classifier through the judge backends;
* :mod:`~promptlottery.gating.simulate`: the gating simulation, baselines and cost curves;
* :mod:`~promptlottery.gating.stage`: the ``gate`` stage (``python -m run +gate=selective``);
* :mod:`~promptlottery.gating.tune`: the Optuna search behind ``sweeps/tune_gate.py``.
"""
