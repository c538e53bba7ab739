"""Grading and its outputs: one submission (runner), reports and results.json (results), a folder of
submissions (batch: found by submissions, graded by grader_process, kept by records, redacted by
redaction, written by outputs), shards across machines (shard), Gradescope (gradescope), and the
class report and leaderboard (report)."""
