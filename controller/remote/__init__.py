"""The stdlib-only scripts that run on the node (probe agent, process scan, launcher); they import nothing of ours."""
