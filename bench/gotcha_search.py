"""How `rgt gotcha search` does on a held-out round (issue 34): top-1, top-3, false answers.

    python bench/gotcha_search.py [--round tests/knowledge/round14_corpus.yaml] [--show-dev]

Reads a round file (`round14_positive` / `round14_negative` lists, each entry marked
`part: dev` or `part: holdout`) and prints, for each part and for both together:

- top-1 and top-3: positives whose first answer, or any of the first three, is one of the
  entry's `expect` ids (what a user reads first, and what the earlier rounds scored);
- false answers: negatives (routine output, ordinary errors) that got any answer at all, rule
  or guess; and positives whose answers are all wrong (misleading, not merely empty).

With `--show-dev` it also lists the dev part's misses and false answers line by line. The
holdout part is only ever counted: it is the third of the round nobody reads while improving
the search, so its totals stay a measurement of lines nobody here has looked at.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from rgt.profiles import search_gotchas  # noqa: E402


def score(positives: list[dict], negatives: list[dict]) -> dict:
    top1 = top3 = wrong = 0
    misses, false = [], []
    for entry in positives:
        ids = [hit.gotcha.id for hit in search_gotchas(entry["line"], limit=3)]
        expected = set(entry["expect"])
        top1 += bool(ids) and ids[0] in expected
        top3 += bool(expected & set(ids))
        if not expected & set(ids):
            misses.append((entry["line"][:90], entry["expect"], ids))
            wrong += bool(ids)
    for entry in negatives:
        hits = search_gotchas(entry["line"], limit=3)
        if hits:
            false.append((entry["line"][:90], [(h.gotcha.id, h.why) for h in hits]))
    return {"positives": len(positives), "top1": top1, "top3": top3, "wrong": wrong,
            "negatives": len(negatives), "false": len(false), "misses": misses,
            "false_lines": false}


def line(name: str, s: dict) -> str:
    p, n = s["positives"] or 1, s["negatives"] or 1
    return (f"{name:8} top-1 {s['top1']}/{s['positives']} ({s['top1'] / p:.1%})  "
            f"top-3 {s['top3']}/{s['positives']} ({s['top3'] / p:.1%})  "
            f"wrong-only {s['wrong']}  false answers {s['false']}/{s['negatives']} "
            f"({s['false'] / n:.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round", default=str(ROOT / "tests/knowledge/round14_corpus.yaml"))
    parser.add_argument("--show-dev", action="store_true",
                        help="list the dev part's misses and false answers")
    args = parser.parse_args()
    data = yaml.safe_load(Path(args.round).read_text(encoding="utf-8"))
    (pos_key,) = [k for k in data if k.endswith("_positive")]
    (neg_key,) = [k for k in data if k.endswith("_negative")]
    results = {}
    for part in ("dev", "holdout"):
        results[part] = score([e for e in data[pos_key] if e["part"] == part],
                              [e for e in data[neg_key] if e["part"] == part])
        print(line(part, results[part]))
    print(line("all", score(data[pos_key], data[neg_key])))
    if args.show_dev:
        for miss in results["dev"]["misses"]:
            print("dev miss:", miss)
        for false in results["dev"]["false_lines"]:
            print("dev false answer:", false)


if __name__ == "__main__":
    main()
