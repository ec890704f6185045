"""`pgrpo fit` loads only what a fit and its figure need (issue #14.4: start-up is most of a short
fit's answer): no scipy.stats, no pyplot, matplotlib's TeX glyph list left unloaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, sys
from pathlib import Path
import numpy as np
from pgrpo.dynamics.logfit import fit_log
from pgrpo.dynamics.plots import plot_log_fit
from pgrpo.logs import RewardLog
step = np.arange(1.0, 301.0)
reward = 0.8 - 0.6 * np.exp(-step / 60) + np.random.default_rng(0).normal(0, 0.05, 300)
fit = fit_log(RewardLog(step, reward, {}, {"lr": 1e-6, "beta1": 0.9}, (), "t", "mem", "reward"))
png = plot_log_fit(fit, Path(sys.argv[1]) / "fit.png")
agl = sys.modules.get("fontTools.agl")
print(json.dumps({
    "stats": "scipy.stats" in sys.modules,
    "pyplot": "matplotlib.pyplot" in sys.modules,
    "agl_loaded": agl is not None and type(agl).__name__ != "_LoadedOnFirstUse",
    "png": png.stat().st_size,
    "constrained": fit.constrained is not None,
}))
"""


def test_a_fit_and_its_figure_skip_scipy_stats_pyplot_and_the_glyph_list(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {**got, "stats": False, "pyplot": False, "agl_loaded": False}
    assert got["png"] > 10_000 and got["constrained"]  # a real figure; the chi2 test ran


def test_functions_named_like_their_module_stay_functions():
    """`pgrpo.dynamics.forecast` / `.predict` are the functions, loaded on first use, also
    after their submodules were imported (the package no longer imports them eagerly)."""
    probe = (
        "import pgrpo.dynamics as d, pgrpo.dynamics.forecast, pgrpo.dynamics.predict, sys\n"
        "from pgrpo.dynamics import forecast, predict\n"
        "print(callable(d.forecast) and d.forecast is forecast and callable(predict)"
        " and d.predict.__module__ == 'pgrpo.dynamics.predict')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr[-2000:]
