"""The compiled (numba) tactics, registered with :mod:`.tactics` when their modules import."""
from __future__ import annotations
