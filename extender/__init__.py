"""archfit: keeps pods off nodes their images cannot run on (scheduler extender and webhook)."""

__version__ = "0.1.0"
"""The one place the version is written: pyproject.toml reads it (setuptools dynamic), and a
literal costs serve's start-up nothing, where importlib.metadata costs 10 to 20 ms."""
