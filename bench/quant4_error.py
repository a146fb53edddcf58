#!/usr/bin/python3
"""Which 4-bit format to put on the wire (issue 36): relative RMS error of each candidate at the same
bytes (4.5 bits an element: a 32-bit scale per 64 elements, or two per 128), on data shaped like
pseudo-gradients (heavy tails) and on a few others. numpy only; prints a table, or --json FILE.

  int4 absmax/64    q = round(x / s), s = amax / 7, q in -7..7            (36 bytes per 64 elements)
  int4 min-max/128  q = round((x - lo) / s), s = (max - min) / 15           (72 bytes per 128)
  e2m1/64 (fp4)     nearest of +-{0, .5, 1, 1.5, 2, 3, 4, 6} * s, s = amax / 6 (36 bytes per 64)
  MXFP4/32          e2m1 with a power-of-two scale (E8M0) per 32 elements   (17 bytes per 32)

pccl ships e2m1/64 as `fp4` (docs/algorithms.md section 7, "fp4"); the MX format is listed for
comparison only (slightly fewer bytes, more error).
"""
import argparse
import json
import sys

import numpy as np

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6.0])


def absmax_int4(x, b=64):
    X = x.reshape(-1, b)
    s = np.abs(X).max(1, keepdims=True) / 7
    s[s == 0] = 1
    return (np.clip(np.round(X / s), -7, 7) * s).ravel()


def minmax_int4(x, b=128):
    X = x.reshape(-1, b)
    lo = X.min(1, keepdims=True)
    s = (X.max(1, keepdims=True) - lo) / 15
    s[s == 0] = 1
    return (lo + np.clip(np.round((X - lo) / s), 0, 15) * s).ravel()


def nearest_e2m1(y):
    return E2M1[np.abs(y[..., None] - E2M1).argmin(-1)]


def e2m1(x, b=64):
    X = x.reshape(-1, b)
    s = np.abs(X).max(1, keepdims=True) / 6
    s[s == 0] = 1
    return (np.sign(X) * nearest_e2m1(np.abs(X) / s) * s).ravel()


def mxfp4(x, b=32):
    X = x.reshape(-1, b)
    a = np.abs(X).max(1, keepdims=True)
    a[a == 0] = 1
    s = 2.0 ** (np.floor(np.log2(a)) - 2)
    return (np.sign(X) * nearest_e2m1(np.minimum(np.abs(X) / s, 6)) * s).ravel()


FORMATS = [("int4 absmax/64", absmax_int4, 36 / 64), ("int4 min-max/128", minmax_int4, 72 / 128),
           ("e2m1/64 (fp4)", e2m1, 36 / 64), ("MXFP4/32", mxfp4, 17 / 32)]


def data(n, rng):
    return [("gaussian", rng.standard_normal(n)), ("laplace", rng.laplace(size=n)),
            ("student-t(3)", rng.standard_t(3, size=n)), ("gaussian + 3", rng.standard_normal(n) + 3),
            ("10 % nonzero", rng.standard_normal(n) * (rng.random(n) < 0.1))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--elements", type=int, default=1 << 20, help="elements per distribution (a multiple of 128)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="also write the table here")
    args = ap.parse_args()
    if args.elements <= 0 or args.elements % 128:
        ap.error("--elements must be a positive multiple of 128")
    rng = np.random.default_rng(args.seed)
    rows = []
    print("%-14s" % "data" + "".join("%18s" % name for name, _, _ in FORMATS))
    print("%-14s" % "bytes/element" + "".join("%18.4f" % b for _, _, b in FORMATS))
    for name, x in data(args.elements, rng):
        x = x.astype(np.float32).astype(np.float64)
        errs = [float(np.sqrt(np.mean((f(x) - x) ** 2) / np.mean(x ** 2))) for _, f, _ in FORMATS]
        rows.append({"data": name, "relative_rms_error": dict(zip([f[0] for f in FORMATS], errs))})
        print("%-14s" % name + "".join("%18.4f" % e for e in errs))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": " ".join(["bench/quant4_error.py"] + sys.argv[1:]), "elements": args.elements,
                       "seed": args.seed, "bytes_per_element": {n: b for n, _, b in FORMATS}, "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
