"""`python -m registry ...`: see registry/tools/cli.py for the commands."""
import sys

from registry.tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
