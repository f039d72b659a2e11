"""Fixtures shared by every test folder: real registry, token server and redis processes."""

pytest_plugins = ["tests.support.fixtures"]
