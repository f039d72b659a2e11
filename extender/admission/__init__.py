"""The admission webhook: one skeleton for every AdmissionReview, the pod webhook on it, and the
workload warnings."""
