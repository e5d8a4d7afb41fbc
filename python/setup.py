"""Only for the wheel's kind: a wheel that carries libfreeride.so (the
python_wheel build target puts it in freeride/_lib) is for one platform, not
pure Python.  Everything else is in pyproject.toml."""
from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.dist import Distribution

CARRIES_LIBRARY = (Path(__file__).parent / "freeride" / "_lib" / "libfreeride.so").exists()


class LibraryDistribution(Distribution):
    def has_ext_modules(self) -> bool:
        return CARRIES_LIBRARY


class LibraryWheel(bdist_wheel):
    def get_tag(self) -> tuple[str, str, str]:
        python, abi, platform = super().get_tag()
        # ctypes loads the library: any Python 3, no Python ABI, one platform.
        return ("py3", "none", platform) if CARRIES_LIBRARY else (python, abi, platform)


setup(distclass=LibraryDistribution, cmdclass={"bdist_wheel": LibraryWheel})
