"""What Landlock costs a parse child (parser_svc/child/landlock.py), run as
`python -m bench.parse.landlock_cost [N]`: N parses of a one-page PDF through one fork server
with run_parse as the worker calls it, alternately confined and not, after 4 unmeasured ones;
the uid drop off (child_uid 0, as in a pod that cannot drop), so only Landlock differs. Prints
one JSON object: the median wall-clock ms of a parse and the median CPU ms of its child, each
way. A kernel without Landlock: nothing to compare, it says so and exits 2."""

from __future__ import annotations

import asyncio
import json
import sys

from bench.parse.child_cost import Way, measure
from parser_svc.child import landlock
from parser_svc.child.privileges import ChildScratch

WAYS = {
    "open": Way(ChildScratch(0, 0), {"landlock": False}),
    "landlock": Way(ChildScratch(0, 0), {"landlock": True}),
}


def main() -> None:
    if not landlock.available():
        print("this kernel offers no Landlock: nothing to compare", file=sys.stderr)
        raise SystemExit(2)
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print(json.dumps({**asyncio.run(measure(WAYS, runs)), "abi": landlock.available()}))


if __name__ == "__main__":
    main()
