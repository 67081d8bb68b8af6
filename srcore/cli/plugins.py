"""``srcore plugins``: installed plugins, their versions and hooks, and why any failed."""
from __future__ import annotations

NAME = "plugins"
HELP = "list installed plugins, their versions, and load or registration errors (exit 1 if any plugin failed)"


def configure_parser(p) -> None:
    from .output import add_format_argument

    add_format_argument(p, ("table", "json"), what="the plugins")


def run(args) -> int:
    from ..plugin.manager import get_plugin_manager
    from .main import format_table

    pm = get_plugin_manager()
    try:
        pm.registry  # calling the hooks is what finds most failures
    except Exception as exc:  # still list what we know; the error is the last line
        build_error = f"{type(exc).__name__}: {exc}"
    else:
        build_error = None
    reports = pm.reports
    if args.format == "json":
        from .output import print_json

        print_json([r.to_json() for r in reports])
    else:
        rows = []
        for r in reports:
            detail = r.error or (f"{len(r.errors)} rejected record(s)" if r.errors else ", ".join(
                h.removeprefix("srcore_") for h in r.hooks))
            rows.append([r.name, r.dist or "-", r.version or "-", r.status, detail])
        print(format_table(["NAME", "DISTRIBUTION", "VERSION", "STATUS", "HOOKS / ERROR"], rows))
        for r in reports:
            for e in r.errors:
                print(f"  {e}")
    if build_error:
        from ..errors import PluginError

        raise PluginError(f"building the registry failed: {build_error}")
    return 1 if any(r.status == "failed" for r in reports) else 0
