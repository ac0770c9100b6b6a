"""The budget stage: sparse designs and adaptive stopping, simulated and estimated; the wording model."""
