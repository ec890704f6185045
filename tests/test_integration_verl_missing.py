"""Without verl (the main environment), the verl adapter imports and says how to get verl."""

from __future__ import annotations

import importlib.util

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("verl") is not None, reason="verl is installed here"
)


def test_register_without_verl_names_the_fix():
    from pgrpo.integrations import verl as pv

    assert pv.REGISTERED is None  # importing never fails
    with pytest.raises(ImportError, match="docs/integrations.md"):
        pv.register()
