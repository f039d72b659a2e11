"""archfit's Kubernetes client, read as client-go is: kubeconfigs and the pod's service
account (kubeconfig, rest_config), what each request carries (transport, tls, exec_plugin,
auth_providers), the REST API (api), list-watches (watching) and blocking calls (calls).
It imports none of archfit's adapters (pyproject.toml's contracts); docs/kubeconfig.md."""
