"""A wheel that carries the op library (fgl/lib/libfgl_ops.so, put there by
scripts/build_wheel.sh) is a platform wheel; without it the package is pure
Python. Everything else is in pyproject.toml."""
from pathlib import Path

from setuptools import setup
from setuptools.dist import Distribution


class MaybeBinaryDistribution(Distribution):
    def has_ext_modules(self):
        return any((Path(__file__).parent / "fgl" / "lib").glob("*.so"))


setup(distclass=MaybeBinaryDistribution)
