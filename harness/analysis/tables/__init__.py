"""The table builders of harness.analysis.context.Compare, one module per theme; each returns Table(s) whose rows
hold numbers and typed values (harness.analysis.cells), never display strings a reader has to parse back."""
