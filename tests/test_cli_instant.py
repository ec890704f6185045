"""The log-analysis commands never import torch or transformers (issue #14.4), `import pgrpo` is
lazy but keeps its public API, and long logs are fitted on bin means."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "logs"

# Runs the CLI in a fresh interpreter, then reports which heavy modules got imported.
PROBE = """
import json, sys
from pgrpo.cli import main
sys.argv = ["pgrpo", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
heavy = sorted(m for m in ("torch", "transformers", "peft", "trl") if m in sys.modules)
print("\\nPROBE " + json.dumps({"code": code, "heavy": heavy}))
"""


def _run(argv: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argv)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"},
    )
    line = [x for x in out.stdout.splitlines() if x.startswith("PROBE ")]
    assert line, out.stdout + out.stderr
    return json.loads(line[-1][len("PROBE ") :])


@pytest.mark.parametrize(
    "argv",
    [
        ["--version"],
        ["fit", str(FIX / "pgrpo_run"), "--out", "{tmp}", "--json"],
        ["fit", str(FIX / "pgrpo_run"), "--forecast-from", "0.5", "--out", "{tmp}"],
        ["predict", "--lr", "1e-6", "--kappa", "2e4", "--out", "{tmp}", "--json"],
        ["diagnose", str(FIX / "pgrpo_run"), "--json"],
        ["diagnose", str(FIX / "trl_output")],
        ["report", str(FIX / "pgrpo_run"), "--out", "{tmp}", "--json"],
        ["diagnose", str(FIX / "missing")],  # the error path too
    ],
    ids=lambda a: "-".join(x for x in a[:2] if not x.startswith("/")),
)
def test_analysis_commands_do_not_import_torch(argv, tmp_path):
    res = _run([a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert res["heavy"] == [], res
    assert res["code"] in (0, None) or argv[-1].endswith("missing") and res["code"] == 2


def test_import_pgrpo_is_lazy_and_keeps_the_api():
    code = (
        "import sys, pgrpo, pgrpo.dynamics, pgrpo.logs, pgrpo.diagnose, pgrpo.cli; "
        "lazy = not {'torch', 'transformers'} & set(sys.modules); "
        "import torch; r = pgrpo.compute_advantages('grpo', torch.tensor([1., 0., 1., 1.]), "
        "group_size=4); "
        "print(lazy, sorted(set(pgrpo.__all__) - set(dir(pgrpo))), r.advantages.shape[0], "
        "pgrpo.get_task('arithmetic').name, 'rom' in pgrpo.dynamics.FIT_MODELS)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert out.stdout.split() == ["True", "[]", "4", "arithmetic", "True"], out.stderr


def test_python_dash_m_runs_the_cli():
    out = subprocess.run(
        [sys.executable, "-m", "pgrpo.cli", "--version"], capture_output=True, text=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0 and out.stdout.startswith("pgrpo ")


def test_long_logs_are_fitted_on_bin_means():
    """Binning keeps the fit's answer: 40,000 noisy steps of a known exponential give the same
    R_inf and tau (within their standard errors) as the raw fit, and the bins are announced."""
    from pgrpo.dynamics.fit import fit_curve
    from pgrpo.dynamics.logfit import fit_log, thin_curve
    from pgrpo.logs import RewardLog

    rng = np.random.default_rng(0)
    step = np.arange(1.0, 40_001.0)
    reward = 0.8 - 0.6 * np.exp(-step / 6000.0) + rng.normal(0, 0.1, step.size)
    s, r, b = thin_curve(step, reward)
    assert b == 10 and s.size == 4000 and np.isclose(r.mean(), reward.mean())
    log = RewardLog(step, reward, {}, {}, (), "t", "mem", "reward")
    fit = fit_log(log)
    raw = fit_curve(step, reward, "exponential")
    binned = fit.baselines["exponential"]
    for name in ("R_inf", "tau"):
        se = raw.params[name].stderr
        assert abs(binned.values[name] - raw.values[name]) < 2 * se, name
        assert binned.params[name].stderr == pytest.approx(se, rel=0.2), name
    doc = fit.to_dict()
    assert doc["n"] == 4000 and doc["n_logged"] == 40_000 and doc["bin_size"] == 10
    assert any("means of 10 consecutive steps" in w for w in doc["warnings"])


def test_smooth_equals_the_convolution():
    """diagnose's O(n) moving average is the O(n w) convolution it replaced."""
    from pgrpo.diagnose.signals import smooth

    rng = np.random.default_rng(1)
    for n in (1, 2, 7, 64, 1001):
        for w in (1, 2, 3, 8, 51, 10**6):
            x = rng.random(n)
            x[rng.random(n) < 0.2] = np.nan
            vals = x[np.isfinite(x)]
            if not vals.size:
                continue
            k = np.ones(max(1, min(w, vals.size)))
            ref = np.convolve(vals, k, "same") / np.convolve(np.ones_like(vals), k, "same")
            np.testing.assert_allclose(smooth(x, w), ref, rtol=1e-10, atol=1e-12)


# The default forecast (its statsmodels smoothing members) with pyarrow kept out, as the
# log-analysis commands run it, and with pyarrow loaded by pandas, as a library user has it.
ARROW_PROBE = """
import json, sys
from pgrpo.cli import _keep_pyarrow_out
if sys.argv[1] == "out":
    _keep_pyarrow_out()
import numpy as np
from pgrpo.dynamics.consensus import damped_trend, recent_level
from pgrpo.dynamics.forecast import forecast
rng = np.random.default_rng(0)
step = np.arange(1.0, 241.0)
reward = 0.7 - 0.5 * np.exp(-step / 60.0) + 0.03 * rng.standard_normal(step.size)
trend, _ = damped_trend(step[:120], reward[:120], step[120:])
level = recent_level(step[:120], reward[:120], step[120:])
fc = forecast(step, reward, 0.5)
values = [*trend, *level, *fc.predicted, fc.predicted_mean, *fc.mean_band]
loaded = {m: sys.modules.get(m) is not None for m in ("pyarrow", "pandas")}
print(json.dumps({**loaded, "values": [float(v).hex() for v in values]}))
"""


def test_the_forecast_is_the_same_with_pyarrow_kept_out():
    """`pgrpo report` and `fit --forecast-from` keep pyarrow out of the process
    (`cli._keep_pyarrow_out`: 30 MB of the report's peak RSS); the forecast is bit for bit the
    one made with pyarrow loaded."""
    pytest.importorskip("pyarrow")
    got = {}
    for how in ("out", "in"):
        out = subprocess.run(
            [sys.executable, "-c", ARROW_PROBE, how], capture_output=True, text=True,
            timeout=300, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-2000:]
        got[how] = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["out"]["pandas"] and not got["out"]["pyarrow"] and got["in"]["pyarrow"]
    assert got["out"]["values"] == got["in"]["values"] and len(got["out"]["values"]) > 200


@pytest.mark.parametrize(
    ("command", "kept_out"), [("report", True), ("fit", True), ("train", False)]
)
def test_the_log_analysis_commands_run_with_pyarrow_kept_out(command, kept_out):
    """`cli.run` keeps pyarrow out for the commands it ends with the process (QUICK_EXIT)."""
    code = (
        "import sys\nfrom pgrpo import cli\n"
        "cli.main = lambda: print('pyarrow kept out:', 'pyarrow' in sys.modules)\n"
        f"sys.argv = ['pgrpo', {command!r}]\ncli.run()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert out.returncode == 0 and f"pyarrow kept out: {kept_out}" in out.stdout, out.stderr
