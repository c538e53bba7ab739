"""What course staff write and build: where an assignment's files live (assignments), its single
percent-format source (source), the generated notebooks, reference and fixtures (build), and the
student bundle (bundle)."""
