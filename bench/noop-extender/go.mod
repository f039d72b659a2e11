// A do-nothing kube-scheduler extender: the reference bench/scheduler_throughput.py
// measures archfit against. Standard library only, so building it needs no network.
module archfit.test/bench/noop-extender

go 1.26.0
