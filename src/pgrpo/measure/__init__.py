"""Measurements that run a model (the log-reading diagnosis is `pgrpo.diagnose`): effective-rank
definitions (`rank`), the per-rollout gradient matrix of a batch (`gradrank`) and the curvature
probe of the objective (`probe`). See docs/diagnostics.md."""
