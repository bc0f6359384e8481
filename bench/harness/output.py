"""Where benchmark results go (var/bench/ at the repository root) and the progress log."""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "var" / "bench"


def log(message: str) -> None:
    """A timestamped progress line on stderr (stdout carries the report)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def write_text(path: Path, text: str) -> None:
    """Writes a result file, creating var/bench (or the folder given) first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
