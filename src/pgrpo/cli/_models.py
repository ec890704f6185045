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
    if name in ("tiny", "smollm2") or _in_hub_cache(name):
        return
    import os

    offline = [v for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
               if os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")]  # fmt: skip
    if offline:
        raise UserError(
            f"{option} {name} is not in the local Hugging Face cache and {offline[0]} is set",
            f"give a local model folder, 'tiny' or 'smollm2', or unset {offline[0]} where the "
            "hub is reachable",
        )
    host = _unreachable_hub()
    if host is not None:  # the loader's retries would take about a minute to say the same
        raise UserError(
            f"{option} {name} is not in the local Hugging Face cache and the hub ({host}) "
            "cannot be reached from here",
            "give a local model folder, 'tiny' or 'smollm2', or download the model where the "
            "hub is reachable (huggingface-cli download) and copy the cache",
        )
    typer.echo(  # say what the wait is
        f"note: {option} {name} is not in the local Hugging Face cache: asking the hub for "
        "it (offline this takes about a minute of retries before failing; set "
        "HF_HUB_OFFLINE=1 to fail at once)",
        err=True,
    )


PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def _unreachable_hub(timeout_s: float = 3.0) -> str | None:
    """The hub's host when a TCP connection to it fails within `timeout_s` (no route, no DNS,
    refused), else None: reachable, or not checked (behind a proxy, which a direct connection
    does not test). HF_ENDPOINT names another hub (a mirror). The name lookup itself is not
    under the timeout: a resolver that does not answer takes its own time."""
    import os
    import socket
    from urllib.parse import urlsplit

    if any(os.environ.get(v) for v in PROXY_VARS):
        return None
    url = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = url.hostname or "huggingface.co"
    port = url.port or (80 if url.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError:
        return f"{host}:{port}"
    return None


def _in_hub_cache(name: str) -> bool:
    """Whether hub model `name` has a config.json in the local Hugging Face cache."""
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # noqa: BLE001 - an invalid repo id or no huggingface_hub: not cached
        return False
