"""The model -> tables, CSV, JSON, Markdown (summary and export)."""
