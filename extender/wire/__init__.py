"""Wire types and bounded JSON: kube-scheduler's extender and the API server's AdmissionReview,
parsed and rendered. No I/O (held by the same contract as the core)."""
