"""`archfit lint`: rendered manifests checked for images that lack a platform their pods may
run on, before a cluster sees them."""
