"""The text tables `python bench/corpus_dynamics.py` prints from its results (the dict
`corpus_dynamics.analyse` returns, or bench/results/corpus_dynamics.json): the fits, then (a) lr
transfer, (b) G-invariance and k ~ N^gamma, (c) inner updates, (d) std-normalisation ablations."""

from __future__ import annotations

import math


def _f(v, fmt: str = ".3f") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-" if v is None else str(v)
    return format(v, fmt)


def show(res: dict) -> None:
    print("fits (constrained rom_fixed under the adam reduction, beta1 0.9)")
    print(f"{'run':<40} {'kappa':>9} {'90% interval':>21} {'R2 fix':>7} {'R2 free':>7} closed form")
    for n, f in res["fits"].items():
        iv = f"[{_f(f['kappa_lo'], '.3g')}, {_f(f['kappa_hi'], '.3g')}]"
        print(
            f"{n:<40} {f['kappa']:>9.3g} {iv:>21} {f['r2_constrained']:>7.3f} "
            f"{f['r2_free']:>7.3f} {f['closed_form']}"
        )
    for sweep, rows in res["transfer"].items():
        print(f"\n(a) lr transfer, {sweep}")
        head = f"{'source':<36} {'target':<36} {'lr src':>8} {'lr tgt':>8} {'R2 pred':>8}"
        print(head + f" {'R2 tau':>7} {'R2 own':>7} kappa_tgt in src CI")
        for r in rows:
            print(
                f"{r['source']:<36} {r['target']:<36} {r['lr_source']:>8.0e} "
                f"{r['lr_target']:>8.0e} {r['r2_prediction']:>8.3f} "
                f"{r['r2_timescale_only']:>7.3f} {r['r2_own_fit']:>7.3f} "
                f"{r['kappa_target_in_source_interval']}"
            )
    print(
        f"median held-out-lr R2: {res['transfer_median_r2']:.3f} (levels carried over), "
        f"{res['transfer_median_r2_timescale_only']:.3f} (timescale only)"
    )
    for sweep, o in res["lr_order"].items():
        cells = ", ".join(
            f"lr {x:.0e}: a {y:.3g} [{lo:.3g}, {hi:.3g}]"
            for x, y, lo, hi in zip(o["lr"], o["a"], o["a_lo"], o["a_hi"], strict=True)
        )
        print(f"a = lr kappa, {sweep}: {cells}; exponent in lr {o['exponent']:.2f} (model 1)")
    for sweep, g in res["g_invariance"].items():
        print(
            f"\n(b) G-invariance, {sweep}: delta AIC (joint - separate) {g['delta_aic']:.2f}; "
            f"LR {g['lr_stat']:.2f} on {g['lr_df']} df, p {g['lr_p']:.3g} "
            f"(autocorrelation-shrunk: {g['lr_stat_autocorr']:.2f}, p {g['lr_p_autocorr']:.3g})"
        )
        for v in g["variance"]:
            print(
                f"   {v['run']:<40} N={v['N']:>4} residual var {v['residual_var']:.3g}  "
                f"sampling var {_f(v['sampling_var'], '.3g')}"
            )
        if "variance_slope" in g:
            print(
                f"   log-log slope of residual var on N: {g['variance_slope']:.2f} "
                f"+- {g['variance_slope_se']:.2f} (sampling / SGD -1, Adam -0.5)"
            )
    for sweep, g in res["g_scaling"].items():
        print(
            f"\n(b') k ~ N^gamma, {sweep} (LR vs separate fits, {g['df']} df): gamma=0 "
            f"{g['lr_stat_gamma_0']:.2f} (p {g['p_gamma_0']:.3g}), gamma=1/2 (Adam) "
            f"{g['lr_stat_gamma_half']:.2f} (p {g['p_gamma_half']:.3g}); best gamma "
            f"{g['gamma_best']:.2f}, 90% [{g['gamma_90'][0]:.2f}, {g['gamma_90'][1]:.2f}]"
        )
    print("\n(c) inner updates / off-policy epochs")
    for r in res["inner_updates"]:
        print(
            f"   {r['source']} -> {r['target']} (K={r['K']}): R2 pred {r['r2_prediction']:.3f} "
            f"(K ignored {r['r2_prediction_K_ignored']:.3f}, timescale only "
            f"{r['r2_timescale_only']:.3f} (K ignored {r['r2_timescale_only_K_ignored']:.3f}), "
            f"own fit {r['r2_own_fit']:.3f}); "
            f"predicted final {r['predicted_final']:.3f}, observed last-5 "
            f"{r['observed_final_mean5']:.3f}, peak {r['observed_peak_mean5']:.3f} at step "
            f"{r['observed_peak_step']:.0f}; {r['reduction']} K* {r['K_star']}, heavy-ball "
            f"K* at the same a {r['heavy_ball_K_star']}"
        )
    print("\n(d) std-normalisation ablations: kappa_a / kappa_b")
    for r in res["std_norm"]:
        print(
            f"   {r['a']} / {r['b']}: {r['kappa_ratio']:.3g} [{_f(r['ratio_lo'], '.3g')}, "
            f"{_f(r['ratio_hi'], '.3g')}] predicted {r['predicted']} -> {r['consistent']}"
        )
