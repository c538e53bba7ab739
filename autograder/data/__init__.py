"""Datasets used by the homework and the grader: real Shakespeare and synthetic text."""
