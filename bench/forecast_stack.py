"""Candidate forecasts of the real runs and the variants built from them, compared by
leave-one-repository-out (LORO) and by nested LORO (bench/forecast_real.py drives it).

A candidate table holds, for every run and cut in DERIVE_CUTS, the future mean predicted by
each candidate forecaster: the fitted level at the cut and the fitted curve's future mean
(`level`, `model`), the same with the timescale prior centred by the training repositories
(`level_tau`, `model_tau`; one centre per held-out repository), the last-window mean, the
plain exponential and rom_blend. A variant learns its weights from training rows only:

- `level_gain@cut`: the gain fraction from the training runs at the scored cut (the default
  until 2026-12-01 23:50 UTC), no timescale prior;
- `level_gain`: the gain fraction from the training runs at all DERIVE_CUTS, each repository
  counted once (`repository_weights`), and the band scale at the scored cut; no timescale prior;
- `level_gain+tau`: the same with the timescale prior (the default since 2026-12-01 23:50 UTC);
- `level_gain+tau+mean`: the same with the level read as the mean (`ForecastPrior(level=
  "mean")`: the fitted curve shifted by the mean residual of the prefix's last half; added
  2026-12-04 because a robust fit's level sits near the mode of a skewed reward);
- `stack` / `stack@cut`: stacking weights of all seven candidates (`stack_weights`) from the
  training runs at all DERIVE_CUTS / at the scored cut.

Nested LORO: for each held-out repository, each variant is scored by an inner LORO over the
training repositories only (mean over the scored cuts of the median over repositories of the
per-repository median |error| / std); the best is refit on all training repositories and scored
on the held-out one, so no choice sees the held-out repository.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from pgrpo.dynamics import forecast
from pgrpo.dynamics.forecast import MIN_FORECAST_POINTS, last_window_mean
from pgrpo.dynamics.levelgain import (
    LEVELS,
    ForecastPrior,
    band_scale,
    derive_prior,
    repository_weights,
    stack_weights,
)

DERIVE_CUTS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
CANDIDATES = ("level", "model", "level_tau", "model_tau", "last_window", "exponential",
              "rom_blend")  # fmt: skip


def candidate_rows(
    run: dict, centres: dict[str, float], cuts=DERIVE_CUTS, rom: bool = True, loss: str = "soft_l1"
) -> list[dict]:
    """One row per cut of `run` (corpus entry of forecast_real.load_corpus; none at a cut that
    leaves fewer than `MIN_FORECAST_POINTS` points before it or none after): the candidates'
    predicted future means, S (band_unit, band_unit_tau), the observed mean, std, last-10 mean.
    centres: name -> timescale-prior centre (name: the held-out repository it was derived
    without, or "all"). rom: also rom_blend (the slow candidate; nan when False). loss: the
    level fit's least_squares loss (`ForecastPrior.loss`)."""
    log, y = run["log"], run["log"].reward
    kw = {k: v for k, v in run["inputs"].items() if k != "optimizer"}
    kw["weights"] = run["weights"]
    rows = []
    for cut in cuts:
        i = int(round(cut * y.size))
        if i < MIN_FORECAST_POINTS or i >= y.size:  # a short run: no forecast at this cut
            continue
        base = forecast(log.step, y, cut, method="level_gain", prior=ForecastPrior(0.0, 1.0, loss),
                        **kw)  # fmt: skip
        kw_rom = {k: v for k, v in kw.items() if k != "weights"}
        rb = forecast(log.step, y, cut, method="rom_blend", **kw_rom) if rom else None
        tau = {}
        for name, c in centres.items():
            ft = forecast(log.step, y, cut, method="level_gain",
                          prior=ForecastPrior(0.0, 1.0, loss, c), **kw)  # fmt: skip
            shift = LEVELS.get("mean")(y[:i], ft.fit.fitted)
            tau[name] = (ft.metrics["level_at_cut"], ft.metrics["model_mean"],
                         ft.metrics["band_unit"], shift)  # fmt: skip
        rows.append({
            "run": run["meta"]["name"], "repo": run["meta"]["repo"], "cut": cut,
            "std": float(np.std(y)) or 1.0, "observed": base.observed_mean,
            "last10": float(np.mean(y[max(i - 10, 0) : i])),
            "level": base.metrics["level_at_cut"], "model": base.metrics["model_mean"],
            "band_unit": base.metrics["band_unit"], "last_window": last_window_mean(y[:i]),
            "exponential": base.baselines["exponential"],
            "rom_blend": rb.predicted_mean if rb else math.nan,
            "covered_rom_blend": bool(rb and rb.mean_band[0] <= base.observed_mean
                                      <= rb.mean_band[1]),
            "tau": tau,
        })  # fmt: skip
    return rows


def _value(row: dict, name: str, centre: str) -> float:
    if name == "level_tau":
        return row["tau"][centre][0]
    if name == "model_tau":
        return row["tau"][centre][1]
    return row[name]


def _cols(rows: list[dict], centre: str, tau: bool, mean: bool = False) -> dict[str, np.ndarray]:
    """The level_gain inputs of `rows`; mean: shifted by the mean residual (`LEVELS["mean"]`,
    of the timescale-prior fit: needs tau)."""
    lv, md, bu = ("level_tau", "model_tau", 2) if tau else ("level", "model", None)
    shift = np.array([r["tau"][centre][3] if mean else 0.0 for r in rows])
    return {
        "level": np.array([_value(r, lv, centre) for r in rows]) + shift,
        "model_mean": np.array([_value(r, md, centre) for r in rows]) + shift,
        "band_unit": np.array([r["tau"][centre][2] if bu else r["band_unit"] for r in rows]),
        "observed": np.array([r["observed"] for r in rows]),
        "std": np.array([r["std"] for r in rows]),
    }


Predictor = Callable[[dict], tuple[float, float]]  # row -> (predicted mean, 90% half-width)


def level_gain_variant(tau: bool, at_cut: bool, mean: bool = False) -> Callable:
    """A level_gain variant: fit(train rows, centre, cut) -> (predictor, prior info). at_cut:
    gamma and the band scale from the training rows at the scored cut (the old default);
    otherwise gamma from the rows at all DERIVE_CUTS, each repository once, and the band scale
    from the rows at the scored cut (`levelgain.band_scale`). mean: the level read as the mean
    (`ForecastPrior(level="mean")`)."""

    def fit(train: list[dict], centre: str, cut: float):
        rows = [r for r in train if r["cut"] == cut] if at_cut else train
        w = None if at_cut else repository_weights([r["repo"] for r in rows])
        g = derive_prior(**_cols(rows, centre, tau, mean), weights=w).gain_fraction
        c = _cols([r for r in train if r["cut"] == cut], centre, tau, mean)
        q = band_scale(c["level"] + g * (c["model_mean"] - c["level"]) - c["observed"],
                       c["band_unit"])  # fmt: skip

        def predict(row: dict) -> tuple[float, float]:
            c = _cols([row], centre, tau, mean)
            lvl = float(c["level"][0])
            return lvl + g * (float(c["model_mean"][0]) - lvl), q * float(c["band_unit"][0])

        return predict, {"gain_fraction": g, "band_scale": q}

    return fit


def stack_variant(at_cut: bool) -> Callable:
    """Stacking of CANDIDATES; band: the split-conformal 90% quantile of |error| / S on the
    training rows, S^2 = band_unit_tau^2 + sum_j w_j (C_j - prediction)^2."""

    def fit(train: list[dict], centre: str, cut: float):
        rows = [r for r in train if r["cut"] == cut] if at_cut else train
        C = np.array([[_value(r, n, centre) for n in CANDIDATES] for r in rows])
        y = np.array([r["observed"] for r in rows])
        s = np.array([r["std"] for r in rows])
        w = stack_weights(C, y, s, repository_weights([r["repo"] for r in rows]))

        def unit(row: dict) -> tuple[float, float]:
            c = np.array([_value(row, n, centre) for n in CANDIDATES])
            p = float(c @ w)
            return p, math.sqrt(row["tau"][centre][2] ** 2 + float(w @ (c - p) ** 2))

        ratio = np.sort([abs(unit(r)[0] - r["observed"]) / max(unit(r)[1], 1e-12) for r in rows])
        q = float(ratio[min(ratio.size - 1, math.ceil((ratio.size + 1) * 0.9) - 1)])

        def predict(row: dict) -> tuple[float, float]:
            p, u = unit(row)
            return p, q * u

        return predict, {"weights": dict(zip(CANDIDATES, np.round(w, 4).tolist(), strict=True))}

    return fit


VARIANTS = {
    "level_gain@cut": level_gain_variant(tau=False, at_cut=True),
    "level_gain": level_gain_variant(tau=False, at_cut=False),
    "level_gain+tau": level_gain_variant(tau=True, at_cut=False),
    "level_gain+tau+mean": level_gain_variant(tau=True, at_cut=False, mean=True),
    "stack": stack_variant(at_cut=False),
    "stack@cut": stack_variant(at_cut=True),
}


def on_twin(fit: Callable, twins: dict) -> Callable:
    """The variant `fit` run on each row's twin (same run and cut, other inputs: twins maps
    (run, cut) -> row), scored on the row itself (the observed mean is the same)."""

    def twin_fit(train: list[dict], centre: str, cut: float):
        predict, info = fit([twins[r["run"], r["cut"]] for r in train], centre, cut)
        return (lambda row: predict(twins[row["run"], row["cut"]])), info

    return twin_fit


def score_row(row: dict, pred: float, half: float) -> dict:
    err = abs(pred - row["observed"]) / row["std"]
    return {"run": row["run"], "repo": row["repo"], "cut": row["cut"], "predicted": pred,
            "err": err, "err_last10": abs(row["last10"] - row["observed"]) / row["std"],
            "covered": bool(abs(pred - row["observed"]) <= half)}  # fmt: skip


def loro_variant(fit: Callable, table: list[dict], cuts, centre_of=lambda repo: repo) -> list[dict]:
    """Held-out rows of one variant: fitted on the other repositories, scored on each one."""
    out = []
    for repo in sorted({r["repo"] for r in table}):
        train = [r for r in table if r["repo"] != repo]
        for cut in cuts:
            predict, info = fit(train, centre_of(repo), cut)
            for r in table:
                if r["repo"] == repo and r["cut"] == cut:
                    out.append({**score_row(r, *predict(r)), **info})
    return out


def repo_median(rows: list[dict], key: str = "err") -> float:
    """Median over repositories of the per-repository median of `key`."""
    repos = sorted({r["repo"] for r in rows})
    return float(np.median([np.median([r[key] for r in rows if r["repo"] == g]) for g in repos]))


def criterion_error(rows: list[dict], cuts) -> float:
    """Mean over cuts of the median over repositories of the per-repository median error."""
    return float(np.mean([repo_median([x for x in rows if x["cut"] == c]) for c in cuts]))


def criterion_gain(rows: list[dict], cuts) -> float:
    """Mean over cuts of the median over repositories of the per-repository median of
    err - err_last10 (how far the forecast beats the naive one; both parts of the bar)."""
    rel = [{**x, "rel": x["err"] - x["err_last10"]} for x in rows]
    return float(np.mean([repo_median([x for x in rel if x["cut"] == c], "rel") for c in cuts]))


CRITERIA = {"error": criterion_error, "gain_over_last10": criterion_gain}


def nested_loro(table: list[dict], cuts, criterion=criterion_error, variants=VARIANTS):
    """Nested LORO: (held-out rows, [{repo, chosen, inner scores}]). The inner LORO uses the
    outer fold's timescale centre (derived without the held-out repository)."""
    out, chosen = [], []
    for repo in sorted({r["repo"] for r in table}):
        train = [r for r in table if r["repo"] != repo]
        inner = {}
        for name, fit in variants.items():
            rows = loro_variant(fit, train, cuts, centre_of=lambda _g, c=repo: c)
            inner[name] = criterion(rows, cuts)
        best = min(inner, key=inner.get)
        chosen.append({"repo": repo, "chosen": best, "inner_score": inner})
        for cut in cuts:
            predict, _ = variants[best](train, repo, cut)
            for r in table:
                if r["repo"] == repo and r["cut"] == cut:
                    out.append({**score_row(r, *predict(r)), "variant": best})
    return out, chosen
