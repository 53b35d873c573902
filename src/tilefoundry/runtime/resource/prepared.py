"""The prepared-folder format, the way TileFoundry writes any folder, and its cache root: their one home.

**Prepared folder** (what ``Module.prepare`` and ``tilefoundry prepare`` write, spec 1.1.2)::

    model-00001-of-00001.safetensors   every weight, keyed by its dotted module path   (SHARD_NAME)
    model.safetensors.index.json       {"metadata": {"total_size": N, "prepared_by": "tilefoundry",
                                                      "companions": [...]},
                                        "weight_map": {"<key>": SHARD_NAME, ...}}    (INDEX_NAME)
    config.json, tokenizer files ...   the companions copied beside, named in the index

The mark ``prepared_by: tilefoundry`` tells a prepared folder from any other checkpoint
(:func:`is_prepared`), and the index names every file the folder holds (:func:`prepared_files`): that is how
a later prepare knows what it may replace.

**Writing a folder** (:func:`write_folder`): the content is written into ``.<NAME>.partial-<random>`` beside
the target ``NAME`` and renamed into place, so the target appears all at once with the user's normal
permissions (the umask decides). An existing target is replaced only when everything in it is something an
earlier write of the same kind produced (the caller says what that is); anything else is refused, naming
the first few entries, and an input lying inside the target is refused. The check is made before the work
and again at the swap, under an exclusive lock on the target (:func:`folder_lock`, an ``flock`` on
``.<NAME>.lock`` beside it), so two writers of one target take turns and the last one wins whole.

Replacing is one step on Linux (``renameat2(RENAME_EXCHANGE)`` of the partial and the target), so the target
never goes missing; elsewhere it takes two renames (target -> ``.<NAME>.old-<random>``, partial -> target),
and a writer killed in between leaves the target missing and its old content hidden. A writer killed while
filling leaves its partial. The next writer of the same target, holding the lock, puts the old content back
(or removes it, when the target is there) and removes every partial whose writer is gone (a live writer
keeps an ``flock`` on its partial folder), so no copy leaks. Only what a writer provably made is ever removed
or renamed: a partial folder holds a mark file from its creation until its content is complete, an old or
complete folder holds only the files of an output (the caller's ``owned``), and the lock file starts with a
header; an entry of the user's named like one of them is left as it is (a lock file in the way is refused).

**Cache root** (:func:`cache_root`): ``$TILEFOUNDRY_CACHE``, else ``~/.cache/tilefoundry``.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import functools
import json
import os
import secrets
import shutil
import stat
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors.torch import save_file

from .checkpoint_index import INDEX_NAME

__all__ = [
    "INDEX_NAME",
    "PREPARED_MARK",
    "SHARD_NAME",
    "cache_root",
    "check_target",
    "folder_lock",
    "hidden_output",
    "is_prepared",
    "prepared_files",
    "write_folder",
    "write_prepared",
]

SHARD_NAME = "model-00001-of-00001.safetensors"
"""The one shard file of a prepared folder."""

PREPARED_MARK = "tilefoundry"
"""The value of ``metadata.prepared_by`` in a prepared folder's index."""

_COMPANIONS = "companions"  # metadata key listing the files copied beside the shard


# -- the cache root --------------------------------------------------------------------------------------------


class CacheRootError(ValueError):
    """The cache root cannot be a folder: it, or a folder above it, is a file."""


def cache_root() -> Path:
    """Where TileFoundry caches what it derives (prepared checkpoints, converted models, kernels).

    ``$TILEFOUNDRY_CACHE`` when set and non-empty, else ``~/.cache/tilefoundry``; not created here.

    Raises:
        CacheRootError: that path, or the nearest existing folder above it, is a file, naming the variable.
    """
    env = os.environ.get("TILEFOUNDRY_CACHE")
    root = Path(env) if env else Path.home() / ".cache" / "tilefoundry"
    at = _file_in_the_way(root)
    if at is not None:
        what = f"TILEFOUNDRY_CACHE is {env!r}" if env else f"the default cache root is {str(root)!r}"
        where = "it is" if at == root else f"{str(at)!r} above it is"
        raise CacheRootError(
            f"{what}, but {where} a file, not a folder; point TILEFOUNDRY_CACHE at a folder (created when "
            "missing) or move the file")
    return root


def _file_in_the_way(folder: Path) -> Path | None:
    """The file (or dangling link) at ``folder`` or at the nearest existing path above it, which keeps ``folder``
    from being a folder; None when that nearest existing path is a folder."""
    for at in (folder, *folder.parents):
        if at.is_dir():
            return None
        if at.exists() or at.is_symlink():
            return at
    return None


# -- reading the format ----------------------------------------------------------------------------------------


def _plain_name(name: object) -> bool:
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\\" not in name


def prepared_files(folder: str | os.PathLike[str]) -> frozenset[str] | None:
    """The file names a prepared folder's index says prepare wrote (index, shard, companions).

    None when ``folder`` is not a prepared folder: no index, an index that is not JSON, lacks the mark, names a
    file by anything but a plain name, or maps a weight to another file than the one shard prepare writes, or
    that shard is missing (a mark copied into a Hugging Face folder's index).
    """
    try:
        doc = json.loads((Path(folder) / INDEX_NAME).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    meta, weight_map = doc.get("metadata"), doc.get("weight_map")
    if not isinstance(meta, dict) or meta.get("prepared_by") != PREPARED_MARK or not isinstance(weight_map, dict):
        return None
    companions = meta.get(_COMPANIONS, [])
    if not isinstance(companions, list):
        return None
    names = [*weight_map.values(), *companions]
    if not all(_plain_name(n) for n in names):
        return None
    # The mark alone proves nothing (a copied or hand-edited index carries it too): a prepared folder's weights
    # all sit in its one shard, which is there.
    if any(n != SHARD_NAME for n in weight_map.values()) or not (Path(folder) / SHARD_NAME).is_file():
        return None
    return frozenset({INDEX_NAME, *names})


def is_prepared(folder: str | os.PathLike[str]) -> bool:
    """True when ``folder`` was written by prepare (its index carries the mark)."""
    return prepared_files(folder) is not None


# -- writing the format ----------------------------------------------------------------------------------------


def _own_storage(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensors, each a copy where it shares memory with one before it (safetensors refuses shared memory).

    Two declared weights may read one raw tensor; each is still a weight of its own in the folder.
    """
    spans: dict[tuple[int, int], list[tuple[int, int]]] = {}  # storage -> byte ranges kept in it
    out: dict[str, torch.Tensor] = {}
    for key, t in tensors.items():
        if t.numel():
            storage = t.untyped_storage()
            kept = spans.setdefault((storage.data_ptr(), storage.nbytes()), [])
            lo, hi = t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()
            if any(lo < end and start < hi for start, end in kept):
                t = t.clone()
            else:
                kept.append((lo, hi))
        out[key] = t
    return out


def write_prepared(out: str | os.PathLike[str], tensors: Mapping[str, torch.Tensor], *,
                   companions: Sequence[str | os.PathLike[str]] = (), inputs: Iterable[Path] = ()) -> Path:
    """Write the prepared folder ``out``: ``tensors`` (CPU, contiguous) by key, and the ``companions`` files.

    The write is :func:`write_folder`'s: all at once, replacing only an earlier prepared folder, refusing an
    ``inputs`` path inside ``out``. Returns the folder's resolved path.
    """
    names = [Path(c).name for c in companions]

    def fill(folder: Path) -> None:
        total = sum(t.numel() * t.element_size() for t in tensors.values())
        index = {"metadata": {"total_size": total, "prepared_by": PREPARED_MARK, _COMPANIONS: names},
                 "weight_map": {k: SHARD_NAME for k in sorted(tensors)}}
        (folder / INDEX_NAME).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
        for source, name in zip(companions, names):
            shutil.copyfile(source, folder / name)  # data only: the copy gets the umask's permissions
        shard = folder / SHARD_NAME
        # One metadata key only: safetensors writes metadata from a hash map, so two keys come out in a
        # different order from run to run and the shard would not be byte-for-byte reproducible.
        save_file(_own_storage(tensors), str(shard), metadata={"format": "pt"})
        # safetensors writes through a private temporary file (mode 0600); give the shard the mode the
        # umask gave the index, like any file the user creates.
        os.chmod(shard, stat.S_IMODE(os.stat(folder / INDEX_NAME).st_mode))

    return write_folder(out, fill, owned=prepared_files, inputs=inputs, what="prepare",
                        kind="a prepared checkpoint directory")


# -- writing any folder ----------------------------------------------------------------------------------------


def _resolve_target(out: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(os.fspath(out)))


def _leftover_prefixes(out: Path) -> tuple[str, str]:
    return f".{out.name}.old-", f".{out.name}.partial-"


_LOCK_HEADER = b"tilefoundry folder lock\n"
_PARTIAL_MARK = ".tilefoundry-partial"
_PARTIAL_HEADER = "tilefoundry temporary folder "


def _create_lock_file(path: Path) -> None:
    """Create the lock file ``path`` holding ``_LOCK_HEADER`` and a random token, atomically (written beside under
    a random name, then linked into place: a reader never sees it empty); nothing when it exists already."""
    temp = path.parent / f"{path.name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        os.write(fd, _LOCK_HEADER + secrets.token_hex(16).encode() + b"\n")
    finally:
        os.close(fd)
    try:
        os.link(temp, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(temp)  # made just above, by this process


def _ours(fd: int) -> bool:
    """Whether the open lock file ``fd`` is one a writer made (its header), not a file of the user's."""
    head = os.pread(fd, len(_LOCK_HEADER), 0)
    return head == _LOCK_HEADER


@contextmanager
def folder_lock(out: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the exclusive lock of the folder ``out``: an ``flock`` on ``.<NAME>.lock`` beside it.

    Blocks while another process (or another open of it in this one) holds it. The lock file is made with a
    header, so a file of that name the user made is refused (never locked, never removed); it is removed on
    release, while still held; a waiter that then finds it locked a removed file takes the next one.
    """
    target = _resolve_target(out)
    path = target.parent / f".{target.name}.lock"
    while True:
        if not os.path.lexists(path):
            _create_lock_file(path)
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            continue  # released and removed meanwhile
        except OSError as e:  # a link, a folder: not a lock file of ours
            raise FileExistsError(f"{path} is in the way of the lock a write of {target.name} takes and is not one "
                                  f"TileFoundry made ({e.strerror}); move it away") from None
        if not _ours(fd):
            os.close(fd)
            raise FileExistsError(f"{path} is in the way of the lock a write of {target.name} takes and is not one "
                                  "TileFoundry made; it was left as it is: move it away, or choose another output")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            st = os.stat(path)
        except FileNotFoundError:
            os.close(fd)
            continue
        except BaseException:
            os.close(fd)
            raise
        held = os.fstat(fd)
        if (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)
    try:
        yield
    finally:
        try:
            os.unlink(path)  # still the file this process holds locked (checked above), made by a writer
        except FileNotFoundError:
            pass
        os.close(fd)


def _recover(out: Path, owned: _Owned) -> None:
    """Clear what killed writers of ``out`` left beside it (call holding ``folder_lock(out)``).

    Only what a writer provably made is touched: a partial folder holding the mark a writer puts in each one it
    creates (or holding only what ``owned`` recognises: a complete output), whose writer is gone; an old folder
    (an output a writer killed between its two renames hid) holding only what ``owned`` recognises. Such an old
    folder goes back to ``out`` when ``out`` is missing, and is removed otherwise. Anything else named like them
    is the user's and stays as it is.
    """
    old_prefix, partial_prefix = _leftover_prefixes(out)
    olds: list[os.DirEntry[str]] = []
    partials: list[os.DirEntry[str]] = []
    with os.scandir(out.parent) as entries:
        for e in entries:
            if not e.is_dir(follow_symlinks=False):
                continue
            if e.name.startswith(old_prefix) and _only_owned(Path(e.path), owned):
                olds.append(e)
            elif e.name.startswith(partial_prefix):
                partials.append(e)
    olds.sort(key=lambda e: e.stat(follow_symlinks=False).st_ctime_ns, reverse=True)
    if olds and not os.path.lexists(out):
        os.replace(olds.pop(0).path, out)
    for e in olds:
        shutil.rmtree(e.path, ignore_errors=True)
    for e in partials:
        try:
            fd = os.open(e.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue  # its writer is alive
        try:
            if _is_marked(Path(e.path)) or _only_owned(Path(e.path), owned):
                shutil.rmtree(e.path, ignore_errors=True)
        finally:
            os.close(fd)


def hidden_output(out: str | os.PathLike[str]) -> Path | None:
    """The complete prepared folder a writer killed between its two renames left hidden beside the missing
    ``out`` (``.<NAME>.old-<random>``, holding only a prepared folder's files), the newest; None when there is
    none. Reading it renames nothing: only the next writer, holding the lock, puts it back."""
    target = _resolve_target(out)
    old_prefix = _leftover_prefixes(target)[0]
    try:
        found = [Path(e.path) for e in os.scandir(target.parent)
                 if e.name.startswith(old_prefix) and e.is_dir(follow_symlinks=False)
                 and _only_owned(Path(e.path), prepared_files)]
    except OSError:
        return None
    return max(found, key=lambda p: p.stat().st_ctime_ns) if found else None


def _is_marked(folder: Path) -> bool:
    """Whether ``folder`` holds the mark a writer puts in each partial folder it creates."""
    try:
        with open(folder / _PARTIAL_MARK, encoding="ascii") as f:
            return f.read(len(_PARTIAL_HEADER)) == _PARTIAL_HEADER
    except (OSError, UnicodeDecodeError):
        return False


def _only_owned(folder: Path, owned: _Owned) -> bool:
    """Whether ``folder`` holds nothing but the files ``owned`` recognises as a writer's output."""
    mine = owned(folder)
    if mine is None:
        return False
    try:
        return not _foreign(folder, mine)
    except OSError:
        return False


def _foreign(folder: Path, mine: Collection[str]) -> list[str]:
    """The entries of ``folder`` that are not among the files ``mine`` names (a subfolder never is), sorted."""
    return sorted(n for n in os.listdir(folder) if n not in mine or (folder / n).is_dir())


_Owned = Callable[[Path], Collection[str] | None]
"""Names the entries of an existing folder that an earlier write of the same kind made (None: none)."""


def _refuse_foreign(out: Path, owned: _Owned, what: str, kind: str, shown_as: Path | None = None) -> None:
    """Refuse ``out`` unless it is missing or holds only files ``owned`` names (``shown_as``: its name in messages)."""
    if not os.path.lexists(out):
        return
    name = shown_as or out
    if not out.is_dir():
        raise FileExistsError(f"{what}: {name} exists and is not a folder; choose another output folder")
    foreign = _foreign(out, owned(out) or frozenset())
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise FileExistsError(
            f"{what}: {name} is not {kind} it may replace: it holds {len(foreign)} "
            f"entr{'ies' if len(foreign) != 1 else 'y'} {what} did not write ({shown}). {what} replaces only "
            "its own earlier output; move them away, or choose another output folder"
        )


def _refuse_inputs_inside(out: Path, inputs: Iterable[Path], what: str) -> None:
    prefix = os.fspath(out).rstrip(os.sep) + os.sep
    for path in inputs:
        resolved = os.path.realpath(os.fspath(path))
        if resolved == os.fspath(out) or resolved.startswith(prefix):
            raise ValueError(
                f"{what}: the input {resolved} lies inside the output folder {out}, which the output replaces "
                "whole; write the output elsewhere"
            )


def check_target(out: str | os.PathLike[str], *, owned: _Owned, inputs: Iterable[Path] = (), what: str,
                 kind: str) -> Path:
    """Refuse now what :func:`write_folder` would refuse at the swap; returns the resolved target.

    Clears killed writers' leftovers first (under the lock), so an output hidden by a killed run is back.
    """
    target = _resolve_target(out)
    _refuse_inputs_inside(target, inputs, what)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = _file_in_the_way(target.parent) or target.parent
        raise FileExistsError(f"{what}: the output folder {target} cannot be made: {blocker} is a file, not a "
                              "folder; choose another output folder") from None
    with folder_lock(target):
        _recover(target, owned)
        _refuse_foreign(target, owned, what, kind)
    return target


@contextmanager
def _partial(out: Path) -> Iterator[Path]:
    """A new, locked ``.<NAME>.partial-<random>`` folder beside ``out``; removed on failure."""
    while True:
        path = out.parent / f"{_leftover_prefixes(out)[1]}{secrets.token_hex(6)}"
        try:
            os.mkdir(path, 0o777)  # the umask decides the permissions
            break
        except FileExistsError:
            continue
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # tells other writers' recovery that this partial is alive
        # the proof that this folder is a writer's (recovery removes no folder without it or a complete output)
        (path / _PARTIAL_MARK).write_text(f"{_PARTIAL_HEADER}{secrets.token_hex(16)}\n", encoding="ascii")
        yield path
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)  # made just above, by this process
        raise
    finally:
        os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Swap the two paths ``a`` and ``b`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``): at every instant each
    path names one of the two folders. False where the OS or the file system has no such call."""
    libc = _libc()
    if libc is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    if libc.renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), os.fspath(a), None, os.fspath(b))


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library, where it has ``renameat2`` (glibc 2.28 and later)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
        libc.renameat2.restype = ctypes.c_int
        return libc
    except (OSError, AttributeError):
        return None


def _swap(partial: Path, out: Path, refuse_foreign: Callable[[Path], None]) -> None:
    """Put ``partial`` in place of ``out`` (lock held); an existing ``out`` is removed after, once checked.

    Where the OS can, the two are exchanged in one step, so ``out`` never goes missing, even if the process dies
    right then (the old content is then the partial folder, which the next writer recognises and removes).
    Otherwise ``out`` is moved aside first. ``refuse_foreign`` checks the old content once more where no path
    leads into it any longer, so what it holds then is exactly what would be removed; a refusal puts it back.
    """
    if not os.path.lexists(out):
        os.replace(partial, out)
        return
    if _exchange(partial, out):
        aside = partial  # now the old content
        try:
            refuse_foreign(aside)
        except BaseException:
            _exchange(partial, out)
            raise
        shutil.rmtree(aside, ignore_errors=True)  # the old output: only files an earlier write made
        return
    old_prefix = _leftover_prefixes(out)[0]
    old = out.parent / f"{old_prefix}{secrets.token_hex(6)}"
    while os.path.lexists(old):
        old = out.parent / f"{old_prefix}{secrets.token_hex(6)}"
    os.replace(out, old)
    try:
        refuse_foreign(old)
        os.replace(partial, out)
    except BaseException:
        if not os.path.lexists(out):
            os.replace(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def write_folder(out: str | os.PathLike[str], fill: Callable[[Path], None], *, owned: _Owned,
                 inputs: Iterable[Path] = (), what: str, kind: str) -> Path:
    """Write the folder ``out`` all at once: ``fill(partial)`` writes the content, which then replaces ``out``.

    Args:
        out: the target folder (symlinks resolved).
        fill: writes the content into the (empty) folder it is given.
        owned: the entry names of an existing folder that an earlier write of this kind made (None: none);
            an existing ``out`` holding anything else (or a subfolder) is refused, never replaced.
        inputs: paths the content is read from; one inside ``out`` is refused.
        what, kind: how messages name the writer (``"prepare"``) and what it replaces (``"a prepared
            checkpoint directory"``).

    Returns the resolved target. Raises FileExistsError (a foreign ``out``, checked before ``fill`` and again
    at the swap, under :func:`folder_lock`) or ValueError (an input inside ``out``); whatever ``fill``
    raises passes through. On any failure ``out`` is as it was and the partial folder is gone.
    """
    target = check_target(out, owned=owned, inputs=inputs, what=what, kind=kind)
    with _partial(target) as partial:
        fill(partial)
        (partial / _PARTIAL_MARK).unlink()  # the content is complete: it proves itself ours from here on
        with folder_lock(target):
            _recover(target, owned)
            _refuse_foreign(target, owned, what, kind)
            _swap(partial, target, lambda aside: _refuse_foreign(aside, owned, what, kind, shown_as=target))
    return target
