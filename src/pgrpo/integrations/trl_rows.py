"""A subset of the rows of one TRL 1.16 generation batch: its prompts' images and the processor
outputs TRL calls `multimodal_fields`, as `GRPOTrainer._generate_single_turn` takes them.

`PgrpoGRPOTrainer` generates each group slot at its own temperature, so it calls TRL's
`_generate_single_turn` once per slot with that slot's rows. For conversational prompts TRL puts
every processor output besides `input_ids` / `attention_mask` into `multimodal_fields`, for text
prompts too (a tokenizer that returns `token_type_ids`, a VLM processor's `token_type_ids`), and
those fields must follow the rows. `select_rows` selects them the way TRL's own tool loop does
before it generates for a subset (`split_pixel_values_by_grid`, row selection,
`unsplit_pixel_values_by_grid`), and refuses a field whose rows it cannot tell apart instead of
guessing: a silent misalignment would pair a prompt with another prompt's image.
"""

from __future__ import annotations

from typing import Any

import torch
from trl.trainer.utils import split_pixel_values_by_grid, unsplit_pixel_values_by_grid

# TRL's own list of the image keys dropped when a subset holds no image (its tool loop).
IMAGE_KEYS = ("pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw")


def select_rows(
    prompt_ids: list[list[int]],
    images: list[Any] | None,
    multimodal_fields: dict[str, Any],
    rows: list[int],
) -> tuple[list[Any] | None, dict[str, Any]]:
    """(images, multimodal_fields) of `rows` (indices into the batch of `prompt_ids`, in order).

    A field is taken as per-row, and its entries selected, when one of these proves it:
    - a per-token list (token_type_ids, mm_token_type_ids): one list per prompt of that prompt's
      length;
    - TRL split it into one chunk per prompt by the prompts' image counts (pixel_values with
      image_grid_thw, image_position_ids or image_sizes, or one image per pixel_values row);
    - it has one entry per prompt and cannot be one entry per image: there are no images, every
      prompt holds exactly one, or the number of images differs from the number of prompts.
    Any other field raises ValueError saying what to do (drop `pgrpo_temperatures`).
    """
    n = len(prompt_ids)
    counts = None if images is None else [len(imgs) if imgs else 0 for imgs in images]
    fields = dict(multimodal_fields)
    if counts is not None and "num_images" not in fields:
        fields["num_images"] = counts
    split = split_pixel_values_by_grid(fields)
    # TRL splits by image count (one chunk per prompt) except for tiled models, whose chunks are
    # one per image (spatial_shapes: LFM2-VL, num_tiles: InternVL)
    split_per_prompt = counts is not None and not ({"spatial_shapes", "num_tiles"} & set(fields))
    unambiguous = counts is None or all(c == 1 for c in counts) or sum(counts) != n
    selected: dict[str, Any] = {}
    for key, value in split.items():
        per_token = isinstance(value, list) and _per_token(value, prompt_ids)
        was_split = split_per_prompt and isinstance(fields[key], torch.Tensor)
        was_split = was_split and isinstance(value, list)
        counted = key == "num_images"  # the image count of each prompt
        if not (counted or per_token or was_split or (_length(value) == n and unambiguous)):
            raise ValueError(
                f"pgrpo_temperatures generates each group slot separately, but cannot tell which "
                f"part of the processor output {key!r} ({_describe(value)}) belongs to which of "
                f"the {n} prompts (image counts: {counts}); drop pgrpo_temperatures for this "
                "model or processor, or report the processor's output layout"
            )
        if isinstance(value, torch.Tensor):
            selected[key] = value[torch.tensor(rows, dtype=torch.long, device=value.device)]
        else:
            selected[key] = [value[i] for i in rows]
    selected = unsplit_pixel_values_by_grid(selected)
    if "num_images" not in multimodal_fields:
        selected.pop("num_images", None)
    pixels = selected.get("pixel_values")
    if isinstance(pixels, torch.Tensor) and pixels.numel() == 0:  # no image in these rows
        for key in IMAGE_KEYS:
            selected.pop(key, None)
    subset = None if images is None else [images[i] for i in rows]
    return (subset if subset and any(subset) else None), selected


def _per_token(value: list[Any], prompt_ids: list[list[int]]) -> bool:
    return len(value) == len(prompt_ids) and all(
        isinstance(v, list) and len(v) == len(p) for v, p in zip(value, prompt_ids, strict=True)
    )


def _length(value: Any) -> int | None:
    if isinstance(value, torch.Tensor):
        return int(value.shape[0]) if value.ndim else None
    return len(value) if isinstance(value, list | tuple) else None


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor of shape {tuple(value.shape)}"
    if isinstance(value, list | tuple):
        return f"{type(value).__name__} of {len(value)}"
    return type(value).__name__
