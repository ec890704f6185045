"""The GRPO math core: advantage estimators, policy-loss pieces, group statistics, statistics.

Pure functions over tensors; no I/O, logging or globals besides the registries.
"""
