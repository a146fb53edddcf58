#!/usr/bin/python3
"""Plots a run.sh directory: held-out loss per outer step, and bytes each worker sent.

usage: /usr/bin/python3 plot.py RUN_DIR OUT.png
"""
import argparse
import csv
import os


def read(run_dir, name, worker=0):
    path = os.path.join(run_dir, "%s-w%d.csv" % (name, worker))
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return list(csv.DictReader(f))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", help="the OUT_DIR of examples/diloco/run.sh (its *-w<N>.csv files)")
    parser.add_argument("out", help="the PNG to write")
    args = parser.parse_args()
    run_dir, out = args.run_dir, args.out
    # Imported after the arguments are checked: --help works without matplotlib.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = {
        "DiLoCo 4 workers, float32": read(run_dir, "float32"),
        "DiLoCo 4 workers, int8": read(run_dir, "int8"),
        "1 worker (no communication)": read(run_dir, "baseline"),
        "DiLoCo 4 workers, one killed + replaced": read(run_dir, "elastic"),
    }
    fig, (ax_loss, ax_bytes) = plt.subplots(1, 2, figsize=(12, 4.5))
    for label, rows in runs.items():
        if rows:
            ax_loss.plot([int(r["outer_step"]) for r in rows], [float(r["loss"]) for r in rows],
                         marker="o", label=label)
    # The late joiner's first row is the step it joined at (the state it received): it lies on the curve
    # of the workers that were there, as do all its later rows (byte-identical weights).
    joiner = read(run_dir, "elastic", 3)
    if joiner:
        ax_loss.plot([int(r["outer_step"]) for r in joiner], [float(r["loss"]) for r in joiner], marker="x",
                     markersize=10, linestyle="none", color="black", label="its replacement (joined late), worker 3")
    ax_loss.set_xlabel("outer step (H inner steps each)")
    ax_loss.set_ylabel("held-out loss (nats/byte), worker 0")
    ax_loss.set_ylim(top=min(4.0, ax_loss.get_ylim()[1]))
    ax_loss.legend()
    ax_loss.grid(alpha=0.3)

    for label, name, column in [
        ("DiLoCo float32 (sent)", "float32", "bytes_tx"),
        ("DiLoCo int8 (sent)", "int8", "bytes_tx"),
        ("all-reduce every inner step, float32", "float32", "bytes_allreduce_every_step"),
    ]:
        rows = read(run_dir, name)
        if rows:
            ax_bytes.plot([int(r["outer_step"]) for r in rows], [int(r[column]) / 2**20 for r in rows],
                          marker="o", label=label)
    ax_bytes.set_yscale("symlog")
    ax_bytes.set_xlabel("outer step")
    ax_bytes.set_ylabel("MiB sent by worker 0 (cumulative)")
    ax_bytes.legend()
    ax_bytes.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote", out)


if __name__ == "__main__":
    main()
