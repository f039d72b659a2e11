"""Connections: the listeners (caps, slow-client timeouts), TLS that follows its files, and the
webhook's self-managed certificates."""
