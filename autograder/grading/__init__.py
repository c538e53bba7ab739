"""Grading and its outputs: one submission (runner), reports and results.json (results), a folder of
submissions (batch), shards across machines (shard), Gradescope (gradescope), and the class report
(report)."""
