"""Headless Chromium for the report tests (both HTML reports are rendered in a real browser)."""

from __future__ import annotations

import subprocess
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess:
    """Run headless Chromium with ``args`` in a fresh ``profile`` folder (no network, no GPU)."""
    cmd = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)
