"""archfit: keeps pods off nodes their images cannot run on (scheduler extender and webhook)."""

from importlib import metadata

try:
    __version__ = metadata.version("archfit")
except metadata.PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
