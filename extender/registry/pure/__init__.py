"""The registry's pure part: image references parsed as distribution/reference does, and the
cloud registries only a credential plugin can read. The no-I/O contract holds every module
of this folder."""
