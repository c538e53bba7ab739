"""Grading and its outputs: one submission (runner), reports and results.json (results), a folder of
submissions (batch: found by submissions, graded by grader_process, kept by records, redacted by
redaction, written by outputs), shards across machines (shard), Gradescope (gradescope inside its
container, gradescope_zip for the zip and its settings, gradescope_access for who may read what,
gradescope_schema for results.json's format), and the class report and leaderboard (report)."""
