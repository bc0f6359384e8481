"""`docparse result`: a SUCCEEDED job's reading package, as Markdown, text, HTML, chunks, JSON
or the raw verified bytes, and its assets (images), each checked against its sha256."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from docparse import page_ranges
from docparse.cli_output import EXIT_OK, json_text, local_error, write
from docparse.client import Client
from docparse.errors import ContractError
from docparse.reasons import ErrorReason
from docparse.render import RENDERERS
from docparse.v1 import reading_package_pb2


def cmd_result(args: argparse.Namespace, client: Client) -> int:
    # --json is JSON whatever the output (docparse.cli_parser refuses it with another format)
    terminal = sys.stdout.isatty() and not args.output and not args.json
    fmt = args.format or ("markdown" if terminal else "json")
    if args.pages:
        return _pages(args, client, fmt)
    if fmt == "raw":
        if not args.output:
            raise local_error(
                ErrorReason.OUTPUT_REQUIRED, "--format raw writes a file: add -o FILE", ""
            )
        ref = client.download_result(args.job_id, Path(args.output))
        print(f"{args.output}: {ref.size_bytes} bytes, sha256 {ref.sha256} (verified)")
        if args.assets_dir:
            save_assets(client, args.job_id, client.result(args.job_id), args.assets_dir)
        return EXIT_OK
    return _show(args, client, client.result(args.job_id), fmt)


def _pages(args: argparse.Namespace, client: Client, fmt: str) -> int:
    """`--pages`: some pages, also while the job runs (then said on stderr: partial)."""
    read = client.read_pages(args.job_id, args.pages)
    if read.partial:
        drafts = page_ranges.of_pages(read.draft_pages) or "none"
        print(
            f"partial: job {args.job_id} is still running; {len(read.package.pages)} of the "
            f"pages asked are read so far (drafts: {drafts})",
            file=sys.stderr,
        )
    if fmt == "raw":
        if not args.output:
            raise local_error(
                ErrorReason.OUTPUT_REQUIRED, "--format raw writes a file: add -o FILE", ""
            )
        write(Path(args.output), read.package.SerializeToString(deterministic=True))
        return EXIT_OK
    return _show(args, client, read.package, fmt)


def _show(
    args: argparse.Namespace, client: Client, package: reading_package_pb2.ReadingPackage, fmt: str
) -> int:
    # JSON: one record, one line, as every --json output
    text = json_text(package) + "\n" if fmt == "json" else RENDERERS[fmt](package, args.furniture)
    if args.output:
        write(Path(args.output), text.encode("utf-8"))
    else:
        sys.stdout.write(text)
    if args.assets_dir:
        save_assets(client, args.job_id, package, args.assets_dir)
    return EXIT_OK


def save_assets(
    client: Client, job_id: str, package: reading_package_pb2.ReadingPackage, folder: Path
) -> None:
    """Every asset (image) of the package into `folder`, each checked against its sha256,
    named by its asset_id; a line on stderr says how many."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise local_error(
            ErrorReason.OUTPUT_UNWRITABLE, f"{folder}: {err.strerror or err}", folder
        ) from err
    total = 0
    for listed in package.assets:
        name = Path(listed.asset_id).name
        if not name or name.startswith(".") or name != listed.asset_id:
            raise ContractError(f"asset id {listed.asset_id!r} is not a plain file name")
        asset, data = client.asset(job_id, listed.asset_id, listed.deployment)
        write(folder / name, data)
        total += asset.size_bytes
    print(f"{len(package.assets)} assets ({total} bytes, sha256 verified) in {folder}",
          file=sys.stderr)  # fmt: skip
