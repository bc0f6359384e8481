"""What dropping a parse child's uid costs (parser_svc/child/privileges.py), run as root as
`python -m bench.parse.drop_cost [N]`: N parses of a one-page PDF through one fork server with
run_parse as the worker calls it, alternately with the drop (uid 65534, the worker's scratch
directory) and without (uid 0: the child keeps root), after 4 unmeasured ones. Prints one JSON
object: the median wall-clock ms of a parse and the median CPU ms of its child, each way.
Not root: nothing to compare (no process may drop), it says so and exits 2."""

from __future__ import annotations

import asyncio
import json
import os
import sys

from bench.parse.child_cost import Way, measure
from parser_svc.child.privileges import ChildScratch, can_drop

WAYS = {"keep": Way(ChildScratch(0, 0)), "drop": Way(ChildScratch(65534, 65534))}


def main() -> None:
    if not can_drop():
        print(f"uid {os.geteuid()} cannot drop a child's uid: run as root", file=sys.stderr)
        raise SystemExit(2)
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print(json.dumps(asyncio.run(measure(WAYS, runs))))


if __name__ == "__main__":
    main()
