"""Drive rgt's Kaggle client in a process of its own (the official client reads its endpoint
from the environment at import): `python kaggle_driver.py VERB JSON` prints one JSON line."""

import json
import sys
import time
from pathlib import Path

from rgt.errors import UserError
from rgt.platforms.kaggle.api import KaggleClient, kernel_folder
from rgt.spec import load_spec


def main() -> None:
    verb, args = sys.argv[1], json.loads(sys.argv[2])
    client = KaggleClient()
    try:
        if verb == "push":
            spec = load_spec(Path(args["spec"]))
            meta = kernel_folder(spec, args["run_id"], owner=client.username,
                                 attempt=args["attempt"], dest=Path(args["dest"]),
                                 budget_s=args.get("budget_s"), grace_s=args.get("grace_s", 10),
                                 previous=args.get("previous"),
                                 **({"working_limit": args["working_limit"]}
                                    if "working_limit" in args else {}))
            ref, version = client.push(Path(args["dest"]))
            out = {"ref": ref, "version": version, "id": meta["id"], "meta": meta}
        elif verb == "wait":
            deadline = time.monotonic() + args.get("timeout", 120)
            seen = []
            while True:
                status, failure, raw = client.status(args["id"])
                if not seen or seen[-1] != status:
                    seen.append(status)
                if status in ("complete", "error") or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            out = {"status": status, "failure": failure, "raw": raw, "seen": seen}
        elif verb == "output":
            out = {"files": client.output(args["id"], Path(args["dest"]))}
        elif verb == "quota":
            out = client.quota()
        else:
            raise SystemExit(f"unknown verb {verb}")
    except UserError as err:
        out = {"error": str(err)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
