"""Ships csrc/ and include/ inside the package (oasr/_data/) so installed copies can JIT."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithKernelSources(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return  # an editable install reads the sources from the checkout
        data = Path(self.build_lib) / "oasr" / "_data"
        for folder in ("csrc", "include"):
            shutil.rmtree(data / folder, ignore_errors=True)
            shutil.copytree(ROOT / folder, data / folder)


setup(cmdclass={"build_py": BuildPyWithKernelSources})
