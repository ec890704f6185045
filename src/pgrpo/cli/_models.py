"""Model names given on the command line: a local folder, a run folder, 'tiny', 'smollm2' or a
hub id, checked before anything loads (kept out of cli/common.py, which stays under 500 lines)."""

from __future__ import annotations

from pathlib import Path

import typer

from pgrpo.errors import UserError


def _looks_like_path(name: str) -> bool:
    """A filesystem path rather than a hub id (`org/name` has exactly one slash)."""
    return name.startswith(("/", ".", "~")) or name.count("/") > 1 or "\\" in name


def check_model(name: str, option: str = "--model") -> None:
    """Fail early on a model path that does not exist, is a file, or is a folder that is neither
    a Hugging Face model (config.json) nor a pgrpo run (config.yaml); a hub-style `org/name` is
    left to the loader, which reads the local cache only when offline."""
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir():
            raise UserError(
                f"{option} {name} is a file", "give a model folder (config.json + weights)"
            )
        if not any((path / f).is_file() for f in ("config.json", "config.yaml")):
            raise UserError(
                f"{option} {name} holds no config.json (a Hugging Face model folder) and no "
                "config.yaml (a pgrpo run folder)",
                "give the folder `save_pretrained` or `pgrpo train` wrote, 'tiny' or 'smollm2'",
            )
        return
    if _looks_like_path(name):
        raise UserError(
            f"{option} {name}: no such model folder",
            "give 'tiny', 'smollm2', a local Hugging Face model folder or a run folder",
        )
    if name not in ("tiny", "smollm2") and not _in_hub_cache(name):  # say what the wait is
        typer.echo(
            f"note: {option} {name} is not in the local Hugging Face cache: asking the hub for "
            "it (offline this takes about a minute of retries before failing; set "
            "HF_HUB_OFFLINE=1 to fail at once)",
            err=True,
        )


def _in_hub_cache(name: str) -> bool:
    """Whether hub model `name` has a config.json in the local Hugging Face cache."""
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # noqa: BLE001 - an invalid repo id or no huggingface_hub: not cached
        return False
