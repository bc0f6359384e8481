"""A 200 MiB folder of 50 files through the gateway with `docparse submit DIR --watch`, as a
user runs it: the CLI streams it (UploadBatch, 1 MiB chunks), every file parses, and neither
the gateway nor the parser_svc replicas grow by more than a small fraction of the folder, even
when the replicas stall again and again during the upload (SIGSTOP/SIGCONT), as a busy node
does to them at random.

Bound: each server process's peak RSS (VmHWM, reset before the upload through
/proc/PID/clear_refs) grows by at most 48 MiB, a quarter of the folder. A CreateBatch of the
folder would need all 200 MiB in one message (refused above the 65 MiB message limit, and a
process accepting it would hold it whole, more than once); a streamed upload holds a few
chunks per process plus the HTTP/2 receive window. grpc's default window follows the measured
bandwidth-delay product, which a stalled receiver inflates: with it the stalled replica grew
by up to 76 MiB here (and by 92 MiB in a loaded CI run, unstalled). The servers fix it at
4 MiB per stream (docparse_server/flow_control.py): 17-28 MiB, stalled. The growth is printed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from docparse.local.stack import LocalStack
from tests.conftest import make_stack
from tests.helpers import Stalls, status_kb

ROOT = Path(__file__).resolve().parents[3]
FILES = 50
FILE_BYTES = 4 * 1024 * 1024  # 50 x 4 MiB = 200 MiB
RSS_GROWTH_BOUND_KB = 48 * 1024


def padded_pdf(label: str, size: int) -> bytes:
    """A one-page PDF with a text layer, padded to `size` bytes by an unreferenced stream of
    random (incompressible) bytes: a valid file every reader opens, as big as asked, made in
    the time it takes to draw the random bytes."""
    text = f"BT /F1 14 Tf 72 720 Td ({label}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(text), text),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    head = b"%PDF-1.7\n"
    body = bytearray(head)
    offsets = []
    for number, obj in enumerate(objects, start=1):
        offsets.append(len(body))
        body += b"%d 0 obj\n%s\nendobj\n" % (number, obj)
    padding_at = len(body)
    # The padding object: its length makes the whole file `size` bytes.
    fixed = len(b"6 0 obj\n<< /Length 0000000000 >>\nstream\n\nendstream\nendobj\n")
    trailer_size = len(b"xref\n0 7\n") + 20 * 7 + len(b"trailer\n<< /Size 7 /Root 1 0 R >>\n")
    trailer_size += len(b"startxref\n%d\n%%%%EOF\n" % (size,))
    pad = size - padding_at - fixed - trailer_size
    assert pad > 0
    offsets.append(padding_at)
    body += b"6 0 obj\n<< /Length %010d >>\nstream\n" % pad + os.urandom(pad)
    body += b"\nendstream\nendobj\n"
    xref_at = len(body)
    body += b"xref\n0 7\n0000000000 65535 f \n"
    body += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    body += b"trailer\n<< /Size 7 /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % xref_at
    return bytes(body)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(tmp_path_factory.mktemp("big-batch"), replicas=2, gateways=1) as running:
        yield running


def test_a_200_mib_folder_streams_through_the_gateway(stack: LocalStack, tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    for index in range(FILES):
        (folder / f"scan-{index:02d}.pdf").write_bytes(padded_pdf(f"file {index}", FILE_BYTES))
    total = sum(p.stat().st_size for p in folder.iterdir())
    assert total == FILES * FILE_BYTES == 200 * 1024 * 1024

    servers = {f"{child.name}/{child.pid}": child.pid for child in stack.children}
    before = {}
    for name, pid in servers.items():
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM starts again from VmRSS
        before[name] = status_kb(pid, "VmRSS")
    started = time.monotonic()
    with Stalls([child.proc.pid for child in stack.parsers]):
        run = subprocess.run(
            [sys.executable, "-m", "docparse", "submit", str(folder), "--watch",
             "--target", stack.gateway_addresses[0]],
            capture_output=True, text=True, timeout=600, cwd=ROOT,
        )  # fmt: skip
    elapsed = time.monotonic() - started
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    rows = [
        line for line in run.stdout.splitlines() if line.startswith("scan-") and "[" not in line
    ]
    assert len(rows) == FILES and all(" SUCCEEDED " in row for row in rows), rows
    assert all(row.split()[3] == "1" for row in rows)  # one page each, read

    growth = {name: status_kb(pid, "VmHWM") - before[name] for name, pid in servers.items()}
    print(
        f"\n200 MiB folder, {FILES} files, submit --watch through the gateway: {elapsed:.1f} s; "
        + ", ".join(f"{name} peak RSS +{kb / 1024:.1f} MiB" for name, kb in growth.items())
    )
    for name, kb in growth.items():
        assert kb < RSS_GROWTH_BOUND_KB, (name, kb)
