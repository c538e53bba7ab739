"""What checks are written with: declaring a check (checks), comparing values (compare), gradients,
torch-specific primitives, perplexity thresholds, purity, and proxies into the worker (remote).
Everything here runs on the trusted side."""
