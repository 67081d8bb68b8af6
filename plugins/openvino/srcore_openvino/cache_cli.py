"""``srcore openvino-cache``: where OpenVINO's model cache is, how large, and clearing it."""
from __future__ import annotations

NAME = "openvino-cache"
SUMMARY = "show the size of OpenVINO's compiled-model cache, or clear it (--clear)"


def configure_parser(p) -> None:
    from pathlib import Path   # not at import: the registry imports this module on every full start

    p.add_argument("--dir", type=Path, default=None,
                   help="the cache directory (default: <srcore cache root>/openvino, the engines' default cache_dir)")
    p.add_argument("--clear", action="store_true", help="remove every cached compiled model")


def run(args) -> int:
    from . import cache
    from .options import default_cache_dir

    where = args.dir if args.dir is not None else default_cache_dir()
    if args.clear:
        n, size = cache.clear(where)
        print(f"removed {n} entr{'y' if n == 1 else 'ies'} ({size / 2**20:.1f} MB) from {where}")
        return 0
    found = cache.entries(where)
    size = sum(s for _, s, _ in found)
    print(f"OpenVINO model cache: {where}: {len(found)} entr{'y' if len(found) == 1 else 'ies'}, "
          f"{size / 2**20:.1f} MB (bounded by the engine option cache_limit_mb, default "
          f"{cache.DEFAULT_LIMIT_MB} MB: least recently used entries go first)")
    print(f"clear it with: srcore {NAME} --clear" + (f" --dir {where}" if args.dir is not None else ""))
    return 0
