"""Command-line tools: coconet-opt, coconet-run and coconet-bench."""
