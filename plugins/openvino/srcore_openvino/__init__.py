"""srcore-openvino: backend ``openvino``, an engine backend on OpenVINO's CPU device.

The partitioner hands this plugin the segments of a graph its converter table
supports; each becomes one OpenVINO model, built with OpenVINO's graph API and
compiled once (symbolic dims stay dynamic). Everything else runs node by node on
the next backends. No numpy and no openvino here: the hooks only name
``"module:attr"`` references, imported when a model uses the backend.
"""
from __future__ import annotations

from srcore.plugin import Backend, EngineBuilder, Subcommand, hookimpl

BACKEND = "openvino"


@hookimpl
def srcore_backends():
    yield Backend(BACKEND, "OpenVINO CPU engines: supported segments compiled by OpenVINO (srcore-openvino)")


@hookimpl
def srcore_engine_builders():
    yield EngineBuilder(BACKEND, supports="srcore_openvino.support:supports",
                        build="srcore_openvino.engine:build", load="srcore_openvino.engine:load")


@hookimpl
def srcore_subcommands():
    from . import cache_cli

    yield Subcommand(cache_cli.NAME, cache_cli.SUMMARY, configure_parser=cache_cli.configure_parser, run=cache_cli.run)
