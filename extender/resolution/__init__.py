"""A pod's lookups within a deadline, and the learned evidence believed over the index."""
