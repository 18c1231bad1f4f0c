"""Builds the strata package's extension module with the project's own CMake (setuptools drives it).

Only the targets the package needs are built (the module, and the `strata` launcher that starts
ranks for strata.train(..., ranks=N), shipped as strata/bin/strata), in a build folder that persists between installs:
$STRATA_BUILD_DIR, else build/python in this checkout. $CMAKE_ARGS adds configure options (e.g.
-DSTRATA_WITH_CUDA=OFF); $CMAKE_BUILD_PARALLEL_LEVEL sets the build's jobs.
"""

import os
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        build_dir = os.environ.get("STRATA_BUILD_DIR") or os.path.join(ROOT, "build", "python")
        configure = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                     "-DSTRATA_BUILD_PYTHON=ON", "-DSTRATA_BUILD_TESTS=OFF",
                     "-DSTRATA_BUILD_BENCH=OFF", f"-DPython_EXECUTABLE={sys.executable}"]
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")) and shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        try:
            import pybind11

            configure.append(f"-Dpybind11_DIR={pybind11.get_cmake_dir()}")
        except ImportError:
            pass  # CMake finds Debian's pybind11-dev
        configure += shlex.split(os.environ.get("CMAKE_ARGS", ""))
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.check_call(configure)
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "_strata", "strata", "-j", jobs])
        built = os.path.join(build_dir, "python", "strata")
        module = next(f for f in os.listdir(built) if f.startswith("_strata") and f.endswith(".so"))
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(built, module), target)
        launcher = os.path.join(os.path.dirname(target), "bin", "strata")
        os.makedirs(os.path.dirname(launcher), exist_ok=True)
        shutil.copy2(os.path.join(build_dir, "launcher", "strata"), launcher)


setup(ext_modules=[Extension("strata._strata", sources=[])], cmdclass={"build_ext": CMakeBuild})
