"""Run by pip_install.sh with the venv's python (-I: neither the checkout nor PYTHONPATH on sys.path):
`pccl` and its libpccl must come from the venv; a master here and N peer processes of this script
all-reduce on loopback. Every wait has a deadline."""

import os
import subprocess
import sys

import pccl

DEADLINE_S = 120
SETTINGS = dict(listen_address="127.0.0.1:0", heartbeat_interval_ms=200, peer_timeout_ms=5000,
                connect_timeout_ms=60000, op_timeout_ms=60000)


def inside_venv(path):
    return os.path.realpath(path).startswith(os.path.realpath(sys.prefix) + os.sep)


def peer(address, index, world):
    """Joins; the first peer admits the others when told to on stdin; all-reduces; prints the result."""
    import array

    with pccl.Communicator(address, **SETTINGS) as comm:
        comm.connect()
        print("connected", flush=True)
        if index == 0:
            assert sys.stdin.readline().strip() == "vote"
            comm.update_topology()
        x = array.array("d", [float(index + 1)] * 1000)
        info = comm.all_reduce(x, op="sum", tag=1)
        print("result %s %d %d" % (x[0], info.world_size, comm.world_size), flush=True)


def main(world):
    assert "PCCL_LIBRARY" not in os.environ and "PYTHONPATH" not in os.environ
    assert inside_venv(pccl.__file__), "pccl imported from %s, not from the venv %s" % (pccl.__file__, sys.prefix)
    library = pccl.library_path()
    assert inside_venv(library), "libpccl loaded from %s, not from the venv" % library
    print("pccl %s from %s, libpccl %s from %s" % (pccl.__version__, pccl.__file__, pccl.version(), library))
    with pccl.Master(listen="127.0.0.1:0", heartbeat_interval_ms=200, peer_timeout_ms=5000) as master:
        def start(i):
            return subprocess.Popen([sys.executable, "-I", os.path.abspath(__file__), "peer", master.address, str(i),
                                     str(world)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

        procs = [start(0)]
        try:
            assert procs[0].stdout.readline().strip() == "connected"  # the child has a deadline: connect
            procs += [start(i) for i in range(1, world)]
            master.wait_for_peers(1, world - 1, DEADLINE_S)  # the others wait for admission
            procs[0].stdin.write("vote\n")
            procs[0].stdin.flush()
            expected = float(sum(range(1, world + 1)))
            for i, p in enumerate(procs):
                out, _ = p.communicate(timeout=DEADLINE_S)
                assert p.returncode == 0, "peer %d exited with %d" % (i, p.returncode)
                last = out.strip().splitlines()[-1].split()
                assert last == ["result", str(expected), str(world), str(world)], "peer %d printed %r" % (i, out)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    print("all-reduce of %d peers OK" % world)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "peer":
        peer(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
