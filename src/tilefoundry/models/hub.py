"""A Hugging Face model id (``owner/name``, optionally ``owner/name@revision``) found in the local hub cache.

``tilefoundry generate --ckpt HuggingFaceTB/SmolLM2-135M-Instruct`` reads the snapshot the Hugging Face cache
already holds (``hf download`` / ``huggingface-cli download`` put it there): the id is resolved through
``huggingface_hub`` with ``local_files_only=True``, so nothing is ever downloaded and no connection is made.
The cache folder is read from the environment at call time, as ``huggingface_hub`` reads it at import:
``HF_HUB_CACHE``, else ``HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``, else
``$XDG_CACHE_HOME/huggingface/hub`` (``~/.cache/huggingface/hub``).

``huggingface_hub`` is imported only when an id is resolved: a command given a folder never loads it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["cached_snapshot", "hub_cache_folder", "looks_like_model_id", "model_id_folder"]

# owner/name as the hub spells repository ids (letters, digits, '-', '_', '.'; no '--' or '..'), then an
# optional @revision: a branch, a tag or a commit hash (a branch may hold '/', as refs/pr/1 does).
_ID = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(?:@(?P<revision>[\w.-]+(?:/[\w.-]+)*))?")
_MAX_REPO_ID = 96  # the hub's own limit on a repository id's length


def looks_like_model_id(text: str) -> bool:
    """True when ``text`` is shaped like a hub model id: ``owner/name`` or ``owner/name@revision``.

    Only the shape is judged (``org/name`` may still be missing from the cache); paths that are spelled as
    paths (``./a/b``, ``/a/b``, ``~/a``, ``a/b/c``) are not ids.
    """
    match = _ID.fullmatch(text)
    if match is None:
        return False
    repo, revision = match["repo"], match["revision"] or ""
    return len(repo) <= _MAX_REPO_ID and "--" not in repo and ".." not in repo + "/" + revision \
        and not repo.endswith(".git")


def hub_cache_folder() -> Path:
    """The Hugging Face hub cache folder the environment names now (see the module docstring for the order)."""
    def expand(value: str) -> str:
        return os.path.expandvars(os.path.expanduser(value))

    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(expand(explicit))
    home = os.environ.get("HF_HOME")
    if not home:
        home = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                            "huggingface")
    return Path(expand(home)) / "hub"


def cached_snapshot(model_id: str) -> Path:
    """The snapshot folder of ``model_id`` (``owner/name[@revision]``) in the local hub cache, symlinks resolved.

    The revision defaults to ``main``; a branch or tag is looked up in the cache's ``refs/``, a commit hash
    names its snapshot directly. Nothing is downloaded and no connection is made.

    Raises:
        FileNotFoundError: the cache holds no (complete) snapshot of that id and revision; the message names the
            id, the cache folder searched and how to fetch it.
        ValueError: ``model_id`` is not shaped like a model id.
    """
    if not looks_like_model_id(model_id):
        raise ValueError(f"{model_id!r} is not a Hugging Face model id; an id is owner/name or owner/name@revision")
    repo, _, revision = model_id.partition("@")
    cache = hub_cache_folder()
    try:
        from huggingface_hub import errors as hub_errors
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError
    except ImportError:
        raise FileNotFoundError(
            f"checkpoint {model_id!r} is no local folder, and resolving a Hugging Face model id needs the "
            "huggingface_hub package, which is not installed: install it (pip install huggingface_hub), or pass "
            "the local folder of the checkpoint"
        ) from None
    try:
        found = snapshot_download(repo, revision=revision or None, cache_dir=cache, local_files_only=True)
    except (LocalEntryNotFoundError, HFValidationError) as exc:
        repo_folder = cache / ("models--" + repo.replace("/", "--"))
        if isinstance(exc, getattr(hub_errors, "IncompleteSnapshotError", ())):  # recent huggingface_hub only
            why = f"its snapshot there is incomplete: {exc}"
        elif repo_folder.is_dir():
            why = f"{repo_folder.name} there holds no snapshot for revision {revision or 'main'!r}"
        else:
            why = f"it has no {repo_folder.name} folder"
        fetch = f"hf download {repo}" + (f" --revision {revision}" if revision else "")
        raise FileNotFoundError(
            f"checkpoint {model_id!r} is no local folder, and the Hugging Face cache {str(cache)!r} holds no "
            f"complete snapshot of it ({why}). TileFoundry never downloads: fetch it first with `{fetch}` (or "
            f"`huggingface-cli {fetch[3:]}`), set HF_HUB_CACHE / HF_HOME to the cache that holds it, or pass "
            "a local folder"
        ) from None
    return Path(found).resolve()


def model_id_folder(text: str | os.PathLike[str]) -> Path | None:
    """The cached snapshot ``text`` names when it is a model id and not an existing local path, else None.

    A local path wins over an id: ``org/name`` that exists relative to the working folder is that path.

    Raises:
        FileNotFoundError: ``text`` is an id the cache does not hold (see :func:`cached_snapshot`).
    """
    text = os.fspath(text)
    if os.path.lexists(text) or not looks_like_model_id(text):
        return None
    return cached_snapshot(text)
