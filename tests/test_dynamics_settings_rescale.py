"""A given --lr rescales a logged lr schedule to its peak; the note says "rescaled" exactly when
that happens (final review of rev41: the note followed the config's lr, the rescale the column's
peak)."""

from __future__ import annotations

import numpy as np

from pgrpo.dynamics.settings import resolve_settings
from pgrpo.logs import RewardLog


def _log(config_lr: float, column_peak: float) -> RewardLog:
    """A warm-up schedule up to column_peak, with the run's config lr beside it."""
    step = np.arange(1.0, 41.0)
    lr = column_peak * np.minimum(step / 10.0, 1.0)
    reward = 0.2 + 0.6 * (1.0 - np.exp(-step / 10.0))
    return RewardLog(step, reward, {"learning_rate": lr}, {"lr": config_lr}, (), "csv", "hand",
                     "reward")  # fmt: skip


def _rescale_notes(notes) -> list[str]:
    return [n for n in notes if "rescaled" in n]


def test_a_rescale_behind_a_config_lr_equal_to_the_given_one_is_said():
    """Before: config lr 1e-6 = --lr, logged peak 9e-7 (a warm-up that never logs the exact peak):
    the schedule was rescaled with no note."""
    log, settings = resolve_settings(_log(1e-6, 9e-7), {"lr": 1e-6})
    assert np.nanmax(log.columns["learning_rate"]) == 1e-6
    assert not any("replaces" in n for n in settings.notes), settings.notes
    (note,) = _rescale_notes(settings.notes)
    assert "(peak 9e-07) rescaled to the given peak 1e-06" in note


def test_no_rescale_is_claimed_where_the_column_already_peaks_at_the_given_lr():
    """Before: config lr 2e-6 != --lr 1e-6 = the logged peak: the note said the schedule was
    rescaled; it was not."""
    log, settings = resolve_settings(_log(2e-6, 1e-6), {"lr": 1e-6})
    assert np.nanmax(log.columns["learning_rate"]) == 1e-6
    assert "lr 1e-06 (command line) replaces the log's 2e-06 (log config)" in settings.notes
    assert not _rescale_notes(settings.notes), settings.notes


def test_both_notes_when_both_differ():
    log, settings = resolve_settings(_log(2e-6, 2e-6), {"lr": 1e-6})
    assert np.nanmax(log.columns["learning_rate"]) == 1e-6
    assert any("replaces the log's 2e-06" in n for n in settings.notes), settings.notes
    assert len(_rescale_notes(settings.notes)) == 1
