"""The audit's pure part: what the command line asks for, workloads read from their objects,
quantities, breakage, newer tags and the report, single-cluster and fleet. Plain data in, plain
data out: the no-I/O contract holds every module of this folder."""
