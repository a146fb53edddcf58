"""The ctypes layer: version, struct layouts against a C program, struct_size accepted by the library,
library lookup, import without numpy/torch, the exception classes."""

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import _support  # noqa: F401 - puts the package on sys.path
import pccl
from pccl import _lib


def _run_python(code, env_updates=None, remove=(), timeout=30):
    env = dict(os.environ)
    for key in remove:
        env.pop(key, None)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(pccl.__file__)))
    env.update(env_updates or {})
    # cwd: not the source tree, whose pccl/ would shadow the one PYTHONPATH names
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=tempfile.gettempdir())


class VersionTest(unittest.TestCase):
    def test_runtime_version_matches_package(self):
        major, minor, patch = pccl.version_info()
        self.assertEqual((major, minor), _lib.EXPECTED_VERSION)
        self.assertEqual(pccl.version(), "%d.%d.%d" % (major, minor, patch))
        self.assertEqual(pccl.__version__, pccl.version())
        expected = os.environ.get("PCCL_EXPECTED_VERSION")  # the CMake project version, set by ctest
        if expected:
            self.assertEqual(pccl.__version__, expected)

    def test_library_path_is_the_one_configured(self):
        path = os.environ.get("PCCL_LIBRARY")
        if path:
            self.assertEqual(pccl.library_path(), path)


class StructLayoutTest(unittest.TestCase):
    """Sizes, field offsets and _INIT values of every struct, against what the C compiler says."""

    @classmethod
    def setUpClass(cls):
        exe = os.environ.get("PCCL_STRUCT_LAYOUT_BIN")
        if not exe:
            raise unittest.SkipTest("PCCL_STRUCT_LAYOUT_BIN not set (ctest sets it)")
        out = subprocess.run([exe], capture_output=True, text=True, timeout=30, check=True).stdout
        cls.c = {}
        for line in out.splitlines():
            key, _, value = line.partition(" ")
            cls.c[key] = value

    def test_sizes_and_offsets(self):
        for cname, struct in _lib.STRUCTS.items():
            self.assertEqual(ctypes.sizeof(struct), int(self.c[cname]), cname)
            for field, _ in struct._fields_:
                self.assertEqual(getattr(struct, field).offset, int(self.c["%s.%s" % (cname, field)]),
                                 "%s.%s" % (cname, field))
        # every field of the C structs is mirrored
        mirrored = {"%s.%s" % (c, f) for c, s in _lib.STRUCTS.items() for f, _ in s._fields_}
        in_c = {k for k in self.c if "." in k and not k.startswith("init.")}
        self.assertEqual(mirrored, in_c)

    def test_init_macros(self):
        cc = _lib.comm_config_init()
        self.assertEqual(" ".join(str(getattr(cc, f)) for f in (
            "struct_size", "config_version", "peer_group", "connections_per_peer", "heartbeat_interval_ms",
            "peer_timeout_ms", "connect_timeout_ms", "handshake_timeout_ms", "encrypt", "op_timeout_ms",
            "segment_bytes", "same_host_connections", "max_concurrent_ops", "master_reconnect_ms")),
            self.c["init.pcclCommConfig_t"])
        ro = _lib.reduce_options_init()
        self.assertEqual("%d %d %d %d %d" % (ro.struct_size, ro.tag, ro.quant, ro.compress, ro.location),
                         self.c["init.pcclReduceOptions_t"])
        ss = _lib.shared_state_init()
        self.assertEqual("%d %d %d %d" % (ss.struct_size, ss.revision, ss.count, ss.compress),
                         self.c["init.pcclSharedState_t"])
        mc = _lib.master_config_init()
        self.assertEqual(" ".join(str(getattr(mc, f)) for f in (
            "struct_size", "config_version", "secret_len", "heartbeat_interval_ms", "peer_timeout_ms",
            "handshake_timeout_ms", "max_peers", "max_pending_handshakes", "max_concurrent_ops", "encrypt",
            "announce_window_ms", "probe_budget_ms", "probe_bytes", "auto_optimize", "standby", "rebuild_window_ms",
            "etcd_lease_ms")),
            self.c["init.pcclMasterConfig_t"])
        self.assertEqual(str(_lib.comm_stats_init().struct_size), self.c["init.pcclCommStats_t"])
        self.assertEqual(str(_lib.master_stats_init().struct_size), self.c["init.pcclMasterStats_t"])
        self.assertIsNone(cc.region)
        self.assertEqual(self.c["init.pcclCommConfig_t.region"], "NULL")
        self.assertEqual(str(cc.gather_bytes), self.c["init.pcclCommConfig_t.gather_bytes"])
        self.assertEqual(str(cc.inbound), self.c["init.pcclCommConfig_t.inbound"])
        self.assertEqual(int(self.c["max_region_len"]), _lib.MAX_REGION_LEN)
        self.assertEqual(int(self.c["config_version"]), _lib.CONFIG_VERSION)
        v = pccl.version_info()
        self.assertEqual(int(self.c["version"]), v[0] * 10000 + v[1] * 100 + v[2])


class PrototypeTest(unittest.TestCase):
    def test_every_function_of_the_header_is_declared(self):
        header = os.environ.get("PCCL_HEADER")
        if not header:
            self.skipTest("PCCL_HEADER not set (ctest sets it)")
        import re

        with open(header) as f:
            text = f.read()
        declared = set(re.findall(r"PCCL_API\s+[^;(]*?\b(pccl\w+)\s*\(", text))
        self.assertTrue(declared)
        self.assertEqual(declared, set(_lib.PROTOTYPES))

    def test_structs_are_accepted_by_the_library(self):
        # Config structs: creating a master and a communicator checks struct_size and config_version.
        with pccl.Master() as master:
            with pccl.Communicator(master.address, listen_address="127.0.0.1:0") as comm:
                stats = comm.stats()  # pcclGetStats checks the stats struct_size
                self.assertEqual(stats.allreduce_ops, 0)
                # ReduceOptions and SharedState struct_size are checked before "not connected".
                import array

                buf = array.array("f", [1.0, 2.0])
                with self.assertRaises(pccl.InvalidUsageError) as cm:
                    comm.all_reduce(buf)
                self.assertNotIn("PCCL_REDUCE_OPTIONS_INIT", cm.exception.detail)
                with self.assertRaises(pccl.InvalidUsageError) as cm:
                    comm.sync_shared_state({"x": buf})
                self.assertNotIn("PCCL_SHARED_STATE_INIT", cm.exception.detail)
        # A struct of another size is refused, with the reason.
        lib = _lib.load()
        cfg = _lib.master_config_init()
        cfg.struct_size -= 8
        handle = ctypes.c_void_p()
        self.assertEqual(lib.pcclMasterCreate(ctypes.byref(cfg), ctypes.byref(handle)), pccl.Result.INVALID_ARGUMENT)
        self.assertIn("struct_size", lib.pcclGetLastError(None).decode())

    def test_error_strings(self):
        self.assertEqual(pccl.error_string(pccl.Result.AUTH_FAILED), "authentication failed")
        from pccl import errors

        for code, name in errors._STATIC_NAMES.items():  # the fallback table matches the library
            self.assertEqual(pccl.error_string(code), name)
        self.assertEqual(pccl.error_string(99), "unknown pcclResult_t value")


class ExceptionTest(unittest.TestCase):
    def test_one_class_per_code(self):
        for code in pccl.Result:
            if code == pccl.Result.SUCCESS:
                continue
            cls = pccl.error_class(code)
            self.assertTrue(issubclass(cls, pccl.PcclError))
            self.assertEqual(cls.code, code)
            e = cls(code, "the detail")
            self.assertEqual((e.code, e.detail), (code, "the detail"))
            self.assertEqual(e.name, pccl.error_string(code))
            self.assertEqual(str(e), e.name + ": the detail")
        self.assertTrue(issubclass(pccl.PcclTimeoutError, TimeoutError))
        self.assertTrue(issubclass(pccl.InvalidArgumentError, ValueError))
        self.assertTrue(pccl.PeerLostError.retryable and pccl.KickedError.fatal)
        self.assertFalse(pccl.InvalidArgumentError.retryable)
        # A real disagreement is not cured by a retry; a race with a ring change is.
        self.assertFalse(pccl.MismatchError.retryable)
        self.assertTrue(pccl.TopologyChangedError.retryable)
        self.assertEqual(set(pccl.RETRYABLE_ERRORS),
                         {pccl.PeerLostError, pccl.TopologyChangedError, pccl.PcclTimeoutError})

    def test_pickles(self):
        import pickle

        e = pickle.loads(pickle.dumps(pccl.PeerLostError(detail="peer 3 left")))
        self.assertIsInstance(e, pccl.PeerLostError)
        self.assertEqual(e.detail, "peer 3 left")


class LookupTest(unittest.TestCase):
    def test_bad_pccl_library_raises_a_clear_error_on_first_use(self):
        r = _run_python(
            "import pccl\n"
            "try:\n"
            "    pccl.Master()\n"
            "except pccl.LibraryNotFoundError as e:\n"
            "    assert isinstance(e, OSError) and isinstance(e, pccl.PcclError)\n"
            "    print('RAISED', e)\n",
            env_updates={"PCCL_LIBRARY": "/nonexistent/libpccl.so"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("RAISED", r.stdout)
        self.assertIn("PCCL_LIBRARY", r.stdout)
        self.assertIn("/nonexistent/libpccl.so", r.stdout)

    def test_installed_tree(self):
        """A package in <prefix>/lib/python3/dist-packages finds <prefix>/lib/<multiarch>/libpccl.so.0.1."""
        lib = os.environ.get("PCCL_LIBRARY")
        if not lib:
            self.skipTest("PCCL_LIBRARY not set")
        with tempfile.TemporaryDirectory() as prefix:
            site = os.path.join(prefix, "lib", "python3", "dist-packages")
            shutil.copytree(os.path.dirname(pccl.__file__), os.path.join(site, "pccl"),
                            ignore=shutil.ignore_patterns("__pycache__"))
            libdir = os.path.join(prefix, "lib", "x86_64-linux-gnu")
            os.makedirs(libdir)
            os.symlink(os.path.realpath(lib), os.path.join(libdir, "libpccl.so.0.1"))
            r = _run_python("import pccl; print(pccl.library_path()); print(pccl.version())",
                            env_updates={"PYTHONPATH": site, "PYTHONDONTWRITEBYTECODE": "1"},
                            remove=("PCCL_LIBRARY",))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.split()[0], os.path.join(libdir, "libpccl.so.0.1"))

    def test_import_without_numpy_and_torch(self):
        r = _run_python(
            "import sys\n"
            "sys.modules['numpy'] = None\n"  # makes 'import numpy' fail
            "sys.modules['torch'] = None\n"
            "import array, pccl\n"
            "assert 'numpy' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
            "with pccl.Master() as m:\n"
            "    with pccl.Communicator(m.address, listen_address='127.0.0.1:0') as c:\n"
            "        c.connect()\n"
            "        x = array.array('d', [1.5, 2.5])\n"
            "        info = c.all_reduce(x, op='sum')\n"
            "        assert list(x) == [1.5, 2.5] and info.world_size == 1, (list(x), info)\n"
            "        try:\n"
            "            c.all_reduce([1.0, 2.0])\n"
            "        except pccl.InvalidArgumentError as e:\n"
            "            print('REFUSED', e.detail)\n"
            "print('OK')\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("OK", r.stdout)
        self.assertIn("REFUSED", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
