"""Everything that touches untrusted code: reading a submission without running it (extract), the
subset graded code must keep to (policy, forbidden), the worker process that runs it (worker,
support, wire) and what confines that process (lifecycle and the files beside it).

Nothing is imported here: the worker imports this package, and must not load the grader's side.
"""
