"""Serving's pure part: the webhook's CA and certificates (PEM in, PEM out). The no-I/O
contract holds every module of this folder."""
