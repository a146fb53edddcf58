#!/usr/bin/python3
"""Prints the Markdown tables docs/benchmarks.md shows for the emulated WANs, from the JSON in DIR.

  bench/tables.py [DIR]      (default docs/benchmarks)

Reads the files bench/run_all.sh writes (any missing file is left out of its table):
  SCENARIO-K<K>.json             pccl alone with K connections (europe, transatlantic, mixed)
  SCENARIO-K<K>-and-gloo.json    pccl at the scenario's default K, then Gloo's ring and ring_chunked
  SCENARIO-quant-Q-zstdZ.json    Q in none fp16 bf16 int8, Z 0 (off) or 1 (europe, transatlantic)
  transatlantic-sync.json        the shared-state sync (pccl-bench --sync)
  encrypt-europe-V.json          V in plain aes chacha
Every row: the median time (of the slowest rank per iteration), the spread (fastest-slowest iteration
and the number of iterations; older files hold the median only), the share of the link bound
(2(N-1)/N * bytes / rate for an all-reduce, bytes / rate for the stale rank of a sync, with the rate
of the row's rate_mbit) and whether the emulator carried the row's timed operations faithfully.
Rows it did not are marked NOT faithful and their share of the bound is in parentheses.
Exit status: 0; 1 when some file could not be read (the others are still shown); 2 bad usage.
"""
import argparse
import glob
import json
import os
import re
import sys

SCENARIOS = ["europe", "transatlantic", "mixed"]
QUANT_SCENARIOS = ["europe", "transatlantic"]
QUANTS = ["none", "fp16", "bf16", "int8"]
ENCRYPT_RUNS = [("plain", "clear"), ("aes", "AES-256-GCM"), ("chacha", "ChaCha20-Poly1305")]


class Reader:
    """Loads the rows of the files in one directory; remembers which files could not be read."""

    def __init__(self, directory):
        self.dir = directory
        self.failed = []

    def rows(self, name):
        path = os.path.join(self.dir, name)
        if not os.path.isfile(path):
            return []
        try:
            with open(path, encoding="utf-8") as f:
                rows = json.load(f)["results"]
            return [r for r in rows if isinstance(r, dict)]
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"tables.py: cannot read {path}: {e}", file=sys.stderr)
            self.failed.append(path)
            return []

    def k_files(self, scenario, suffix):
        """(K, file name) of SCENARIO-K<K><suffix>.json, by K."""
        found = []
        pattern = re.compile(re.escape(scenario) + r"-K(\d+)" + re.escape(suffix) + r"\.json$")
        for path in glob.glob(os.path.join(glob.escape(self.dir), f"{scenario}-K*{suffix}.json")):
            m = pattern.match(os.path.basename(path))
            if m:
                found.append((int(m.group(1)), os.path.basename(path)))
        return sorted(found)


def fmt_time(t, unit_of=None, unit=True):
    """Seconds as the doc writes them; unit_of picks the unit (the larger end of a spread)."""
    u = t if unit_of is None else unit_of
    if u < 1e-3:
        text, name = f"{t * 1e6:.0f}", "µs"
    elif u < 1:
        text, name = f"{t * 1e3:.1f}", "ms"
    else:
        text, name = (f"{t:.1f}" if u >= 100 else f"{t:.2f}"), "s"
    return f"{text} {name}" if unit else text


def fmt_size(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return f"{b} B"


def spread(row):
    times = row.get("times_s")
    if isinstance(times, list) and times:
        if len(times) == 1:
            return "1 iteration, no spread"
        lo, hi = min(times), max(times)
        return f"{fmt_time(lo, hi, unit=False)}–{fmt_time(hi)} ({len(times)} iterations)"
    n = row.get("iterations", 1)
    return "1 iteration, no spread" if n == 1 else f"{n} iterations, spread not recorded"


def faithful(row):
    return row.get("emulator_faithful") is True


def emulator(row):
    v = row.get("emulator_faithful")
    if v is None:
        return "not recorded"
    if v is True:
        return "faithful"
    if row.get("emulator_why"):  # the emulator's own reasons
        return f"**NOT faithful** ({row['emulator_why']})"
    detail = []
    if row.get("emulator_drops"):
        detail.append(f"{row['emulator_drops']} drops")
    if row.get("emulator_late_p99_us") is not None:
        detail.append(f"p99 {fmt_time(row['emulator_late_p99_us'] / 1e6)} late")
    return "**NOT faithful**" + (f" ({', '.join(detail)})" if detail else "")


def link_bound(row):
    """Seconds the row's bytes need at its rate: through the ring, or (sync) into the stale rank."""
    rate = row.get("rate_mbit")
    if not rate:
        return None
    n = row.get("ranks", 1)
    factor = 1.0 if "sync_sources" in row or n < 2 else 2.0 * (n - 1) / n
    return factor * row.get("bytes", 0) * 8 / (rate * 1e6)


def pct_of_bound(row):
    bound, t = link_bound(row), row.get("time_s", 0)
    if bound is None or t <= 0:
        return "–"
    pct = f"{100 * bound / t:.0f} %"
    return pct if faithful(row) else f"({pct})"


def time_cell(row):
    cell = fmt_time(row.get("time_s", 0))
    if row.get("wrong", 0):
        cell += f" (**{row['wrong']} wrong**)"
    return cell


def network(row):
    parts = []
    if row.get("paths") or row.get("scenario") == "mixed":
        parts.append(f"regions from bench/{row.get('paths', 'mixed.paths')}")
    elif "rtt_ms" in row:
        parts.append(f"{row['rtt_ms']:g} ms RTT")
    if "loss_pct" in row:
        parts.append(f"{row['loss_pct']:g} % loss")
    if "rate_mbit" in row:
        parts.append(f"{row['rate_mbit']:g} Mbit/s")
    if "cc" in row:
        parts.append(str(row["cc"]))
    return ", ".join(parts)


def table(header, lines):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in line) + " |" for line in lines]
    return "\n".join(out)


def backend(row, with_gloo):
    if row.get("backend") == "pccl":
        return "pccl (same run as Gloo)" if with_gloo else "pccl"
    return f"{row.get('backend', '?')} {row.get('algorithm', '?')}"


def wan_table(reader):
    lines = []
    for scenario in SCENARIOS:
        rows = []  # (row, backend label, file)
        for _, name in reader.k_files(scenario, ""):
            rows += [(r, backend(r, False), name) for r in reader.rows(name)]
        for _, name in reader.k_files(scenario, "-and-gloo"):
            rows += [(r, backend(r, True), name) for r in reader.rows(name)]
        first = True
        for r, label, name in rows:
            lines.append([scenario if first else "", network(r) if first else "", fmt_size(r.get("bytes", 0)),
                          label, r.get("connections", "?"), time_cell(r), spread(r), pct_of_bound(r), emulator(r),
                          name[:-5]])
            first = False
    if not lines:
        return None
    return table(["scenario", "network", "size", "backend", "K", "time (median)", "spread (fastest–slowest)",
                  "% of link bound", "emulator", "file"], lines)


def quant_table(reader):
    lines = []
    for scenario in QUANT_SCENARIOS:
        baseline = None
        for q in QUANTS:
            for z in (0, 1):
                name = f"{scenario}-quant-{q}-zstd{z}.json"
                for r in reader.rows(name):
                    t = r.get("time_s", 0)
                    if q == "none" and z == 0 and baseline is None:
                        baseline = t
                    vs = f"{baseline / t:.2f}×" if baseline and t > 0 else "–"
                    if "max_abs_err" in r:
                        err = f"{r['max_abs_err']:.2e} ({r.get('err_bound', 0):.2e})"
                    else:
                        err = "exact (integers)"
                    same = r.get("bit_identical", r.get("wrong", 0) == 0)
                    compress = r.get("compress", z)
                    lines.append([scenario, fmt_size(r.get("bytes", 0)), r.get("connections", "?"), q,
                                  "off" if not compress else f"level {compress}", time_cell(r), spread(r), vs, err,
                                  "yes" if same else "**no**", emulator(r), name[:-5]])
    if not lines:
        return None
    return table(["scenario", "size", "K", "quant", "zstd", "time (median)", "spread (fastest–slowest)",
                  "vs float32", "error (bound)", "bit-identical", "emulator", "file"], lines)


def sync_table(reader):
    lines = []
    name = "transatlantic-sync.json"
    for r in reader.rows(name):
        rate = f"{r.get('algbw_gbps', 0) * 1000:.0f} MB/s"
        bound = link_bound(r)
        lines.append([network(r), fmt_size(r.get("bytes", 0)), r.get("sync_sources", "?"), r.get("connections", "?"),
                      time_cell(r), spread(r), rate, fmt_time(bound) if bound else "–", pct_of_bound(r), emulator(r),
                      name[:-5]])
    if not lines:
        return None
    return table(["network", "size", "sources", "K", "time (median)", "spread (fastest–slowest)",
                  "stale rank's download rate", "link bound (bytes / rate)", "% of it", "emulator", "file"], lines)


def encrypt_table(reader):
    lines = []
    for variant, cipher in ENCRYPT_RUNS:
        name = f"encrypt-europe-{variant}.json"
        for r in reader.rows(name):
            lines.append([variant, r.get("cipher", cipher), network(r), fmt_size(r.get("bytes", 0)),
                          r.get("connections", "?"), time_cell(r), spread(r), pct_of_bound(r), emulator(r),
                          name[:-5]])
    if not lines:
        return None
    return table(["run", "cipher", "network", "size", "K", "time (median)", "spread (fastest–slowest)",
                  "% of link bound", "emulator", "file"], lines)


def main():
    parser = argparse.ArgumentParser(
        prog="tables.py", usage="bench/tables.py [-h] [DIR]",
        description="Markdown tables of the emulated-WAN benchmark rows in DIR (default docs/benchmarks): per "
                    "scenario pccl per K and Gloo, quantization and zstd, the transatlantic --sync row and "
                    "encryption on europe; median time, spread over iterations, share of the link bound and the "
                    "emulator's verdict per row. File names: as bench/run_all.sh writes them.")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("dir", metavar="DIR", nargs="?", default=os.path.join(root, "docs", "benchmarks"),
                        help="directory of the JSON files (default docs/benchmarks)")
    args = parser.parse_args()
    if not os.path.isdir(args.dir):
        print(f"tables.py: {args.dir} is not a directory", file=sys.stderr)
        return 2
    shown_dir = os.path.abspath(args.dir)
    shown_dir = os.path.relpath(shown_dir, root) if shown_dir.startswith(root + os.sep) else args.dir
    reader = Reader(args.dir)
    sections = [
        ("Emulated WANs: pccl per K, and Gloo in the same run", wan_table(reader)),
        ("Quantization and zstd on the emulated WANs (pccl)", quant_table(reader)),
        ("Shared-state sync on the transatlantic WAN (pccl-bench --sync)", sync_table(reader)),
        ("Encryption on the europe WAN (pccl)", encrypt_table(reader)),
    ]
    print(f"<!-- bench/tables.py {shown_dir} -->")
    print("time: median over iterations of the slowest rank's time; spread: its fastest and slowest iteration; "
          "link bound: 2(N−1)/N · bytes / rate (sync: bytes / rate into the stale rank). "
          "Rows the emulator did not carry faithfully are marked **NOT faithful**, their share of the bound in "
          "parentheses: do not draw conclusions from them.")
    shown = 0
    for title, text in sections:
        if text is None:
            print(f"tables.py: no files for \"{title}\" in {args.dir}", file=sys.stderr)
            continue
        print(f"\n### {title}\n\n{text}")
        shown += 1
    if shown == 0:
        print(f"tables.py: no benchmark files in {args.dir}", file=sys.stderr)
    return 1 if reader.failed else 0


if __name__ == "__main__":
    sys.exit(main())
