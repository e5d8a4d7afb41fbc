"""Only for the wheel's tag: a wheel that carries libfreeride.so (the
python_wheel build target puts it in freeride/_lib) is for one platform, not
pure Python.  Everything else is in pyproject.toml."""
from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel


class PlatformWheel(bdist_wheel):
    def finalize_options(self) -> None:
        super().finalize_options()
        self.root_is_pure = not (Path(__file__).parent / "freeride" / "_lib" / "libfreeride.so").exists()

    def get_tag(self) -> tuple[str, str, str]:
        python, abi, platform = super().get_tag()
        # ctypes loads the library: any Python 3, no Python ABI.
        return ("py3", "none", platform) if not self.root_is_pure else (python, abi, platform)


setup(cmdclass={"bdist_wheel": PlatformWheel})
