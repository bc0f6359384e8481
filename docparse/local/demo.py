"""The `make run` demo: submit every example document through a gateway, show live progress,
print a summary with the replicas that answered."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from docparse.client import Client
from docparse.errors import DocparseError
from docparse.progress import ProgressBoard
from docparse.v1 import job_pb2
from docparse.waiting import state_name


@dataclass
class Row:
    path: Path
    job: job_pb2.Job = field(default_factory=job_pb2.Job)
    chars: int = 0
    replicas: set[str] = field(default_factory=set)
    error: str = ""


def run_demo(target: str, folder: Path, tls_root_cert: bytes | None = None) -> bool:
    """True when every document ended SUCCEEDED with its result downloaded and verified.
    The `replicas` column lists every parser_svc replica that answered a call made for the
    document (its submit, every watch stream, status and result reads), from the first
    `x-served-by` value of each answer."""
    paths = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    rows = [Row(p) for p in paths]
    board = ProgressBoard([p.name for p in paths])
    print(f"submitting {len(paths)} documents from {folder} to {target}", flush=True)

    def follow(index: int, row: Row) -> None:
        def answered(method: str, served_by: tuple[str, ...]) -> None:
            if len(served_by) > 1:  # the replica, then the gateway that relayed its answer
                row.replicas.add(served_by[0])

        with Client(target, tls_root_cert=tls_root_cert, on_answer=answered) as client:
            try:
                answer = client.submit(row.path.name, row.path.read_bytes())
                row.job = answer.job
                board.update(index, row.job)
                for job in client.watch(row.job.job_id):
                    row.job = job
                    board.update(index, job)
                final = client.status(row.job.job_id)
                if final.job.state == job_pb2.STATE_SUCCEEDED:
                    client.result(row.job.job_id)  # downloaded and checked against its sha256
                    # what the parser counted: pages, slides, cells, attachments
                    row.chars = final.job.result.char_count
            except DocparseError as err:  # a failed call, a wait that timed out, ...
                row.error = str(err)

    threads = [threading.Thread(target=follow, args=(i, r)) for i, r in enumerate(rows)]
    with board:  # closed before the summary, also when a document's wait ended in an error
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    print()
    print(f"{'document':<28} {'job id':<32} {'state':<10} {'pages':>5} {'chars':>7}  replicas")
    for row in rows:
        state = state_name(row.job.state) if row.job.job_id else "ERROR"
        detail = row.error or row.job.error.reason
        print(
            f"{row.path.name[:28]:<28} {row.job.job_id:<32} {state:<10} "
            f"{row.job.result.page_count:>5} {row.chars:>7}  {', '.join(sorted(row.replicas))}"
            + (f"  {detail}" if detail else "")
        )
    ok = all(r.job.state == job_pb2.STATE_SUCCEEDED and not r.error for r in rows)
    print(f"\n{'all documents parsed' if ok else 'some documents did not parse'}", flush=True)
    return ok
