"""Adapters that put pgrpo's estimators, losses and diagnostics into other trainers.

- `pgrpo.integrations.trl`: a TRL `GRPOTrainer` subclass and config (needs `trl`, extra `trl`).
- `pgrpo.integrations.verl`: registers pgrpo's estimators and losses with verl (needs verl, in its
  own environment because of verl's transformers pin; see docs/integrations.md).

Neither is imported here, so `import pgrpo` never needs TRL or verl.
"""
