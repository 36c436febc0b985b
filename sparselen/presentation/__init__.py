"""The presentation layer: what people read. Tables with their provenance (``tables``),
figures sized for the report (``plotting``), compact Markdown tables and durations (``layout``).

May import: ``interface``, ``nn``, ``statistics``, ``runtime``; never ``training``.
"""
