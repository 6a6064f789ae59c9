"""Importing a package of the registry starts nothing: no worker supervisor,
no exit hook, no thread, until something is used."""
from __future__ import annotations

import subprocess
import sys


def test_importing_the_isolation_wire_starts_no_supervisor():
    script = ("import atexit, sys, threading\n"
              "registered = []\n"
              "atexit.register = lambda f, *a, **k: registered.append(f)\n"
              "import registry.isolation.wire, registry.isolation.guards, registry.isolation.faults\n"
              "print(int('registry.isolation.supervisor' in sys.modules), len(registered), threading.active_count())\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["0", "0", "1"], done.stdout + done.stderr
