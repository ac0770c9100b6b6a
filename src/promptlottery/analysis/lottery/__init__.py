"""The lottery report: its analyses, sections, headline rows, verdict, figures and report.md."""
