module archfit.dev/bench/loadgen

go 1.22
