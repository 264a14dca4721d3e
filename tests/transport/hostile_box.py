"""A box that lies: the far side of a pull, scripted, for the laptop's engine to refuse.

Run by the real mover in place of rgt's far side (``python hostile_box.py SCENARIO.json``): it
swallows the engine the laptop sends, says the engine's MAGIC, answers PING, answers SCAN with
the scenario's LIST (any names, sizes, links it likes) and GET with pieces built from the
scenario's contents, bent as the scenario says:

    files   [[name, size, mtime_ns, mode, content (latin-1 text)], ...] as listed
    dirs, links                                                        as listed
    evil    one of: "" (honest), "other-piece" (answers a GET with a piece not asked for),
            "oversized" (a 1 GiB frame header), "bomb" (a chunk that inflates past 1 MiB),
            "too-much" (more data than the range holds), "bad-hash" (a digest that does not
            match), "cut" (stops half-way through the first piece)
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import zlib

from rgt.onbox import xfer
from rgt.transport.transfer import engine


def main() -> int:
    with open(sys.argv[1]) as f:
        scenario = json.load(f)
    evil = scenario.get("evil", "")
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    stdin.read(len(engine()))
    stdout.write(xfer.MAGIC)
    stdout.flush()
    link = xfer.Link(stdin, stdout)
    content = {f[0]: f[4].encode("latin-1") for f in scenario["files"]}
    while True:
        kind, payload = link.recv(eof_ok=True)
        if kind is None:
            return 0
        message = json.loads(payload)
        if message["op"] == "ping":
            link.send_json({"op": "pong"})
        elif message["op"] == "scan":
            link.send_json({"op": "list", "dirs": scenario.get("dirs", []),
                            "files": [f[:4] for f in scenario["files"]],
                            "links": scenario.get("links", []), "problems": []})
        elif message["op"] == "get":
            for name, size, mtime_ns, mode, k, offset in message["pieces"]:
                start, end = xfer.bounds(size, k)
                data = content[name][start:end]
                header = {"n": name, "s": size, "m": mtime_ns, "o": mode, "k": k, "a": offset}
                if evil == "other-piece":
                    header["k"] = k + 1
                link.send(b"P", json.dumps(header).encode())
                if evil == "oversized":
                    link.writer.write(xfer._HEADER.pack(b"D", 1 << 30))
                elif evil == "bomb":
                    link.send(b"Z", zlib.compress(b"\0" * (8 << 20), 9))
                elif evil == "cut":
                    link.send(b"D", data[offset: min(len(data) // 2, xfer.CHUNK)])
                    link.flush()
                    os._exit(3)
                else:
                    tail = data[offset:] + (b"x" * 10 if evil == "too-much" else b"")
                    for at in range(0, len(tail), xfer.CHUNK):
                        link.send(b"D", tail[at: at + xfer.CHUNK])
                digest = hashlib.sha256(data).hexdigest()
                if evil == "bad-hash":
                    digest = hashlib.sha256(b"not " + data).hexdigest()
                link.send(b"E", json.dumps({"h": digest}).encode())
        link.flush()


if __name__ == "__main__":
    sys.exit(main())
