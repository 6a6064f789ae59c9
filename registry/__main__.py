"""`python -m registry ...`: see registry/cli.py for the commands."""
import sys

from registry.cli import main

if __name__ == "__main__":
    sys.exit(main())
