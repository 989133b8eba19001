"""Everything that runs the user's script: profiling, A/B statistics, --apply, baselines, git."""
