"""What students call from their notebook: the public checks (notebook) and the PDF of their
written answers (export)."""
