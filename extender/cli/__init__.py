"""The `archfit` command: its subcommands, what `inspect` prints of images, and the
KubeSchedulerConfiguration it writes."""
