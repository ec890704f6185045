"""The text tables `python bench/lm_dynamics.py` prints from its analysis (the dict
`lm_dynamics.analyse` returns; bench/results/lm_dynamics.json's "analysis"): the fits, transfer,
G-invariance, the refresh interval and the probes."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling bench modules
from corpus_dynamics_show import _f  # noqa: E402


def show(res: dict) -> None:
    """The tables of docs/dynamics_lm.md, as text."""
    print(f"{'run':<34} {'kappa':>8} {'90% interval':>20} R0   Rinf R2fix R2free unstable")
    for n, f in res["fits"].items():
        iv = f"[{_f(f['kappa_lo'], '.3g')}, {_f(f['kappa_hi'], '.3g')}]"
        print(
            f"{n:<34} {f['kappa']:>8.3g} {iv:>20} {f['R_0']:.2f} {f['R_inf']:.2f} "
            f"{f['r2_constrained']:.3f} {f['r2_free']:.3f} "
            f"{res['observed_instability'][n]['unstable']}"
        )
    for opt, rows in res["transfer"].items():
        print(f"\ntransfer from the {opt} source: target, differs in, R2 pred / tau only / own fit")
        for r in rows:
            print(
                f"   {r['target']:<34} {r['differs_in']:>4} {r['r2_prediction']:8.3f} "
                f"{r['r2_timescale_only']:7.3f} {r['r2_own_fit']:7.3f}"
            )
        o = res["lr_order"][opt]
        print(
            f"   a = lr kappa {[f'{x:.3g}' for x in o['a']]} at lr {o['lr']}: exponent "
            f"{o['exponent']:.2f} (model 1)\n   {res['transfer_summary'][opt]}"
        )
    for opt, g in res["g_invariance"].items():
        if g:
            j, gm = g["joint"], g["gamma"]
            print(
                f"\nG-invariance {opt}: LR {j['lr_stat']:.2f} ({j['lr_df']} df), "
                f"p {j['lr_p']:.3g}; "
                f"gamma {gm['gamma_best']:.2f} {gm['gamma_90']}"
            )
            for n, v in g["late_variance"].items():
                print(
                    f"   {n:<34} G={v['G']} late var {v['reward_var']:.4f} (x G "
                    f"{v['reward_var'] * v['G']:.4f}), sampling {v['sampling_var']:.4f}"
                )
    for opt, r in [*res["refresh"].items(), *res.get("refresh_whole_batch", {}).items()]:
        print(
            f"\nrefresh {opt} from {r['source']}: K* {r['K_star']} (90% {r['K_star_90']}; a "
            f"{r['effective_a']:.3g}); {r['onset']}; "
            f"within one grid step: {r['within_one_grid_step']}"
        )
    for name, d in res.get("probe", {}).items():
        print(
            f"\n{name}: kappa {d['kappa_probe']:.3g} +- {d['stderr_probe']:.2g} (90% "
            f"[{d['probe_90'][0]:.3g}, {d['probe_90'][1]:.3g}]) vs fit {d['kappa_fit']:.3g} "
            f"[{d['fit_90'][0]:.3g}, {d['fit_90'][1]:.3g}]: {d['verdict']}; "
            f"K* {d.get('K_star_probe')}; {d['wall_s']:.0f} s wall, {d['cpu_s']:.0f} s CPU"
        )
        t = d.get("transfer")
        for r in t["rows"] if t else []:
            print(
                f"   {r['target']:<34} {r['differs_in']:>4} R2 probe {r['r2_prediction_probe']:.3g}"
                f" (tau {r['r2_timescale_only_probe']:.3g}), fit {r['r2_prediction_fit']:.3g}, "
                f"own {r['r2_own_fit']:.3g}"
            )
