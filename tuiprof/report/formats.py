"""Output formats of ``summary`` and export: a constant the argument parser
needs without loading the renderers (rich, orjson) or the analysis."""

FORMATS = ("table", "csv", "json", "markdown")
