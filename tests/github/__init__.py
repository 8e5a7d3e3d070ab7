"""The CI gate: SARIF, JUnit, GitHub annotations, step summary and outputs, Markdown, the Action."""
