"""Experiment specs, the `accelbench run` pipeline, Jetson validation and cloud plans: the composition root."""
