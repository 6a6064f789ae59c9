#!/usr/bin/env bash
# Refresh docs/screenshots/*.png (shown in README.md) from the browser test:
# it runs notebooks/quickstart.ipynb and dtype_sweep.ipynb in JupyterLab in
# headless Chromium and saves the cells worth showing.
#   bash docs/refresh_screenshots.sh        (needs: apt-get install chromium chromium-driver)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
# The test skips without a browser; here that is an error (stale pictures).
"$PYTHON" -c 'import sys; sys.path.insert(0, "tests"); from lab_session import missing_browser
why = missing_browser(); why and sys.exit(why)'
REGISTRY_SCREENSHOTS="$PWD/docs/screenshots" PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" \
  "$PYTHON" -m pytest tests/test_browser.py -q -p no:cacheprovider
ls -l docs/screenshots
