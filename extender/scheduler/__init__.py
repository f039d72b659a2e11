"""The scheduler extender: its app and the filter and prioritize verbs."""
