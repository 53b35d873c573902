"""``tilefoundry cache``: the disk cache of compiled kernels (shared libraries built by jit / compile)."""

from __future__ import annotations

import argparse
import json

from .refusal import Refusal

NAME = "cache"
HELP = "show or empty the disk cache of compiled kernels"
DESCRIPTION = """The libraries jit / compile / build produce are kept in a disk cache, keyed by the
generated source, the compiler and its flags, the tvm-ffi version and the target, so that a second
process (or a second run) loads them instead of compiling again. It lives under
$TILEFOUNDRY_CACHE/kernels (default ~/.cache/tilefoundry/kernels).

  info    where the cache is, how many libraries it holds and their size (--json for a JSON object)
  clear   remove every cached library; libraries already loaded keep working, and nothing else
          under $TILEFOUNDRY_CACHE (prepared checkpoints, files of your own) is touched

example:
  tilefoundry cache info
  tilefoundry cache clear
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The action, and --json for info."""
    parser.add_argument("action", choices=("info", "clear"), help="info: show the cache; clear: empty it")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def run(args: argparse.Namespace) -> int:
    """Show or empty the cache; a Refusal (exit 2) when its folder cannot be read or written."""
    from ..codegen.cache import DiskCache

    cache = DiskCache()
    try:
        if args.action == "info":
            info = cache.info()
            if args.json:
                print(json.dumps(info))
            else:
                print(f"{info['path']}: {info['entries']} compiled libraries, {_size(int(info['bytes']))}")
            return 0
        removed = cache.clear()
    except OSError as e:
        raise Refusal(f"the kernel cache {cache.dir} cannot be read or emptied: {e}") from None
    if args.json:
        print(json.dumps({"path": str(cache.dir), "removed": removed}))
    else:
        print(f"removed {removed} compiled libraries from {cache.dir}")
    return 0


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} bytes"  # pragma: no cover - the loop always returns
