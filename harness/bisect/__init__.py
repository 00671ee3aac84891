"""harness.bisect: which torch release changed a number (docs/bisect.md). The command line is __main__; the
candidates (index listing, range, specs) candidates.py; the search with its classification rule search.py; the real
measurement (install, check, worker processes, reuse) measure.py; what it prints and keeps explain.py. No torch."""
