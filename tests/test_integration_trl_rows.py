"""pgrpo.integrations.trl_rows.select_rows: the images and processor outputs of one group slot's
rows, for the processor layouts TRL 1.16 knows, built here from per-prompt pieces so the expected
subset is the concatenation of the chosen prompts' pieces."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("trl")

from pgrpo.integrations.trl_rows import select_rows  # noqa: E402

# 2 prompts x G = 2, as TRL's sampler lays them out: rows 0-1 prompt A, rows 2-3 prompt B
PROMPT_IDS = [[5, 6], [5, 6], [7, 8, 9], [7, 8, 9]]
SLOTS = ([0, 2], [1, 3])


def _images(counts):
    return [[f"img{r}.{k}" for k in range(c)] or None for r, c in enumerate(counts)]


def _qwen_batch(counts):
    """pixel_values [patches, 3] (value = row), image_grid_thw [images, 3]: one image of row r
    has 1 x 1 x (r + 1) patches."""
    grids = [
        torch.tensor([[1, 1, r + 1]] * c, dtype=torch.long).view(c, 3) for r, c in enumerate(counts)
    ]
    pixels = [torch.full((c * (r + 1), 3), float(r)) for r, c in enumerate(counts)]
    return pixels, grids


@pytest.mark.parametrize("counts", [[1, 1, 2, 2], [2, 2, 0, 0]])
def test_qwen_layout_follows_the_rows(counts):
    pixels, grids = _qwen_batch(counts)
    fields = {"pixel_values": torch.cat(pixels), "image_grid_thw": torch.cat(grids)}
    for rows in SLOTS:
        images, got = select_rows(PROMPT_IDS, _images(counts), fields, rows)
        if not any(counts[r] for r in rows):
            assert got == {} and images is None  # TRL drops image keys of an image-free subset
            continue
        torch.testing.assert_close(got["pixel_values"], torch.cat([pixels[r] for r in rows]))
        torch.testing.assert_close(got["image_grid_thw"], torch.cat([grids[r] for r in rows]))
        assert images == [_images(counts)[r] for r in rows]
        assert "num_images" not in got  # a helper key, not a processor output


def test_all_rows_in_order_give_the_batch_back():
    counts = [1, 1, 2, 2]
    pixels, grids = _qwen_batch(counts)
    fields = {"pixel_values": torch.cat(pixels), "image_grid_thw": torch.cat(grids)}
    _, got = select_rows(PROMPT_IDS, _images(counts), fields, [0, 1, 2, 3])
    assert set(got) == set(fields)
    for key, value in fields.items():
        torch.testing.assert_close(got[key], value)


def test_flat_layout_with_image_sizes():
    """LLaVA-Next: pixel_values [images, patches, C, H, W], image_sizes [images, 2]."""
    counts = [1, 1, 2, 2]
    pixels = [torch.full((c, 2, 3, 2, 2), float(r)) for r, c in enumerate(counts)]
    sizes = [torch.full((c, 2), r) for r, c in enumerate(counts)]
    fields = {"pixel_values": torch.cat(pixels), "image_sizes": torch.cat(sizes)}
    _, got = select_rows(PROMPT_IDS, _images(counts), fields, [1, 3])
    torch.testing.assert_close(got["pixel_values"], torch.cat([pixels[1], pixels[3]]))
    torch.testing.assert_close(got["image_sizes"], torch.cat([sizes[1], sizes[3]]))


def test_per_prompt_padded_layout():
    """Idefics / SmolVLM: pixel_values and pixel_attention_mask already one row per prompt."""
    counts = [1, 1, 2, 2]
    pixels = torch.arange(4.0).view(4, 1, 1).expand(4, 2, 3).contiguous()
    mask = torch.arange(4).view(4, 1).expand(4, 5).contiguous()
    fields = {"pixel_values": pixels, "pixel_attention_mask": mask}
    _, got = select_rows(PROMPT_IDS, _images(counts), fields, [0, 2])
    torch.testing.assert_close(got["pixel_values"], pixels[[0, 2]])
    torch.testing.assert_close(got["pixel_attention_mask"], mask[[0, 2]])


def test_tiled_layout_with_one_image_per_prompt():
    """InternVL: pixel_values [tiles, ...] and num_tiles per image; with one image per prompt an
    image is a prompt."""
    tiles = [1, 1, 3, 3]
    pixels = [torch.full((t, 2), float(r)) for r, t in enumerate(tiles)]
    fields = {"pixel_values": torch.cat(pixels), "num_tiles": tiles}
    _, got = select_rows(PROMPT_IDS, _images([1, 1, 1, 1]), fields, [1, 2])
    torch.testing.assert_close(got["pixel_values"], torch.cat([pixels[1], pixels[2]]))
    assert got["num_tiles"] == [1, 3]


def test_per_token_fields_of_text_prompts():
    fields = {"token_type_ids": [[r] * len(p) for r, p in enumerate(PROMPT_IDS)]}
    images, got = select_rows(PROMPT_IDS, None, fields, [1, 3])
    assert images is None and got == {"token_type_ids": [[1, 1], [3, 3, 3]]}
    assert select_rows(PROMPT_IDS, None, {}, [0, 2]) == (None, {})


@pytest.mark.parametrize(
    ("counts", "fields"),
    [
        # as many images as prompts but not one each: one entry per image or per prompt?
        ([2, 2, 0, 0], {"extra": torch.zeros(4, 3)}),
        ([1, 1, 1, 1], {"pixel_values_videos": torch.zeros(7, 3)}),  # neither
        (None, {"extra": torch.zeros(3)}),
        (None, {"extra": 3}),
    ],
)
def test_a_field_of_unknown_rows_is_refused_naming_the_option(counts, fields):
    images = None if counts is None else _images(counts)
    with pytest.raises(ValueError, match="pgrpo_temperatures.*'(extra|pixel_values_videos)'"):
        select_rows(PROMPT_IDS, images, fields, [0, 2])
