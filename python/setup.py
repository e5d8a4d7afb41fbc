"""Only what pyproject.toml cannot say: what a wheel built from a staged tree
that carries the native parts (scripts/wheel.sh puts libfreeride in
freeride/_lib and the executables in freeride/_bin) is.  Such a wheel is for
one platform, not pure Python, and puts `freeride` on PATH.  Built from
python/ as it is, the package is the pure-Python SDK, with no command."""
from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.dist import Distribution

PACKAGE = Path(__file__).parent / "freeride"
CARRIES_LIBRARY = (PACKAGE / "_lib" / "libfreeride.so.0").exists()
CARRIES_CLI = (PACKAGE / "_bin" / "freeride").exists()


class LibraryDistribution(Distribution):
    def has_ext_modules(self) -> bool:
        return CARRIES_LIBRARY


class LibraryWheel(bdist_wheel):
    def get_tag(self) -> tuple[str, str, str]:
        python, abi, platform = super().get_tag()
        # ctypes loads the library and the CLI is a program: any Python 3, no
        # Python ABI, one platform (auditwheel repair then names the manylinux one).
        return ("py3", "none", platform) if CARRIES_LIBRARY else (python, abi, platform)


setup(distclass=LibraryDistribution, cmdclass={"bdist_wheel": LibraryWheel},
      entry_points={"console_scripts": ["freeride = freeride._cli:main"]} if CARRIES_CLI else {})
