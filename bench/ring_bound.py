#!/usr/bin/python3
"""The link bound of every ring of a pccl-wanem paths file, by brute force (bench/skewed.sh).

A ring's bound is its slowest link; link s -> d can carry at most min(s's uplink, d's downlink, the path's
own rate). Prints one JSON object: the best ring and its bound, the join-order ring's (0 -> 1 -> ... -> N-1)
bound, and how many rings there are; rates in Mbit/s.

    bench/ring_bound.py --paths FILE --rate-mbit R --ranks N
"""
import argparse
import itertools
import json
import sys


def parse(path, ranks, rate):
    region = {}
    up = [rate] * ranks
    down = [rate] * ranks
    path_rate = {}
    lines = []
    with open(path) as f:
        for number, raw in enumerate(f, 1):
            words = raw.split("#", 1)[0].split()
            if not words:
                continue
            if words[0] == "rank":
                region[int(words[1])] = words[2]
            else:
                lines.append((number, words))

    def members(name):
        if name.isdigit():
            return [int(name)]
        return [r for r, g in region.items() if g == name]

    def rate_of(keys):
        for k in keys:
            if k.startswith("rate="):
                return float(k[len("rate="):])
        return None

    for number, words in lines:
        kind = words[0]
        if kind == "path":
            if len(words) >= 4 and words[2] == "->":
                pairs = [(a, b) for a in members(words[1]) for b in members(words[3])]
                keys = words[4:]
            else:
                pairs = [(a, b) for a in members(words[1]) for b in members(words[2])]
                pairs += [(b, a) for a, b in pairs]
                keys = words[3:]
            r = rate_of(keys)
            for a, b in pairs:
                if a != b:
                    if r is not None:
                        path_rate[(a, b)] = r
                    elif (a, b) in path_rate and any(k.startswith("rate") for k in keys):
                        del path_rate[(a, b)]
        elif kind in ("link", "uplink", "downlink"):
            r = rate_of(words[2:])
            if r is not None:
                for i in members(words[1]):
                    if kind != "downlink":
                        up[i] = r
                    if kind != "uplink":
                        down[i] = r
        elif kind == "rate":
            for i in members(words[1]):
                up[i] = down[i] = float(words[2])
        elif kind in ("delay", "loss"):
            pass
        else:
            sys.exit("%s:%d: unknown line %r" % (path, number, kind))
    inf = float("inf")

    def cap(a, b):
        values = [v for v in (up[a], down[b], path_rate.get((a, b), inf)) if v > 0]
        return min(values) if values else inf

    return cap


def bound(cap, ring):
    return min(cap(ring[i], ring[(i + 1) % len(ring)]) for i in range(len(ring)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paths", required=True)
    ap.add_argument("--rate-mbit", type=float, required=True)
    ap.add_argument("--ranks", type=int, required=True)
    a = ap.parse_args()
    cap = parse(a.paths, a.ranks, a.rate_mbit)
    best, best_ring, rings = -1.0, None, 0
    for rest in itertools.permutations(range(1, a.ranks)):
        ring = (0,) + rest
        rings += 1
        b = bound(cap, ring)
        if b > best:
            best, best_ring = b, ring
    join = bound(cap, tuple(range(a.ranks)))
    print(json.dumps({"best_ring_bound_mbit": best, "best_ring": list(best_ring),
                      "join_order_bound_mbit": join, "rings": rings}))


if __name__ == "__main__":
    main()
