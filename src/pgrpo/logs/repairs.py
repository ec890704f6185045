"""Repairs `pgrpo.logs.base.assemble` makes to a log's columns beyond its rows: eval values
logged on rows of their own (`eval_rows`), and run settings read from columns checked as the
command-line options are (`check_settings`); and the canonical name of a key (`canon`)."""

from __future__ import annotations

import numpy as np

from pgrpo.logs.columns import NUMBER, ColumnStore


def canon(key: str) -> str:
    """A key's canonical name: "train/" stripped (W&B's prefix for the trainer's metrics)."""
    return key[len("train/") :] if key.startswith("train/") else key


SETTING_COLUMNS = {
    "learning_rate": ("a number >= 0", lambda v: v >= 0, "--lr"),
    "refresh_interval": ("a whole number >= 1", lambda v: (v >= 1) & (v == np.round(v)),
                         "--refresh-interval"),
    "group_size": ("a whole number >= 1", lambda v: (v >= 1) & (v == np.round(v)),
                   "--group-size"),
    "batch_prompts": ("a whole number >= 1", lambda v: (v >= 1) & (v == np.round(v)),
                      "--batch-prompts"),
    "beta1": ("in [0, 1)", lambda v: (v >= 0) & (v < 1), "--beta1"),
}  # fmt: skip
"""Columns the dynamics fit reads as run settings: what a value must be, and the option that
gives it instead. A value that is not (inf, a negative lr, K = 2.5 or 0) is read as not logged
with a warning: they were taken as the run's settings unchecked, shown as read and used as
something else (K 2.5 as 2, 0 as 1; review, 2026-12-05). G = 1 is a run's setting (pgrpo's
`advantage=sign` or a critic's PPO take one completion per prompt): it is read, and the
degeneracy mode says it does not apply there (`rules.advantage_degeneracy`)."""
CONFIG_SETTINGS = {"lr": "learning_rate", "refresh_interval": "refresh_interval",
                   "group_size": "group_size", "batch_prompts": "batch_prompts",
                   "beta1": "beta1"}  # fmt: skip
"""A run config's setting (`runconfig.hyperparameters_from_config`'s names) -> its SETTING_COLUMNS
entry: a config's value is checked as a column's is (`check_config`)."""


def check_config(hyper: dict[str, float], warns: list[str]) -> None:
    """Drop from `hyper` (a run config's settings, read by `assemble`) the values that are not
    what SETTING_COLUMNS says the setting must be, and say so (session 37: a config's lr 0,
    beta1 1.2 or K 2.5 were taken as the run's). A config lr must be above 0: at 0 the run
    does not learn, and no lr is read (`--lr` takes the lr of a run that used one)."""
    for name, column in CONFIG_SETTINGS.items():
        value = hyper.get(name)
        if value is None:
            continue
        must, ok, option = SETTING_COLUMNS[column]
        if name == "lr":
            must, ok = "a number > 0", (lambda v: v > 0)
        with np.errstate(invalid="ignore"):
            good = bool(np.isfinite(value) and ok(np.asarray(float(value))))
        if not good and name == "lr" and value == 0:
            warns.append("the run's config gives lr 0: no lr is read (a run at lr 0 does not "
                         "learn; give --lr if it used another)")  # fmt: skip
        elif not good:
            warns.append(f"the run's config gives {name} {value:g}, not {must}: read as not "
                         f"given; give {option} for the run's value")  # fmt: skip
        if not good:
            del hyper[name]


def check_settings(cols: dict[str, np.ndarray], warns: list[str]) -> None:
    """Blank (NaN) the values of SETTING_COLUMNS that are not what the setting must be, and say
    so; an lr column that is 0 at every step is no lr either (the closed form needs one)."""
    for name, (must, ok, option) in SETTING_COLUMNS.items():
        col = cols.get(name)
        if col is None:
            continue
        logged = ~np.isnan(col)
        with np.errstate(invalid="ignore"):
            bad = logged & ~(np.isfinite(col) & ok(col))
        if bad.any():
            first = col[np.flatnonzero(bad)[0]]
            warns.append(f"{int(bad.sum())} {name} value(s) are not {must} (e.g. {first:g}): "
                         f"read as not logged; give {option} for the run's value")  # fmt: skip
            cols[name] = col = np.where(bad, np.nan, col)
        left = np.isfinite(col)
        if name == "learning_rate" and left.any() and not np.max(col[left]) > 0:
            warns.append("the learning_rate column is 0 at every step: no lr is read from it; "
                         "give --lr for the run's peak lr")  # fmt: skip
            cols[name] = np.full_like(col, np.nan)


def eval_keys(store: ColumnStore) -> list[str]:
    """The store's eval keys (`eval/...`, `eval_...`, after `canon`)."""
    return [key for key in store.keys if canon(key).startswith("eval")]


def eval_values(store: ColumnStore) -> np.ndarray:
    """[n] rows holding a number under an eval key: eval rows, where they hold no reward."""
    out = np.zeros(store.n, dtype=bool)
    for key in eval_keys(store):
        out |= store.column(key)[1] == NUMBER
    return out


def eval_rows(store: ColumnStore, lone, step_all, step, cols, columns, warns) -> None:
    """Eval values logged on rows of their own (a W&B export of an HF/TRL run: eval/* on rows
    without a reward), put on the kept row of the training step logged with or just before
    each (the first row for an eval before training), where that row has none. Without this
    they were dropped with their rows, and diagnose asked for the eval accuracy the log held
    (review, 2026-12-05). lone: [rows] rows with no reward and a step; step: the kept steps."""
    moved = 0
    for key in eval_keys(store):
        name = canon(key)
        if columns is not None and name not in columns:
            continue
        vals = store.column(key)[0]
        extra = lone & np.isfinite(vals)
        if not extra.any():
            continue
        col = cols[name].copy() if name in cols else np.full(step.size, np.nan)
        at = np.maximum(np.searchsorted(step, step_all[extra], side="right") - 1, 0)
        for i, v in zip(at, vals[extra], strict=True):
            if not np.isfinite(col[i]):
                col[i], moved = v, moved + 1
        cols[name] = col
    if moved:
        warns.append(f"{moved} eval value(s) on rows without a reward: read at the training "
                     "step logged with or just before each")  # fmt: skip
