"""Resolving an image's platforms in tiers (the last answers, this replica's cache, the shared
table, the registry) within a request's deadline, and the learned evidence believed over them."""
