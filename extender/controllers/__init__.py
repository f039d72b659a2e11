"""What runs while holding a Lease: the releaser, the mismatch watcher, the policy's publisher."""
