"""Build of the pccl Python package for ``pip install .`` (see pyproject.toml and docs/python.md).

The package itself is pure Python (python/pccl, ctypes over the C API); this script builds libpccl with
CMake (Release, the library only: no tests, examples or benchmarks, warnings not errors) and puts it
into the package directory, where pccl looks first. Everything is built in a temporary directory:
neither the checkout's build/ nor anything else in the source tree is written (setuptools' build and
egg-info directories go there too). Environment: PCCL_JOBS (parallel jobs, default 2), PCCL_CMAKE_ARGS
(extra arguments for the configure step), CMAKE (the cmake program).
"""

import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
SONAME_RE = re.compile(r"^libpccl\.so\.\d+\.\d+$")


def project_version():
    """The version of CMakeLists.txt's project() call: the package's version."""
    with open(os.path.join(HERE, "CMakeLists.txt"), encoding="utf-8") as f:
        match = re.search(r"project\(\s*pccl\s+VERSION\s+([0-9][0-9.]*)", f.read())
    if not match:
        sys.exit("setup.py: no 'project(pccl VERSION x.y.z' in CMakeLists.txt")
    return match.group(1)


WORK = tempfile.mkdtemp(prefix="pccl-pip-build-")
atexit.register(shutil.rmtree, WORK, True)


class BuildWithLibrary(build_py):
    """build_py, plus libpccl built with CMake and copied into the package as libpccl.so.MAJOR.MINOR."""

    def run(self):
        super().run()
        library = self._build_library()
        target_dir = os.path.join(self.build_lib, "pccl")
        self.mkpath(target_dir)
        shutil.copyfile(library, os.path.join(target_dir, os.path.basename(library)))  # the file, not the link

    def _build_library(self):
        cmake = os.environ.get("CMAKE") or shutil.which("cmake")
        if not cmake:
            sys.exit("setup.py: cmake not found (apt-get install cmake, or see scripts/deps.sh)")
        build_dir = os.path.join(WORK, "cmake-build")
        args = [cmake, "-S", HERE, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release", "-DPCCL_BUILD_TESTS=OFF",
                "-DPCCL_BUILD_EXAMPLES=OFF", "-DPCCL_BUILD_BENCH=OFF", "-DPCCL_BUILD_DILOCO=OFF",
                "-DPCCL_WERROR=OFF", "-DPCCL_ENABLE_HIP=OFF", "-DPCCL_ENABLE_CUDA=OFF"]
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        args += os.environ.get("PCCL_CMAKE_ARGS", "").split()
        subprocess.check_call(args)
        subprocess.check_call([cmake, "--build", build_dir, "--target", "pccl", "-j",
                               os.environ.get("PCCL_JOBS", "2")])
        src = os.path.join(build_dir, "src")
        names = [n for n in os.listdir(src) if SONAME_RE.match(n)]
        if len(names) != 1:
            sys.exit("setup.py: expected one libpccl.so.MAJOR.MINOR in %s, found %s" % (src, sorted(os.listdir(src))))
        return os.path.join(src, names[0])


class BinaryDistribution(Distribution):
    """The wheel holds a native library: tag it for this platform, not as pure Python."""

    def has_ext_modules(self):
        return True


setup(
    version=project_version(),
    packages=["pccl"],
    package_dir={"": "python"},
    cmdclass={"build_py": BuildWithLibrary},
    distclass=BinaryDistribution,
    zip_safe=False,
    options={"build": {"build_base": os.path.join(WORK, "build")},
             "egg_info": {"egg_base": WORK}},
)
