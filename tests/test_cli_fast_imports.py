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


DRAW = """
import sys
from pathlib import Path
import numpy as np
from pgrpo.dynamics.logfit import fit_log
from pgrpo.logs import RewardLog
if sys.argv[2] == "quiet":
    from pgrpo.cli._mpl import import_quietly
    plots = import_quietly("pgrpo.dynamics.plots")
    from matplotlib.artist import Artist
    from matplotlib.lines import Line2D
    assert Artist._update_set_signature_and_docstring.__func__.__name__ != "mark_only"
    assert Line2D.set.__doc__ is None  # the skipped text
else:
    import pgrpo.dynamics.plots as plots
    from matplotlib.lines import Line2D
    assert "Supported properties" in Line2D.set.__doc__
line = Line2D([0, 1], [0, 1])
line.set(color="C1", lw=3, ls="--")  # set() works the same
assert line.get_linewidth() == 3 and line.get_linestyle() == "--"
step = np.arange(1.0, 301.0)
reward = 0.8 - 0.6 * np.exp(-step / 60) + np.random.default_rng(0).normal(0, 0.05, 300)
fit = fit_log(RewardLog(step, reward, {}, {"lr": 1e-6, "beta1": 0.9}, (), "t", "mem", "reward"))
plots.plot_log_fit(fit, Path(sys.argv[1]))
"""


def test_the_cli_figure_import_skips_set_docstrings_and_draws_the_same_bytes(tmp_path):
    """`pgrpo.cli._mpl.import_quietly` (what `pgrpo fit` / `predict` use) leaves `set()`
    without its generated docstring, restores matplotlib's method, and the PNG is byte for byte
    the one a plain import draws."""
    pngs = {}
    for how in ("plain", "quiet"):
        pngs[how] = tmp_path / f"{how}.png"
        out = subprocess.run(
            [sys.executable, "-c", DRAW, str(pngs[how]), how], capture_output=True, text=True,
            env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}, timeout=120,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-2000:]
    assert pngs["plain"].read_bytes() == pngs["quiet"].read_bytes()


LOADED = """
import json, sys
from pgrpo.cli import main
sys.argv = ["pgrpo", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print("\\nLOADED " + json.dumps(sorted(m for m in sys.modules if m.startswith("pgrpo.cli."))))
"""


def _cli_modules(*argv: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", LOADED, *argv], capture_output=True, text=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"},
        timeout=120,
    )  # fmt: skip
    line = [x for x in out.stdout.splitlines() if x.startswith("LOADED ")]
    assert line, out.stdout + out.stderr
    return json.loads(line[-1][len("LOADED ") :])


def test_a_named_command_loads_only_its_module_and_every_module_names_its_command(tmp_path):
    from pgrpo.cli import _command_names

    fit = _cli_modules("fit", str(ROOT / "tests" / "fixtures" / "logs" / "pgrpo_run"),
                       "--out", str(tmp_path), "--no-plot")  # fmt: skip
    assert [m for m in fit if m.rpartition(".")[2] in _command_names()] == ["pgrpo.cli.fit"]
    every = _cli_modules("--help")  # no command named: all of them, as before
    assert {f"pgrpo.cli.{n}" for n in _command_names()} <= set(every)
    from pgrpo.cli import _load_commands, app

    _load_commands()
    registered = {c.name for c in app.registered_commands}
    assert registered == set(_command_names())  # each module registers the command of its name


def test_the_executable_ends_without_teardown_but_keeps_output_and_exit_codes(tmp_path):
    """`python -m pgrpo.cli` (`pgrpo.cli.run`): the QUICK_EXIT commands end with `os._exit`
    after the atexit handlers and a flush: a piped --json answer arrives whole, bad input
    still exits 2 with its one line, and an atexit handler still runs."""
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"}
    run = ROOT / "tests" / "fixtures" / "logs" / "pgrpo_run"
    ok = subprocess.run(
        [sys.executable, "-m", "pgrpo.cli", "fit", str(run), "--out", str(tmp_path), "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert json.loads(ok.stdout)["png"] == str(tmp_path / "fit.png")
    bad = subprocess.run(
        [sys.executable, "-m", "pgrpo.cli", "diagnose", str(tmp_path / "missing")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and bad.stdout == ""
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('atexit ran', flush=True))\n"
        "sys.argv = ['pgrpo', 'diagnose', sys.argv[1], '--json']\n"
        "from pgrpo.cli import run\nrun()\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", probe, str(run)], capture_output=True, text=True, env=env,
        timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.rstrip().endswith("atexit ran")


DIAGNOSE_PROBE = """
import json, sys
import numpy as np
import pgrpo.diagnose.floorstats as floorstats
from pgrpo.diagnose import diagnose
from pgrpo.diagnose.checks import CheckOptions, run_checks
from pgrpo.logs import RewardLog
calls = []
stay = floorstats.hypergeom_none
floorstats.hypergeom_none = lambda *a: calls.append(a) or stay(*a)  # the 0/1-floor branch ran
rng = np.random.default_rng(1)
step = np.arange(1.0, 301.0)
gb = {"lr": 1e-6, "group_size": 8, "batch_prompts": 8}
runs = {
    # learning from a continuous reward, with entropy and KL (a fifth of the gain still to come
    # at the end: at tau 80 the second half creeps on at ~13% of the gain, a plateau)
    "learning": (np.clip(0.8 - 0.6 * np.exp(-step / 200) + rng.normal(0, 0.08, 300), 0, 1),
                 {"reward_std": np.full(300, 0.3), "entropy": 1 - step / 800, "kl": step / 4000}),
    # means of 64 0/1 rewards that rise and plateau: the run checks' confirmed plateau
    "plateau": (rng.binomial(64, np.minimum(0.6, 0.1 + step / 120)) / 64, {}),
    # ... that collapse to 0: the stay-at-the-floor probability (hypergeometric)
    "collapse": (rng.binomial(64, np.where(step < 200, 0.5, 0.0)) / 64,
                 {"frac_reward_zero_std": np.where(step < 200, 0.01, 1.0)}),
}
out = {}
for name, (reward, cols) in runs.items():
    log = RewardLog(step, reward, cols, gb, (), "t", "mem", "reward")
    checks = {c.name: c for c in run_checks(log, CheckOptions())}
    out[name] = [diagnose(log).progress.label, checks["wasted_compute"].evidence["plateau_step"]]
print(json.dumps({"stats": "scipy.stats" in sys.modules, "signal": "scipy.signal" in sys.modules,
                  "runs": out, "stay_calls": len(calls)}))
"""


def test_a_diagnosis_and_its_checks_skip_scipy_stats_and_scipy_signal():
    """`pgrpo diagnose` answers a 200,000-step log in <= 3 s (bench/cli_speed.py); importing
    scipy.stats and scipy.signal was ~0.35-0.45 s of that, for a normal quantile, a rank and an
    AR(1) filter that scipy.special and numpy give (`nullmodel.ar1_filter`,
    `curvestats.average_ranks`, `floorstats.hypergeom_none`; tests/test_diagnose_nofilter.py)."""
    out = subprocess.run(
        [sys.executable, "-c", DIAGNOSE_PROBE], capture_output=True, text=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["stats"] is False and got["signal"] is False
    runs = got["runs"]
    assert runs["learning"][0] == "learning"
    assert runs["plateau"][0] in ("plateau", "saturated") and runs["plateau"][1] > 0
    assert runs["collapse"][0] == "collapsed" and got["stay_calls"] > 0
