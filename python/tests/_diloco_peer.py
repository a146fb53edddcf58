"""A replica of test_diloco.py: trains a small MLP with pccl.diloco on synthetic regression data, for each
mode of --modes in turn (one communicator, a new DiLoCo per mode), and prints one line per event:

    start MODE round=B outer=S theta=HASH world=W          after the DiLoCo was created (a joiner: the
                                                          group's state it received)
    round MODE B outer=S theta=HASH model=HASH world=W eval=LOSS   after every outer boundary
    stalled                                                --stall-at: stops calling pccl (to be killed)
    paused                                                 --pause-at: waits for a line on stdin
    final MODE model=HASH eval=LOSS stats={json}           after flush()
    loaded MODE round=B outer=S theta=HASH                 --load: after load_state_dict (before training)
    saved MODE round=B outer=S theta=HASH                  --save: after flush(), the checkpoint written

Modes: blocking, int8 (blocking with int8 on the wire), delayed, eager; Streaming DiLoCo: stream1 (one
fragment, no delay, through the fragment path: equal to blocking bit for bit), stream0 (2 fragments, no
delay), stream (2 fragments, delay 1, alpha 0.5), stream-fp4 (the same, strided, fp4 on the wire), and
stream3 (3 fragments: another schedule). The training loop has no pccl error handling at all: DiLoCo
retries and admits inside step(). Exits 0 when every mode finished.

    _diloco_peer.py --master HOST:PORT --index I --modes blocking,eager --rounds R -H H [--world W]
                    [--late] [--stall-at B] [--pause-at B] [--save FILE] [--load FILE] [--same-data]
"""

import argparse
import hashlib
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

import pccl  # noqa: E402
import pccl.diloco  # noqa: E402

# mode: (quant, overlap, outer_lr, outer_momentum). The delayed mode applies each round's average one round
# late, to a model that has moved on: on this small problem it diverges with outer momentum 0.5 or more.
MODES = {"blocking": (None, False, 0.7, 0.5), "int8": ("int8", False, 0.7, 0.5), "delayed": (None, "delayed", 0.5, 0.0),
         "eager": (None, "eager", 0.7, 0.5), "stream1": (None, False, 0.7, 0.5), "stream0": (None, False, 0.7, 0.5),
         "stream": (None, False, 0.7, 0.5), "stream-fp4": ("fp4", False, 0.7, 0.5), "stream3": (None, False, 0.7, 0.5)}
FRAGMENTS = {"stream1": dict(fragments=1, _streaming=True), "stream0": dict(fragments=2),
             "stream": dict(fragments=2, fragment_delay=1, fragment_alpha=0.5),
             "stream-fp4": dict(fragments=2, fragment_delay=1, fragment_alpha=0.5, fragment_split="strided"),
             "stream3": dict(fragments=3)}


def digest(t):
    return hashlib.sha256(t.detach().contiguous().numpy().tobytes()).hexdigest()[:16]


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def batch(gen, w_true, n=32):
    x = torch.randn(n, 16, generator=gen)
    return x, torch.tanh(x @ w_true)


def run_mode(args, comm, mode, m):
    quant, overlap, outer_lr, outer_momentum = MODES[mode]
    torch.manual_seed(99 if args.late else 0)  # a joiner's own init differs: it must adopt the group's
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    inner = torch.optim.AdamW(model.parameters(), lr=0.01)
    diloco = pccl.diloco.DiLoCo(model, inner, comm, inner_steps=args.H, outer_lr=outer_lr,
                                outer_momentum=outer_momentum, quant=quant, overlap=overlap, **FRAGMENTS.get(mode, {}))
    if not args.late:
        diloco.wait_for_world(args.world, timeout_s=40)
    if args.load:
        diloco.load_state_dict(torch.load(args.load))
        print("loaded %s round=%d outer=%d theta=%s" % (mode, diloco.round, diloco.outer_step,
                                                      digest(diloco.outer_parameters)), flush=True)
    w_true = torch.linspace(-1, 1, 16).unsqueeze(1)
    x_eval, y_eval = batch(torch.Generator().manual_seed(12345), w_true, 256)

    def evaluate():
        with torch.no_grad():
            return torch.nn.functional.mse_loss(model(x_eval), y_eval).item()

    print("start %s round=%d outer=%d theta=%s world=%d eval=%.6f" % (
        mode, diloco.round, diloco.outer_step, digest(diloco.outer_parameters), comm.group_world_size,
        evaluate()), flush=True)
    gen = torch.Generator().manual_seed(1000 * args.index + (0 if args.same_data else m))
    last = diloco.round
    while diloco.round < args.rounds:
        x, y = batch(gen, w_true)
        torch.nn.functional.mse_loss(model(x), y).backward()
        diloco.step()
        inner.zero_grad()
        if diloco.round == last:
            continue
        last = diloco.round
        print("round %s %d outer=%d theta=%s model=%s world=%d eval=%.6f" % (
            mode, last, diloco.outer_step, digest(diloco.outer_parameters), digest(flat(model)),
            diloco.stats().world_size, evaluate()), flush=True)
        if last == args.stall_at:
            print("stalled", flush=True)
            threading.Event().wait()  # the test kills this process
        if last == args.pause_at:
            print("paused", flush=True)
            sys.stdin.readline()
    diloco.flush()
    if args.save:
        torch.save(diloco.state_dict(), args.save)
        print("saved %s round=%d outer=%d theta=%s" % (mode, diloco.round, diloco.outer_step,
                                                     digest(diloco.outer_parameters)), flush=True)
    print("final %s model=%s eval=%.6f stats=%s" % (mode, digest(flat(model)), evaluate(),
                                                    json.dumps(diloco.stats().as_dict())), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--master", required=True)
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--modes", default="blocking")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("-H", type=int, default=5)
    parser.add_argument("--world", type=int, default=3)
    parser.add_argument("--late", action="store_true")
    parser.add_argument("--stall-at", type=int, default=-1)
    parser.add_argument("--pause-at", type=int, default=-1)
    parser.add_argument("--save", help="after the last round: torch.save(diloco.state_dict(), FILE)")
    parser.add_argument("--load", help="before training: diloco.load_state_dict(torch.load(FILE))")
    parser.add_argument("--same-data", action="store_true", help="every mode draws the same batches")
    args = parser.parse_args()
    torch.set_num_threads(1)
    comm = pccl.Communicator(args.master, listen_address="127.0.0.1:0", heartbeat_interval_ms=200,
                             peer_timeout_ms=5000, connect_timeout_ms=30000, op_timeout_ms=30000)
    try:
        for m, mode in enumerate(args.modes.split(",")):
            run_mode(args, comm, mode, m)
        return 0
    finally:
        comm.close()


if __name__ == "__main__":
    sys.exit(main())
