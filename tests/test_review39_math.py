"""Review 39 (2026-12-06): defects a hostile review found in the GRPO math and reward handling.
Each test of a defect failed on the code before its fix (docs/core.md); one guards what had to
stay and passes on both: `test_ids_of_one_kind_keep_their_dense_ids`.

3. Group ids are told apart by exact equality (1 and '1' were merged; tuple ids crashed).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pgrpo import compute_advantages
from pgrpo.core.degeneracy import group_stats
from pgrpo.core.groups import _dense_ids, make_groups

SETTINGS = settings(max_examples=80, deadline=None)


# ---------------------------------------------------------------------------------------------
# 3. Group ids by exact equality
# ---------------------------------------------------------------------------------------------


def _old_dense_ids(group_ids):
    """`_dense_ids` before the fix, verbatim: the oracle where it was right."""
    if isinstance(group_ids, torch.Tensor):
        group_ids = group_ids.detach().cpu().reshape(-1).numpy()
    arr = np.asarray(group_ids)
    if arr.ndim != 1:
        arr = np.array(list(group_ids), dtype=object)
    if arr.size and np.issubdtype(arr.dtype, np.integer):
        lo, hi = int(arr.min()), int(arr.max())
        if hi - lo <= 4 * arr.size + 1024:
            shifted = arr - lo if lo else arr
            counts = np.bincount(shifted, minlength=hi - lo + 1)
            present = counts > 0
            if present.all():
                return shifted.astype(np.int64, copy=False), counts.astype(np.int64)
            index = np.cumsum(present, dtype=np.int64)[shifted] - 1
            return index, counts[present].astype(np.int64)
    if arr.dtype == object:
        arr = arr.astype(str)
    _, inverse, counts = np.unique(arr, return_inverse=True, return_counts=True)
    return inverse.reshape(-1).astype(np.int64), counts.astype(np.int64)


ONE_KIND = st.one_of(
    st.lists(st.integers(-5, 5), min_size=1, max_size=40),
    st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=40),  # sparse: np.unique path
    st.lists(st.sampled_from([-1.5, 0.0, 0.25, 3.0, 1e9]), min_size=1, max_size=40),
    st.lists(
        st.text(st.characters(exclude_characters="\x00"), max_size=3), min_size=1, max_size=40
    ),  # a trailing NUL: numpy dropped it (the old code merged 'a', 'a\0')
)


@SETTINGS
@given(ONE_KIND, st.sampled_from(["list", "numpy", "torch", "object"]))
def test_ids_of_one_kind_keep_their_dense_ids(ids, container):
    """Numbers or strings, as lists, arrays, tensors or object arrays: the old numbers."""
    if container == "torch":
        assume(not isinstance(ids[0], str))
        given_ids = torch.tensor(ids)
    elif container == "numpy":
        given_ids = np.asarray(ids)
    elif container == "object":
        assume(isinstance(ids[0], str))  # object arrays of numbers: see the next test
        given_ids = np.array(ids, dtype=object)
    else:
        given_ids = ids
    new, old = _dense_ids(given_ids), _old_dense_ids(given_ids)
    assert np.array_equal(new[0], old[0]) and np.array_equal(new[1], old[1])


MIXED = st.lists(
    st.one_of(
        st.integers(-3, 3),
        st.sampled_from(["1", "-1", "a", "0", "2"]),
        st.tuples(st.integers(0, 2), st.sampled_from(["x", "1"])),
        st.none(),
    ),
    min_size=1,
    max_size=40,
)


@SETTINGS
@given(MIXED)
def test_mixed_and_tuple_ids_are_grouped_by_exact_equality(ids):
    """[1, 1, '1', '1'] was one group (ids went through str); tuple ids crashed."""
    index, sizes = _dense_ids(ids)
    assert index.shape == (len(ids),) and sizes.sum() == len(ids)
    for i in range(len(ids)):
        for j in range(len(ids)):
            assert (index[i] == index[j]) == (ids[i] == ids[j])
    if all(type(x) is int for x in ids):
        return  # numbers: numeric order (the test above)
    # numbered by the ids' text, ties between distinct ids of one text by first appearance
    first = {}
    for k, x in enumerate(ids):
        first.setdefault(index[k], (str(x), k))
    assert [first[k] for k in range(len(sizes))] == sorted(first.values())
    texts = {str(x) for x in ids}
    distinct = len({(type(x), x) for x in ids})
    if len(texts) == distinct and not any(isinstance(x, tuple) for x in ids):
        assert np.array_equal(index, _old_dense_ids(ids)[0])  # where the old code was right


def test_the_reviews_ids_give_the_right_groups():
    r = np.array([1.0, 0.0, 1.0, 0.0])
    mixed = compute_advantages("grpo", r, group_ids=[1, 1, "1", "1"]).advantages
    pairs = compute_advantages("grpo", r, group_size=2).advantages
    np.testing.assert_array_equal(mixed, pairs)
    tuples = compute_advantages("grpo", r, group_ids=[(0, 1), (0, 1), (1, 0), (1, 0)])
    np.testing.assert_array_equal(tuples.advantages, pairs)
    rows = np.array([[0, 1], [0, 1], [1, 0], [1, 0]])  # one row per rollout
    np.testing.assert_array_equal(compute_advantages("grpo", r, group_ids=rows).advantages, pairs)
    stats = group_stats(r, group_ids=[(7, "a"), (7, "a"), (7, "b"), (7, "b")])
    assert stats.metrics["num_groups"] == 2.0
    assert _dense_ids(["a", "a\x00", "a"])[0].tolist() == [0, 1, 0]  # numpy merged them
    with pytest.raises(TypeError, match="group_ids must be hashable"):
        make_groups(2, group_ids=[[0], [0]])


def test_an_object_array_of_ints_is_numbered_like_an_int_array():
    """Deliberate change: the old code numbered it in the text order of the ids ('10' before
    '9'), against the documented sorted id order; ints as a list, array or tensor never were."""
    ids = np.array([10, 9, 10, 9], dtype=object)
    assert _dense_ids(ids)[0].tolist() == _dense_ids([10, 9, 10, 9])[0].tolist() == [1, 0, 1, 0]
