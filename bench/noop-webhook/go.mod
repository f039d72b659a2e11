// A do-nothing admission webhook: the reference bench/webhook_latency.py measures archfit's
// webhook against. Standard library only, so building it needs no network.
module archfit.test/bench/noop-webhook

go 1.26.0
