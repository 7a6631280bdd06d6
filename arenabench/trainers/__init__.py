"""Trainers: the policy-update end of judges → engine → constructors → advantages → trainers.

``losses`` holds the GRPO and CISPO objectives; ``local`` is a CPU trainer with a tiny policy
(verl's adapter comes with the verl issue and imports verl only inside itself).
"""
