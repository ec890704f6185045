"""CLI options that come from a config dataclass carry its default and its field docstring."""

from __future__ import annotations

import dataclasses
import inspect

from pgrpo.cli.common import field_docs
from pgrpo.cli.probe import probe_cmd
from pgrpo.measure.config import ProbeConfig

PROBE_OPTIONS = {
    "pairs": "n_pairs",
    "direction_batches": "n_direction",
    "step_lrs": "step_lrs",
    "preconditioner": "preconditioner",
    "seed": "seed",
}


def test_probe_options_are_probe_config_fields():
    params = inspect.signature(probe_cmd).parameters
    defaults = {f.name: f.default for f in dataclasses.fields(ProbeConfig)}
    docs = field_docs(ProbeConfig)
    for option, field in PROBE_OPTIONS.items():
        info = params[option].default
        assert info.default == defaults[field], option
        assert info.help == docs[field] and docs[field], option


def test_field_docs_reads_the_docstring_under_each_field():
    @dataclasses.dataclass(frozen=True)
    class C:
        a: int = 1
        """The a.
        Two lines."""
        b: int = 2
        c: int = 3
        """The c."""

    assert field_docs(C) == {"a": "The a. Two lines.", "c": "The c."}


def test_probe_config_documents_every_field():
    assert set(field_docs(ProbeConfig)) == {f.name for f in dataclasses.fields(ProbeConfig)}
