"""``python -m srcore ...``: the ``srcore`` command (same arguments, same exit codes)."""
import sys

from srcore.cli import main

if __name__ == "__main__":
    sys.exit(main())
