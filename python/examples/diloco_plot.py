#!/usr/bin/env python3
"""The plot of diloco_train.py: held-out loss against inner steps and against bytes sent by worker 0,
one line per run (DiLoCo variants and DDP), the kill and the replacement's join marked. Needs matplotlib
(Debian: python3-matplotlib).

    python3 python/examples/diloco_plot.py docs/benchmarks/diloco_python.json docs/benchmarks/diloco_python.png
"""

import json
import sys


def plot(record, path):
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    setup = record["setup"]
    fig, (ax_steps, ax_bytes) = plt.subplots(1, 2, figsize=(12, 4.5))
    for run in record["runs"]:
        curve = run["curve"]
        steps = [p["inner_steps"] for p in curve]
        loss = [p["loss"] for p in curve]
        sent = [max(p["tx_bytes"], 1) for p in curve]
        label = run["variant"] if run["variant"] == "ddp" else "DiLoCo " + run["variant"]
        if run["variant"] == "ddp":
            label = "DDP (gloo, every step)"
        line, = ax_steps.plot(steps, loss, label=label, linewidth=1.4)
        shown = [(b, v) for b, v, p in zip(sent, loss, curve) if p["tx_bytes"] > 0]  # log axis: skip the start
        ax_bytes.plot([b for b, _ in shown], [v for _, v in shown], color=line.get_color(), label=label, linewidth=1.4)
    kill = setup.get("kill_at_round")
    if kill:
        ax_steps.axvline(kill * setup["H"], color="grey", linestyle=":", linewidth=1)
        ax_steps.text(kill * setup["H"], ax_steps.get_ylim()[1], " worker %d killed" % (setup["workers"] - 1),
                      va="top", fontsize=8, color="grey")
    ax_steps.set_xlabel("inner steps per worker")
    ax_steps.set_ylabel("held-out loss of the outer parameters (DDP: the model)")
    ax_steps.set_title("loss against steps")
    ax_bytes.set_xscale("log")
    ax_bytes.set_xlabel("bytes sent by worker 0 (DDP: ring all-reduce formula)")
    ax_bytes.set_title("loss against bytes sent")
    for ax in (ax_steps, ax_bytes):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("pccl.diloco vs DDP: %d processes, MLP of %d parameters, H=%d, %d rounds (%s)"
                 % (setup["workers"], setup["parameters"], setup["H"], setup["rounds"], record["date"]), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    with open(sys.argv[1]) as f:
        plot(json.load(f), sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
