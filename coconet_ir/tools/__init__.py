"""Command-line tools: coconet-opt and coconet-run."""
