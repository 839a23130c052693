"""The artifact and what renders it: the JSON/markdown pair, the terminal table, plots, the calculator page."""
