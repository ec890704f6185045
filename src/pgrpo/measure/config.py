"""The probe's settings, apart from the torch code so the CLI reads its defaults cheaply."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pgrpo.errors import check_seed


@dataclass(frozen=True)
class ProbeConfig:
    """How to probe."""

    epsilon: float = 0.1
    """Probe step of `probe_curvature` along u, in parameter units (theta + epsilon * u)."""
    step_lrs: float = 10.0
    """Probe step along the update direction in multiples of the run's lr (`probe_run_config`
    probes at epsilon = step_lrs * lr)."""
    n_direction: int = 4
    """Gradient batches averaged for the direction g (and Adam's second moment); with 2 or more,
    kappa's standard error is a jackknife over them, which includes the direction's noise."""
    n_pairs: int = 8
    """Finite-difference pairs, at least one per direction batch (pair i steps along direction
    batch i mod n_direction; each gives one kappa sample)."""
    preconditioner: str | None = None
    """'adam' (P = 1 / (sqrt(v) + adam_eps), v from the direction batches), 'sgd' (P = I), or
    unset: the run optimizer's ('adam' for optim.name=adamw, 'sgd' for sgd_momentum), the units
    its prediction needs."""
    adam_eps: float = 1e-8
    """Adam's epsilon in the preconditioner."""
    seed: int = 0
    """Seed of the probe batches (`probe_seeds`: different seeds share no batch)."""

    def __post_init__(self) -> None:
        if self.preconditioner not in (None, "adam", "sgd"):
            raise ValueError(
                f"preconditioner must be 'adam', 'sgd' or unset, got {self.preconditioner!r}"
            )
        if not self.epsilon > 0:
            raise ValueError(f"epsilon must be > 0, got {self.epsilon}")
        if not (self.step_lrs > 0 and math.isfinite(self.step_lrs)):
            raise ValueError(f"step_lrs must be finite and > 0, got {self.step_lrs}")
        check_seed(self.seed, "seed")
        if self.n_pairs < 2 or self.n_direction < 1:
            raise ValueError("need n_pairs >= 2 (for a standard error) and n_direction >= 1")
        if self.n_pairs < self.n_direction:
            raise ValueError(
                f"n_pairs={self.n_pairs} < n_direction={self.n_direction}: each direction batch "
                "needs a pair (pair i steps along batch i mod n_direction); raise n_pairs"
            )
