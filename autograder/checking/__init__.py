"""What checks are written with: declaring a check (checks), the grader's secret and its held-out draws
(held_out), trained weights that descend from its start (provenance), reference results read before
any worker starts (reference_results), comparing values (compare), gradients, torch-specific
primitives, perplexity thresholds, purity, and proxies into the worker (remote).
Everything here runs on the trusted side."""
