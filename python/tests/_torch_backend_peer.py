"""One torch rank of the pccl backend's tests (test_torch_backend*.py start them as processes):
``_torch_backend_peer.py SCENARIO``, env:// rendezvous from MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE.

Scenarios: ``collectives`` (every collective x dtype x op against a gloo group of the same processes,
async works, argument errors), ``ddp`` (DistributedDataParallel losses through pccl and through gloo),
``quant`` (PCCL_TORCH_QUANT from the environment), ``fault`` (rank 2 stops and is SIGKILLed by the
test; the others catch the documented exception, update the topology and go on). Prints ``DONE`` at the
end; a failure prints its traceback and exits 1.
"""

import datetime
import os
import sys
import traceback

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pccl  # noqa: E402
import pccl.torch  # noqa: E402

R = dist.ReduceOp
RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("T_TIMEOUT", "60")))
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16,
          torch.int32, torch.int64, torch.bool, torch.complex64)
# dtypes gloo lacks are reduced by gloo in a wider type; bool as uint8 (logical or = max, and = min).
GLOO_AS = {torch.bfloat16: torch.float32, torch.int16: torch.int32, torch.bool: torch.uint8}


def say(*words):
    print(*words, flush=True)


def values(rank, n, dtype, seed=0):
    """Small integers (exact in every dtype, products fit int8), signed where the dtype is."""
    v = (torch.arange(n, dtype=torch.int64) * (rank + 1 + seed) + rank + seed) % 5
    if dtype == torch.bool:
        return v % 2 == 0
    if dtype == torch.uint8:
        return (v + 1).to(dtype)
    if dtype.is_complex:
        return torch.complex(v.float() - 2, v.float()).to(dtype)
    return (v - 2).to(dtype)


def ops_for(dtype):
    if dtype == torch.bool:
        return (R.SUM, R.PRODUCT, R.MIN, R.MAX)
    if dtype.is_complex:
        return (R.SUM, R.AVG)
    return (R.SUM, R.AVG, R.PRODUCT, R.MIN, R.MAX)


def gloo_reduce(x, op, gloo):
    """The reference: gloo's all-reduce of x (a copy, in a dtype gloo has); AVG as gloo's SUM / world
    (integers: the exact sum, rounded toward zero, as pccl documents)."""
    wide = GLOO_AS.get(x.dtype, x.dtype)
    if op == R.AVG and not x.is_floating_point() and not x.is_complex():
        wide = torch.int64
    y = x.to(wide).clone()
    gop = op
    if x.dtype == torch.bool:
        gop = {R.SUM: R.MAX, R.PRODUCT: R.MIN}.get(op, op)
    if op == R.AVG:
        gop = R.SUM
    dist.all_reduce(y, op=gop, group=gloo)
    if op == R.AVG:
        y = torch.div(y, WORLD, rounding_mode="trunc") if wide == torch.int64 else y / WORLD
    return y.to(x.dtype)


def same(got, want, what, approx=False):
    if approx:
        ok = torch.allclose(got.to(torch.complex128 if got.is_complex() else torch.float64),
                            want.to(torch.complex128 if want.is_complex() else torch.float64), rtol=1e-2, atol=1e-2)
    else:
        ok = torch.equal(got, want)
    if not ok:
        raise AssertionError("%s: got %s, want %s" % (what, got[:8].tolist(), want[:8].tolist()))


def expect_error(cls, words, fn):
    try:
        fn()
    except cls as e:
        if not isinstance(e, RuntimeError) or not all(w in str(e) for w in words):
            raise AssertionError("%r is not a RuntimeError naming %s" % (e, words)) from e
        return e
    raise AssertionError("no %s raised" % cls.__name__)


def scenario_collectives():
    dist.init_process_group("pccl", timeout=TIMEOUT)
    gloo = dist.new_group(backend="gloo", timeout=TIMEOUT)
    n = 1003
    for k, dtype in enumerate(DTYPES):
        for op in ops_for(dtype):
            x = values(RANK, n, dtype, seed=k)
            want = gloo_reduce(x, op, gloo)
            dist.all_reduce(x, op=op)
            same(x, want, "all_reduce %s %s" % (dtype, op), approx=op == R.AVG and x.is_floating_point())
        root = k % WORLD
        x = values(RANK, n, dtype, seed=k)
        dist.broadcast(x, root)
        same(x, values(root, n, dtype, seed=k), "broadcast %s" % dtype)
        outs = [torch.zeros(n, dtype=dtype) for _ in range(WORLD)]
        dist.all_gather(outs, values(RANK, n, dtype, seed=k))
        for r in range(WORLD):
            same(outs[r], values(r, n, dtype, seed=k), "all_gather %s block %d" % (dtype, r))
        flat = torch.zeros(WORLD * n, dtype=dtype)
        dist.all_gather_into_tensor(flat, values(RANK, n, dtype, seed=k))
        same(flat, torch.cat([values(r, n, dtype, seed=k) for r in range(WORLD)]), "all_gather_into_tensor %s" % dtype)
        for op in ops_for(dtype):
            if op == R.PRODUCT and not dtype.is_floating_point:
                continue  # a product of 3 x 5 values overflows int8 differently in a wider reference
            blocks = [values(RANK, n, dtype, seed=k + i) for i in range(WORLD)]
            want = gloo_reduce(torch.cat(blocks), op, gloo)[RANK * n:(RANK + 1) * n]
            approx = op == R.AVG and dtype.is_floating_point
            out = torch.zeros(n, dtype=dtype)
            dist.reduce_scatter(out, blocks, op=op)
            same(out, want, "reduce_scatter %s %s" % (dtype, op), approx)
            out = torch.zeros(n, dtype=dtype)
            dist.reduce_scatter_tensor(out, torch.cat(blocks), op=op)
            same(out, want, "reduce_scatter_tensor %s %s" % (dtype, op), approx)
    say("OK dtypes")

    # reduce, gather, scatter; non-contiguous tensors (staged and copied back).
    x = values(RANK, 64, torch.float32)
    summed = gloo_reduce(x, R.SUM, gloo)  # collective: every rank
    want = summed if RANK == 1 else x.clone()
    dist.reduce(x, dst=1)
    same(x, want, "reduce")
    outs = [torch.zeros(64) for _ in range(WORLD)] if RANK == 0 else None
    dist.gather(values(RANK, 64, torch.float32), outs, dst=0)
    if RANK == 0:
        for r in range(WORLD):
            same(outs[r], values(r, 64, torch.float32), "gather block %d" % r)
    out = torch.zeros(64)
    dist.scatter(out, [values(r, 64, torch.float32, 7) for r in range(WORLD)] if RANK == 2 else None, src=2)
    same(out, values(RANK, 64, torch.float32, 7), "scatter")
    m = values(RANK, 200, torch.float64).reshape(10, 20)
    t = m.t()  # not contiguous
    ref = gloo_reduce(t.contiguous(), R.MAX, gloo)
    dist.all_reduce(t, op=R.MAX)
    same(t.contiguous(), ref, "all_reduce of a transposed tensor")
    same(m, ref.t(), "the transposed tensor's base")
    strided = [torch.zeros(8, 2)[:, 0] for _ in range(WORLD)]
    dist.all_gather(strided, values(RANK, 8, torch.float32))
    for r in range(WORLD):
        same(strided[r], values(r, 8, torch.float32), "all_gather into strided outputs")
    dist.barrier()
    say("OK reduce gather scatter strided barrier")

    # Async works: several in flight at once, futures, is_completed.
    xs = [values(RANK, 5000, torch.float32, s) for s in range(4)]
    wants = [gloo_reduce(x, R.SUM, gloo) for x in xs]
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    bw = dist.broadcast(b := values(RANK, 10, torch.int64), 0, async_op=True)
    fut = works[0].get_future().then(lambda f: f.value()[0].sum().item())
    for w in works + [bw]:
        assert w.wait() is True
        assert w.is_completed() and w.is_success()
    for x, want in zip(xs, wants):
        same(x, want, "async all_reduce")
    same(b, values(0, 10, torch.int64), "async broadcast")
    assert fut.wait() == wants[0].sum().item()
    assert dist.barrier(async_op=True).wait()
    say("OK async")

    # A group with int8 quantization and compression (pg_options).
    q = dist.new_group(backend="pccl", timeout=TIMEOUT, pg_options=pccl.torch.Options(quant="int8", compress=3))
    g = torch.Generator().manual_seed(RANK)
    x = torch.randn(4096, generator=g)
    exact = gloo_reduce(x, R.SUM, gloo)
    before = pccl.torch.communicator(q).stats().tx_bytes
    dist.all_reduce(x, group=q)
    sent = pccl.torch.communicator(q).stats().tx_bytes - before
    assert not torch.equal(x, exact) and torch.allclose(x, exact, atol=0.1), (x[:4], exact[:4])
    assert sent < 4096 * 4 * 2 * (WORLD - 1) / WORLD / 2, sent  # int8 on the wire: well under float32's bytes
    say("OK quant", sent)

    # fp4 on the wire (pg_options): about 7x fewer bytes than float32, the same result on every rank.
    q4 = dist.new_group(backend="pccl", timeout=TIMEOUT, pg_options=pccl.torch.Options(quant="fp4"))
    x = torch.randn(4096, generator=g)
    exact = gloo_reduce(x, R.SUM, gloo)
    before = pccl.torch.communicator(q4).stats().tx_bytes
    dist.all_reduce(x, group=q4)
    sent = pccl.torch.communicator(q4).stats().tx_bytes - before
    assert torch.allclose(x, exact, atol=WORLD * 4.0 / 6), (x[:4], exact[:4])
    # 16 KiB goes by gather: every input to the other WORLD - 1 ranks, in float32 4096 * 4 bytes each.
    assert sent * 6.5 < 4096 * 4 * (WORLD - 1), sent
    copies = [torch.zeros_like(x) for _ in range(WORLD)]
    dist.all_gather(copies, x, group=gloo)
    assert all(torch.equal(c, copies[0]) for c in copies), "fp4 results differ between ranks"
    say("OK fp4", sent)

    # Bad arguments: clear errors, the group stays usable.
    x = torch.ones(4)
    expect_error(pccl.InvalidArgumentError, ["pcclInvalidArgument", "BAND"], lambda: dist.all_reduce(x, op=R.BAND))
    expect_error(ValueError, ["AVG", "bool"], lambda: dist.all_reduce(torch.ones(3, dtype=torch.bool), op=R.AVG))
    expect_error(RuntimeError, ["complex"],  # torch refuses this before the backend
                 lambda: dist.all_reduce(torch.ones(3, dtype=torch.complex64), op=R.MAX))
    expect_error(pccl.InvalidArgumentError, ["2 output tensors", "%d ranks" % WORLD],
                 lambda: dist.all_gather([torch.zeros(4), torch.zeros(4)], x))
    expect_error(pccl.InvalidArgumentError, ["every block"],
                 lambda: dist.all_gather([torch.zeros(5) for _ in range(WORLD)], x))
    expect_error(pccl.InvalidArgumentError, ["sparse"], lambda: dist.all_reduce(torch.ones(3).to_sparse()))
    expect_error(pccl.InvalidArgumentError, ["dtype"], lambda: dist.all_reduce(torch.quantize_per_tensor(
        torch.ones(3), 0.1, 0, torch.quint8)))
    expect_error(pccl.UnsupportedError, ["send"], lambda: dist.send(x, (RANK + 1) % WORLD))
    expect_error(pccl.InvalidArgumentError, ["output", "elements"],
                 lambda: dist.all_gather_into_tensor(torch.zeros(3), x))
    y = torch.full((4,), float(RANK))
    dist.all_reduce(y)
    same(y, torch.full((4,), float(sum(range(WORLD)))), "all_reduce after the errors")
    say("OK errors")


def scenario_ddp():
    dist.init_process_group("pccl", timeout=TIMEOUT)
    gloo = dist.new_group(backend="gloo", timeout=TIMEOUT)
    losses = {}
    for name, group in (("pccl", None), ("gloo", gloo), ("hook", None)):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
        ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group, bucket_cap_mb=0.001)
        if name == "hook":
            ddp.register_comm_hook(None, pccl.torch.allreduce_avg_hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
        g = torch.Generator().manual_seed(100 + RANK)  # each rank its own data
        losses[name] = []
        for _ in range(6):
            x, y = torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            loss.backward()
            opt.step()
            losses[name].append(loss.item())
        params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        losses[name + "_params"] = params
    say("LOSSES", losses["pccl"], losses["gloo"])
    for a, b in zip(losses["pccl"], losses["gloo"]):
        assert abs(a - b) <= 1e-6 * max(1.0, abs(b)), (losses["pccl"], losses["gloo"])
    assert torch.allclose(losses["pccl_params"], losses["gloo_params"], rtol=1e-5, atol=1e-6)
    for a, b in zip(losses["hook"], losses["gloo"]):  # pccl's AVG: the mean rounded once, not sum of x/3
        assert abs(a - b) <= 1e-5 * max(1.0, abs(b)), (losses["hook"], losses["gloo"])
    assert torch.allclose(losses["hook_params"], losses["gloo_params"], rtol=1e-4, atol=1e-5)
    say("OK ddp")


def scenario_quant():
    dist.init_process_group("pccl", timeout=TIMEOUT)
    pg = pccl.torch.process_group()
    assert pg.options.quant == "int8" and pg.options.compress == 1, pg.options
    x = torch.randn(4096, generator=torch.Generator().manual_seed(RANK))
    want = x.clone()
    gloo = dist.new_group(backend="gloo", timeout=TIMEOUT)
    dist.all_reduce(want, group=gloo)
    dist.all_reduce(x)
    assert not torch.equal(x, want) and torch.allclose(x, want, atol=0.1)
    i = torch.arange(10) + RANK  # integers go exact
    dist.all_reduce(i)
    assert torch.equal(i, torch.arange(10) * WORLD + sum(range(WORLD)))
    say("OK quant env")


def scenario_fault():
    dist.init_process_group("pccl", timeout=TIMEOUT)
    step = 0
    while step < 6:
        t = torch.full((100000,), float(RANK + 1))
        try:
            dist.all_reduce(t)
        except pccl.PcclError as e:
            assert isinstance(e, RuntimeError) and e.retryable, repr(e)
            say("CAUGHT", type(e).__name__, str(e).split(":")[0])
            while True:
                try:
                    pccl.torch.update_topology()
                    break
                except pccl.PcclError as again:
                    if not again.retryable:
                        raise
            say("RECOVERED", pccl.torch.live_world_size(), pccl.torch.live_ranks(), pccl.torch.live_rank(),
                dist.get_world_size())
            continue  # retry the step: t still holds this rank's input
        live = pccl.torch.live_ranks()
        assert torch.equal(t, torch.full_like(t, float(sum(r + 1 for r in live)))), (t[:3], live)
        say("STEP", step, len(live))
        step += 1
        if step == 3 and RANK == 2:
            say("PAUSED")
            sys.stdin.readline()  # the test SIGKILLs this rank here
    live = pccl.torch.live_ranks()
    outs = [torch.zeros(2) for _ in live]
    dist.all_gather(outs, torch.full((2,), float(RANK)))
    assert [o[0].item() for o in outs] == [float(r) for r in live], outs
    b = torch.full((3,), float(RANK))
    dist.broadcast(b, 1)
    assert (b == 1).all()
    expect_error(pccl.InvalidArgumentError, ["rank 2 is not in the ring"], lambda: dist.broadcast(b, 2))
    dist.barrier()
    say("OK fault")


if __name__ == "__main__":
    try:
        {"collectives": scenario_collectives, "ddp": scenario_ddp, "quant": scenario_quant,
         "fault": scenario_fault}[sys.argv[1]]()
        say("DONE")
        sys.stdout.flush()
        os._exit(0)  # skip interpreter teardown: peers may still be leaving the ring
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
