"""Trainers: the policy-update end of judges → engine → constructors → advantages → trainers.

``losses`` holds the GRPO and CISPO objectives; ``scoring`` the group-scoring kit the adapters
share (constructor, judge stack and engine built once, masking, hidden quality); ``local`` is a
CPU trainer with a tiny policy; ``trl`` and ``verl`` are the adapters to those trainers, each
importing its trainer only inside itself and never the other adapter (tests/test_layers.py).
"""
